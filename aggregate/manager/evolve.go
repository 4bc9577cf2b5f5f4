package manager

import (
	"fmt"
	"maps"
	"slices"

	"github.com/switchback-dev/switchback/aggregate"
	"github.com/switchback-dev/switchback/events"
)

// FoldSkipping applies history to s in order, skipping illegal events and returning
// their errors joined.
func FoldSkipping(s State, history ...events.Envelope) (State, error) {
	return aggregate.FoldSkipping(s, Evolve, history)
}

// Evolve applies one manager event to s. An event that is illegal in s (wrong
// aggregate, malformed payload, or a transition the machine does not allow)
// leaves s unchanged and returns a *TransitionError.
func Evolve(s State, e events.Envelope) (State, error) {
	if err := s.subject().Admit(e, foreign(&s, e)); err != nil {
		return s, err
	}
	next, err := apply(s, e)
	if err != nil {
		return s, err
	}
	next.UpdatedAt = e.Time
	next.Transitions++
	return next, nil
}

// apply is the manager's own rules: the transition e makes from s.
func apply(s State, e events.Envelope) (next State, err error) {
	switch d := e.Data.(type) {
	case events.UpgradeRequested:
		next, err = applyRequested(s, e, d)
	case events.PrecheckPassed:
		next, err = applyPrecheck(s, e, PrecheckResult{Check: d.Check, Passed: true, Reason: d.Reason, Message: d.Message})
	case events.PrecheckFailed:
		next, err = applyPrecheck(s, e, PrecheckResult{Check: d.Check, Passed: false, Reason: d.Reason, Message: d.Message})
	case events.UpgradePlanned:
		next, err = applyPlanned(s, e, d)
	case events.NodeScheduled:
		next, err = applyScheduled(s, e, d)
	case events.NodeFinished:
		next, err = applyFinished(s, e, d)
	case events.UpgradeCompleted:
		next, err = applyCompleted(s, e, d)
	case events.UpgradeFailed:
		next = s
		next.State = events.ManagerError
		next.Message = d.Message
		next.FailReason = d.Reason
		next.FailedNode = d.Node
	case events.CancelRequested:
		next, err = applyCancelRequested(s, e, d)
	case events.UpgradeCancelled:
		next, err = applyCancelled(s, e, d)
	case events.UpgradeHeld:
		next, err = applyHeld(s, e, d)
	case events.UpgradeReleased:
		next, err = applyReleased(s, e, d)
	default:
		return s, illegal(s, e, "not a manager event")
	}
	return next, err
}

// foreign says why e is not addressed to s, or "" when it is: a manager
// event on the manager's own ref.
func foreign(s *State, e events.Envelope) string {
	if e.Aggregate.IsNode() {
		return "node-upgrade event offered to the manager aggregate"
	}
	if s.Exists && e.Aggregate.Manager != s.Ref {
		return fmt.Sprintf("event belongs to manager %s (uid %s), not %s (uid %s)",
			e.Aggregate.Manager, e.Aggregate.Manager.UID, s.Ref, s.Ref.UID)
	}
	return ""
}

func applyRequested(s State, e events.Envelope, d events.UpgradeRequested) (State, error) {
	if s.Exists {
		return s, illegal(s, e, "the upgrade was already requested")
	}
	ref := events.ManagerRef{Namespace: d.Namespace, Name: d.Name, UID: d.UID}
	if ref != e.Aggregate.Manager {
		return s, illegal(s, e, "payload names manager %s (uid %s) but the event is on %s (uid %s)",
			ref, ref.UID, e.Aggregate.Manager, e.Aggregate.Manager.UID)
	}
	return State{
		Exists:         true,
		Ref:            ref,
		Generation:     d.Generation,
		DataEngine:     d.DataEngine,
		RequestedNodes: cloneStrings(d.Nodes),

		AllowNodesWithoutReplicaScheduling: d.AllowNodesWithoutReplicaScheduling,
		InitiatorPolicy:                    d.InitiatorPolicy,
		ReplicaPolicy:                      d.ReplicaPolicy,
		State:                              events.ManagerPending,
		UpdatedAt:                          s.UpdatedAt,
		Transitions:                        s.Transitions,
	}, nil
}

