package orchestrator

import (
	"fmt"

	"github.com/switchback-dev/switchback/aggregate"
	"github.com/switchback-dev/switchback/aggregate/manager"
	"github.com/switchback-dev/switchback/aggregate/nodeupgrade"
	"github.com/switchback-dev/switchback/events"
)

// The orchestrator's reaction, pure: what to read of the upgrade for an
// event (reads), and what to do given what was read (react). React (in
// reaction_apply.go) gathers, calls react, and applies its effects in order.

// reads says what react needs to have read for an event.
type reads struct {
	// manager: the manager's state, loaded; plan: only its plan (the
	// cached one will do: it does not change once a node is scheduled).
	manager, plan bool
	// node, when set, names the node upgrade to load, given the manager.
	node func(e events.Envelope, m manager.State) string
}

// reading is what was read for a reaction.
type reading struct {
	manager manager.State
	node    nodeupgrade.State
}

// effectKind is what an effect does.
type effectKind int

const (
	// effectManager executes command on the manager aggregate.
	effectManager effectKind = iota
	// effectPublish issues the Advance command of node at step (attempt,
	// why: its id).
	effectPublish
	// effectCancelNode records a cancel request on node, or confirms the
	// cancel at once when the node never started.
	effectCancelNode
	// effectPrechecks reads the cluster, runs the prechecks and records
	// them with the plan.
	effectPrechecks
	// effectGate applies NoOtherUpgrader before a new node may start: a
	// hold (or a gate that cannot read Longhorn's upgrader) stops the
	// effects after it.
	effectGate
	// effectGateAdvisory applies it too, but the effects after it run
	// whatever it finds (the node's outcome is recorded even while held).
	effectGateAdvisory
	// effectRecordTarget brings the event's volume's record of its target
	// away in line with the node's history (targets.go).
	effectRecordTarget
	// effectRequestHashing asks Longhorn to hash the snapshots of the
	// event's volume, as the node's history requests (hashing.go).
	effectRequestHashing
	// effectRemoveSnapshots removes every node's snapshots once the last
	// node completed (snapshots.go).
	effectRemoveSnapshots
	// effectRaiseReplicas answers a node's request for a temporary
	// replica (replicas.go).
	effectRaiseReplicas
	// effectRestoreReplicas restores every volume raised for a temporary
	// replica, once the upgrade ended (replicas.go).
	effectRestoreReplicas
	// effectMarkNodes brings the marks of the nodes still to come in line
	// with the manager's history (marks.go): node's (ended: its outcome
	// is about to be recorded), or every planned node's when node is "".
	effectMarkNodes
)

// effect is one thing a reaction does.
type effect struct {
	kind    effectKind
	command manager.Command
	node    string
	attempt int
	step    events.NodeState
	why     string
	ended   bool
}

// String is the effect as the table tests name it.
func (f effect) String() string {
	switch f.kind {
	case effectManager:
		return fmt.Sprintf("manager %T", f.command)
	case effectPublish:
		return fmt.Sprintf("publish %s attempt %d %s (%s)", f.node, f.attempt, f.step, f.why)
	case effectCancelNode:
		return "cancel " + f.node
	case effectPrechecks:
		return "prechecks"
	case effectGate:
		return "gate"
	case effectGateAdvisory:
		return "gate (advisory)"
	case effectRecordTarget:
		return "record target away"
	case effectRequestHashing:
		return "request hashing"
	case effectRemoveSnapshots:
		return "remove snapshots"
	case effectRaiseReplicas:
		return "raise replicas"
	case effectRestoreReplicas:
		return "restore replicas"
	case effectMarkNodes:
		switch {
		case f.node == "":
			return "mark planned nodes"
		case f.ended:
			return "unmark " + f.node
		}
		return "mark " + f.node
	}
	return fmt.Sprintf("effect %d", f.kind)
}

// upgradingNode is the manager's node in flight.
func upgradingNode(_ events.Envelope, m manager.State) string { return m.UpgradingNode }

// eventNode is the node the event is about.
func eventNode(e events.Envelope, _ manager.State) string { return e.Aggregate.Node }

// readsOf says what to read for e.
func readsOf(e events.Envelope) reads {
	switch d := e.Data.(type) {
	case events.UpgradeReleased, events.NodeUpgradeFailed:
		return reads{}
	case events.NodeStateChanged:
		return reads{plan: true}
	case events.UpgradeFailed:
		return reads{manager: true, node: upgradingNode}
	case events.NodeCancelRequested:
		return reads{manager: true, node: eventNode}
	case events.VolumeStateChanged:
		if awayReaction(d.To) {
			return reads{node: eventNode}
		}
	case events.HashingRequested:
		return reads{node: eventNode}
	case events.TemporaryReplicaRequested:
		return reads{manager: true, node: eventNode}
	case events.RebuildPlanned, events.RebuildStarted, events.RebuildFinished,
		events.ReplicaCountRaised, events.TemporaryReplicaAdded, events.ReplicaCountRestored:
		return reads{} // nothing to do: the worker's own records
	}
	return reads{manager: true}
}

// react decides the effects of e given what was read (r). It is idempotent
// in the sense the orchestrator needs: a repeated event decides the same
// commands again, which the aggregates and the work queue recognise.
func react(e events.Envelope, r reading) []effect {
	effects := decideEffects(e, r)
	if mark, ok := markEffect(e, r.manager); ok {
		// First: the pods a node about to start moves should find the
		// marks in place, and a node's mark goes before the next starts.
		effects = append([]effect{mark}, effects...)
	}
	return effects
}

