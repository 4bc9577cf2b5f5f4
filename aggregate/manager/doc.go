// Package manager is the DataEngineUpgradeManager aggregate: the user's intent
// to upgrade the V2 data engine of some nodes, the prechecks that gate it, the
// deterministic node plan and the outcome of each node, as a pure state machine.
//
// Evolve folds the manager's events (see package events) into a State; Decide
// turns a Command into the events to append. Neither does I/O or reads a clock.
// The flow is
//
//	UpgradeRequested                          → pending
//	PrecheckPassed / PrecheckFailed …         → initializing
//	UpgradePlanned (every precheck passed)    → initializing, with a plan
//	NodeScheduled → NodeFinished, per node    → upgrading
//	UpgradeCompleted                          → completed
//
// with UpgradeFailed (→ error) allowed from any non-terminal state and
// CancelRequested then UpgradeCancelled (→ cancelled) for the deletion of the
// manager. Terminal states accept no event: a new upgrade needs a new manager.
package manager