func applyPrecheck(s State, e events.Envelope, r PrecheckResult) (State, error) {
	if s.State != events.ManagerPending && s.State != events.ManagerInitializing {
		return s, illegal(s, e, "prechecks are recorded only in %s or %s", events.ManagerPending, events.ManagerInitializing)
	}
	if s.Planned() {
		return s, illegal(s, e, "the upgrade is already planned")
	}
	if slices.ContainsFunc(s.Prechecks, func(p PrecheckResult) bool { return p.Check == r.Check }) {
		return s, illegal(s, e, "precheck %s is already recorded", r.Check)
	}
	s.State = events.ManagerInitializing
	// Clip so append copies: the caller's state must keep its own slice.
	s.Prechecks = append(slices.Clip(s.Prechecks), r)
	return s, nil
}

func applyPlanned(s State, e events.Envelope, d events.UpgradePlanned) (State, error) {
	switch {
	case s.State != events.ManagerInitializing:
		return s, illegal(s, e, "a plan needs state %s", events.ManagerInitializing)
	case s.Planned():
		return s, illegal(s, e, "the upgrade is already planned")
	case !s.AllPrechecksPassed():
		return s, illegal(s, e, "not every precheck passed")
	}
	if err := checkPlan(s.RequestedNodes, d.Nodes); err != nil {
		return s, illegal(s, e, "%v", err)
	}
	s.InstanceManagerImage = d.InstanceManagerImage
	s.LonghornProfile, s.LonghornVersion = d.LonghornProfile, d.LonghornVersion
	s.Plan = cloneStrings(d.Nodes)
	s.Message = fmt.Sprintf("planned %d node(s) to %s", len(d.Nodes), d.InstanceManagerImage)
	return s, nil
}

// checkPlan holds the plan to the spec: a node order, each node once, covering
// exactly the requested nodes when the user named them.
func checkPlan(requested, plan []string) error {
	seen := make(map[string]bool, len(plan))
	for _, n := range plan {
		if n == "" {
			return fmt.Errorf("plan has an empty node name")
		}
		if seen[n] {
			return fmt.Errorf("plan lists node %s twice", n)
		}
		seen[n] = true
	}
	if len(requested) == 0 {
		return nil
	}
	for _, n := range requested {
		if !seen[n] {
			return fmt.Errorf("plan misses requested node %s", n)
		}
	}
	for _, n := range plan {
		if !slices.Contains(requested, n) {
			return fmt.Errorf("plan has node %s, which spec.nodes does not request", n)
		}
	}
	return nil
}

func applyScheduled(s State, e events.Envelope, d events.NodeScheduled) (State, error) {
	switch {
	case !s.Planned():
		return s, illegal(s, e, "the upgrade is not planned")
	case s.State != events.ManagerInitializing && s.State != events.ManagerUpgrading:
		return s, illegal(s, e, "nodes are scheduled only in %s or %s", events.ManagerInitializing, events.ManagerUpgrading)
	case s.CancelRequested:
		return s, illegal(s, e, "cancel was requested; no new node starts")
	case s.Held != nil:
		return s, illegal(s, e, "the upgrade is held (%s); no new node starts", s.Held.Reason)
	case s.UpgradingNode != "":
		return s, illegal(s, e, "node %s is still in flight", s.UpgradingNode)
	case !slices.Contains(s.Plan, d.Node):
		return s, illegal(s, e, "node %s is not in the plan", d.Node)
	}
	if failed := s.FailedNodes(); len(failed) > 0 {
		return s, illegal(s, e, "node %s failed; the upgrade can only fail", failed[0])
	}
	if _, scheduled := s.Nodes[d.Node]; scheduled {
		return s, illegal(s, e, "node %s was already scheduled and finished", d.Node)
	}
	s.State = events.ManagerUpgrading
	s.UpgradingNode = d.Node
	s.Nodes = withNode(s.Nodes, d.Node, NodeStatus{State: events.NodePending, Attempt: d.Attempt})
	s.Message = fmt.Sprintf("upgrading node %s (%d of %d)", d.Node, len(s.Nodes), len(s.Plan))
	return s, nil
}

