// Package nodeupgrade is the NodeDataEngineUpgrade aggregate: the upgrade of
// one node under one manager, walked step by step (events.NodeSteps), with the
// state of every v2 volume concerned and whether the current step is stalled,
// as a pure state machine.
//
// Evolve folds the node's events (see package events) into a State; Decide
// turns a Command into the events to append. Neither does I/O or reads a clock.
//
// A node moves only forward, one step per NodeStateChanged, and leaves
// finalizing only through NodeUpgradeCompleted. A stall (NodeStalled) never
// changes the step: stuck is not error. NodeUpgradeFailed ends it in error
// from any step; a cancel (NodeCancelRequested then NodeUpgradeCancelled)
// ends it cancelled once the worker brought it to a safe point. Terminal
// states accept no event.
package nodeupgrade