// decideEffects is react without the marks of the nodes still to come.
func decideEffects(e events.Envelope, r reading) []effect {
	st, node := r.manager, e.Aggregate.Node
	mgr := func(cmd manager.Command) effect { return effect{kind: effectManager, command: cmd} }
	switch d := e.Data.(type) {
	case events.UpgradeRequested:
		if st.Planned() || st.Terminal() || st.CancelRequested {
			return nil
		}
		return []effect{{kind: effectPrechecks}}
	case events.UpgradeReleased:
		// Release schedules the next node in the same decision; should only
		// the release be stored, this completes it.
		return []effect{mgr(manager.ScheduleNext{Meta: aggregate.Meta{ID: id(e)}})}
	case events.UpgradePlanned:
		return []effect{{kind: effectGate}, mgr(manager.ScheduleNext{Meta: aggregate.Meta{ID: id(e)}})}
	case events.NodeScheduled:
		if st.UpgradingNode != d.Node || st.Nodes[d.Node].Attempt != d.Attempt {
			return nil // superseded
		}
		return []effect{{kind: effectPublish, node: d.Node, attempt: d.Attempt, step: events.NodePending, why: "start"}}
	case events.UpgradeFailed:
		// A node still mid-step when the upgrade failed (because of another
		// cause, such as a dead-lettered command) is brought to its safe
		// point, and the temporary replicas restored once it is there.
		if st.UpgradingNode == "" || !r.node.Exists || r.node.Terminal() {
			return restoreReplicas(st)
		}
		return []effect{{kind: effectCancelNode, node: st.UpgradingNode}}
	case events.CancelRequested:
		if st.UpgradingNode == "" || st.Terminal() {
			return nil
		}
		return []effect{{kind: effectCancelNode, node: st.UpgradingNode}}
	case events.NodeUpgradeStarted:
		if st.Terminal() || st.CancelRequested {
			// Started after the manager stopped: bring it to its safe point.
			return []effect{{kind: effectCancelNode, node: node}}
		}
		// The worker that started the node runs its first step in the same
		// delivery of the start command: nothing to issue.
		return nil
	case events.NodeStateChanged:
		// The hot path: one per step. The command is issued from the event
		// and the plan alone; should the node have moved on meanwhile (a
		// replayed event), the worker finds it past the step and acks.
		return []effect{{kind: effectPublish, node: node, attempt: st.Nodes[node].Attempt, step: d.To, why: "step"}}
	case events.NodeCancelRequested:
		if r.node.Terminal() {
			return nil
		}
		// Wakes an idle worker; a busy one sees the request in its node's
		// history, whose events wake its wait (nodeworker/wake.go).
		return []effect{{kind: effectPublish, node: node, attempt: r.node.Attempt, step: r.node.State, why: "cancel"}}
	case events.NodeUpgradeCompleted:
		record := mgr(manager.RecordNodeOutcome{Meta: aggregate.Meta{ID: id(e)}, Node: node, State: events.NodeCompleted, Message: d.Message})
		// Before the next node starts (which recording this outcome does),
		// Longhorn's own upgrader is checked again.
		_, more := st.NextNode()
		switch running := !st.Terminal() && !st.CancelRequested && st.UpgradingNode == node; {
		case running && more:
			return []effect{{kind: effectGateAdvisory}, record}
		case running:
			// The last node: the upgrade's snapshots go before it is
			// recorded completed, so that completed means nothing is left.
			return append(restoreReplicas(st), effect{kind: effectRemoveSnapshots}, record)
		}
		return []effect{record}
	case events.NodeUpgradeFailed:
		return append(restoreReplicas(st), mgr(manager.RecordNodeOutcome{Meta: aggregate.Meta{ID: id(e)}, Node: node, State: events.NodeError,
			Message: fmt.Sprintf("node %s failed at %s: %s", node, d.Step, d.Message)}))
	case events.NodeUpgradeCancelled:
		// The node is at its safe point: the temporary replicas go, or
		// are kept where deleting one would leave its volume short.
		if st.Terminal() {
			return restoreReplicas(st)
		}
		return append(restoreReplicas(st), mgr(manager.ConfirmCancelled{Meta: aggregate.Meta{ID: id(e)}, Node: node, Message: d.Message}))
	case events.VolumeStateChanged:
		if !awayReaction(d.To) || !r.node.Exists {
			return nil
		}
		return []effect{{kind: effectRecordTarget, node: node}}
	case events.HashingRequested:
		if rb := r.node.Rebuilds[d.Volume]; !r.node.Exists || r.node.Terminal() || rb.Planned != nil {
			return nil // decided without it since
		}
		return []effect{{kind: effectRequestHashing, node: node}}
	case events.TemporaryReplicaRequested:
		if !r.node.Exists || r.node.Terminal() || st.Terminal() {
			return nil
		}
		return []effect{{kind: effectRaiseReplicas, node: node}}
	case events.UpgradeCancelled:
		return restoreReplicas(st)
	}
	return nil
}

// restoreReplicas is the restore of the temporary replicas, for an
// upgrade that may have made some (spec.replicaPolicy add-first).
func restoreReplicas(st manager.State) []effect {
	if st.ReplicaPolicy != events.ReplicaPolicyAddFirst {
		return nil
	}
	return []effect{{kind: effectRestoreReplicas}}
}