func applyFinished(s State, e events.Envelope, d events.NodeFinished) (State, error) {
	if s.UpgradingNode == "" {
		return s, illegal(s, e, "no node is in flight")
	}
	if d.Node != s.UpgradingNode {
		return s, illegal(s, e, "node %s finished but node %s is in flight", d.Node, s.UpgradingNode)
	}
	if d.State == events.NodeCancelled && !s.CancelRequested {
		return s, illegal(s, e, "node %s cannot be cancelled: no cancel was requested", d.Node)
	}
	st := s.Nodes[d.Node]
	st.State = d.State
	st.Message = d.Message
	s.Nodes = withNode(s.Nodes, d.Node, st)
	s.UpgradingNode = ""
	s.Message = fmt.Sprintf("node %s %s", d.Node, d.State)
	if d.Message != "" {
		s.Message += ": " + d.Message
	}
	if s.Held != nil {
		s.Message += "; " + heldMessage(s.Held)
	}
	return s, nil
}

func applyCompleted(s State, e events.Envelope, d events.UpgradeCompleted) (State, error) {
	switch {
	case s.State != events.ManagerUpgrading:
		return s, illegal(s, e, "only an upgrading manager completes")
	case s.CancelRequested:
		return s, illegal(s, e, "cancel was requested; the upgrade ends cancelled")
	case s.UpgradingNode != "":
		return s, illegal(s, e, "node %s is still in flight", s.UpgradingNode)
	case !s.AllNodesCompleted():
		return s, illegal(s, e, "not every planned node completed")
	}
	s.State = events.ManagerCompleted
	s.Message = d.Message
	if s.Message == "" {
		s.Message = fmt.Sprintf("upgraded %d node(s) to %s", len(s.Plan), s.InstanceManagerImage)
	}
	return s, nil
}

func applyCancelRequested(s State, e events.Envelope, d events.CancelRequested) (State, error) {
	if s.CancelRequested {
		return s, illegal(s, e, "cancel was already requested")
	}
	s.CancelRequested = true
	s.CancelReason = d.Reason
	s.Message = aggregate.CancelRequestedMessage(d.Reason)
	return s, nil
}

func applyCancelled(s State, e events.Envelope, d events.UpgradeCancelled) (State, error) {
	if !s.CancelRequested {
		return s, illegal(s, e, "no cancel was requested")
	}
	// The in-flight node must confirm its own safe point: cancelling without
	// it is how the original implementation left targets on other nodes.
	if s.UpgradingNode != "" {
		if d.Node != s.UpgradingNode {
			return s, illegal(s, e, "node %s is in flight; its safe point must be confirmed (event names %q)", s.UpgradingNode, d.Node)
		}
		st := s.Nodes[d.Node]
		st.State = events.NodeCancelled
		st.Message = d.Message
		s.Nodes = withNode(s.Nodes, d.Node, st)
		s.UpgradingNode = ""
	}
	s.State = events.ManagerCancelled
	s.Message = d.Message
	if s.Message == "" {
		s.Message = "upgrade cancelled"
	}
	return s, nil
}

func applyHeld(s State, e events.Envelope, d events.UpgradeHeld) (State, error) {
	if !s.Planned() || s.CancelRequested {
		return s, illegal(s, e, "only a planned upgrade that is not being cancelled is held")
	}
	since := e.Time
	if s.Held != nil {
		since = s.Held.Since // an update of the same hold
	}
	s.Held = &HoldState{Reason: d.Reason, Message: d.Message, Since: since}
	s.Message = heldMessage(s.Held)
	return s, nil
}

func heldMessage(h *HoldState) string { return "held, no new node starts: " + h.Message }

func applyReleased(s State, e events.Envelope, d events.UpgradeReleased) (State, error) {
	if s.Held == nil {
		return s, illegal(s, e, "the upgrade is not held")
	}
	s.Held = nil
	s.Message = "released"
	if d.Message != "" {
		s.Message += ": " + d.Message
	}
	return s, nil
}

// withNode returns a copy of nodes with node set to st; the input map is left
// untouched because older states may still share it.
func withNode(nodes map[string]NodeStatus, node string, st NodeStatus) map[string]NodeStatus {
	out := maps.Clone(nodes)
	if out == nil {
		out = make(map[string]NodeStatus, 1)
	}
	out[node] = st
	return out
}

// cloneStrings copies s, normalising empty to nil so that a state survives a
// JSON round trip (snapshots) unchanged.
func cloneStrings(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return slices.Clone(s)
}
