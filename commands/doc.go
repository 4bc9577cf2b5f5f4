// Package commands is Switchback's write side: it executes commands against
// the two aggregates (load, decide, append with the concurrency check, retry
// on conflict), and runs the orchestrator, the process manager that reacts to
// history by scheduling nodes and issuing node commands.
package commands
