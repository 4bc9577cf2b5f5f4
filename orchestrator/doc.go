// Package orchestrator is the process manager: it reads the history in
// stream order and turns it into the next decisions (prechecks and plan,
// scheduling, node commands on the work queue, outcomes, cancels), holding
// an upgrade between nodes while Longhorn's own upgrader would race it.
//
// Files by concern: delivery.go reads the stream and acknowledges;
// reaction_decide.go is the reaction to one event, pure (what to read, then the
// effects given what was read); reaction_apply.go gathers, reacts and applies;
// active.go is the read model of the upgrades in progress;
// upgrader_gate.go the hold between nodes.
package orchestrator
