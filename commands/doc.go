// Package commands executes commands against Switchback's two aggregates,
// the upgrade managers and the node upgrades: load (snapshot, cache, tail),
// decide, append with the per-subject concurrency check under ids derived
// from the command and the version decided on, and on a conflict start over.
// An Executor binds it to one store, one source and one clock; the
// orchestrator (package orchestrator), the intake (commands/intake) and each
// node's worker (nodeworker) hold one each.
package commands
