// Package precheck decides whether an upgrade may start. Each check is a pure
// function of an Input snapshot returning pass or fail, a CamelCase reason
// and a human message, in the manner of an admission policy: the check's name
// is the condition type it is projected to on the DataEngineUpgradeManager,
// and each result becomes a precheck event.
//
// Run evaluates every check, in a fixed order, each independently of the
// others, so that a user sees every problem at once instead of fixing them
// one retry at a time. Any failed check refuses the upgrade before a node is
// touched.
package precheck
