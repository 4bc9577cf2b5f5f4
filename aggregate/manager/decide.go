package manager

import (
	"fmt"
	"slices"
	"strings"

	"github.com/switchback-dev/switchback/aggregate"
	"github.com/switchback-dev/switchback/events"
)

// Decide returns the events that cmd produces on s, in the order they must be
// appended; it never modifies s. Commands are idempotent: re-deciding a
// command on the state its own events produced yields no events. A command
// that makes no sense in s returns a *CommandError (ErrIllegalCommand).
//
// A terminal manager decides nothing: late outcomes, cancels and failures
// against it produce no events and no error, since there is nothing left to do.
func Decide(s State, cmd Command) ([]events.Event, error) {
	_, opens := cmd.(RequestUpgrade)
	o := offer(s, cmd)
	if err := o.Screen(opens || s.Exists, "no upgrade was requested"); err != nil {
		return nil, err
	}
	return o.Accept(decide(s, cmd))
}

// decide dispatches cmd to the rule of its kind.
func decide(s State, cmd Command) ([]events.Event, error) {
	switch c := cmd.(type) {
	case RequestUpgrade:
		return decideRequest(s, c)
	case RecordPrechecks:
		return decidePrechecks(s, c)
	case RecordNodeOutcome:
		return decideOutcome(s, c)
	case ScheduleNext:
		return decideScheduleNext(s, c)
	case RequestCancel:
		return decideCancel(s, c)
	case ConfirmCancelled:
		return decideConfirmCancelled(s, c)
	case Fail:
		return decideFail(s, c)
	case Hold:
		return decideHold(s, c)
	case Release:
		return decideRelease(s, c)
	default:
		return nil, refuse(s, cmd, nil, "unknown command %T", cmd)
	}
}

func decideRequest(s State, c RequestUpgrade) ([]events.Event, error) {
	if c.Ref.Namespace == "" || c.Ref.Name == "" || c.Ref.UID == "" {
		return nil, refuse(s, c, nil, "namespace, name and uid are required")
	}
	if !s.Exists {
		return []events.Event{events.UpgradeRequested{
			Namespace:  c.Ref.Namespace,
			Name:       c.Ref.Name,
			UID:        c.Ref.UID,
			Generation: c.Generation,
			DataEngine: c.DataEngine,
			Nodes:      cloneStrings(c.Nodes),

			AllowNodesWithoutReplicaScheduling: c.AllowNodesWithoutReplicaScheduling,
			InitiatorPolicy:                    c.InitiatorPolicy,
			ReplicaPolicy:                      c.ReplicaPolicy,
		}}, nil
	}
	if c.Ref != s.Ref {
		return nil, refuse(s, c, ErrConflict, "aggregate holds manager %s (uid %s), not %s (uid %s)", s.Ref, s.Ref.UID, c.Ref, c.Ref.UID)
	}
	// spec is immutable: the same spec is a retry, another one is a bug or a
	// bypassed admission check, never a new intent.
	if c.DataEngine != s.DataEngine || !slices.Equal(cloneStrings(c.Nodes), s.RequestedNodes) ||
		c.AllowNodesWithoutReplicaScheduling != s.AllowNodesWithoutReplicaScheduling || c.InitiatorPolicy != s.InitiatorPolicy || c.ReplicaPolicy != s.ReplicaPolicy {
		return nil, refuse(s, c, ErrConflict, "spec is immutable: recorded dataEngine %q nodes %v, got %q %v",
			s.DataEngine, s.RequestedNodes, c.DataEngine, c.Nodes)
	}
	return nil, nil
}

func decidePrechecks(s State, c RecordPrechecks) ([]events.Event, error) {
	if s.Terminal() || s.Planned() || s.CancelRequested {
		return nil, nil
	}
	if len(c.Results) == 0 {
		return nil, refuse(s, c, nil, "no precheck results")
	}
	// Results already in history win over the command's (a decision stored in
	// part, then retried with a fresh evaluation): history is not rewritten.
	recorded := make(map[string]PrecheckResult, len(s.Prechecks))
	for _, r := range s.Prechecks {
		recorded[r.Check] = r
	}
	seen := make(map[string]bool, len(c.Results))
	var failed []string
	evs := make([]events.Event, 0, len(c.Results)+1)
	for _, r := range c.Results {
		if seen[r.Check] {
			return nil, refuse(s, c, nil, "precheck %q listed twice", r.Check)
		}
		seen[r.Check] = true
		if old, ok := recorded[r.Check]; ok {
			r = old
		} else if r.Passed {
			evs = append(evs, events.PrecheckPassed{Check: r.Check, Reason: r.Reason, Message: r.Message})
		} else {
			evs = append(evs, events.PrecheckFailed{Check: r.Check, Reason: r.Reason, Message: r.Message})
		}
		if !r.Passed {
			failed = append(failed, r.Check+": "+r.Message)
		}
	}
	if len(failed) > 0 {
		return append(evs, events.UpgradeFailed{
			Reason:  ReasonPrecheckFailed,
			Message: fmt.Sprintf("%d precheck(s) failed: %s", len(failed), strings.Join(failed, "; ")),
		}), nil
	}
	if len(c.Order) == 0 {
		return nil, refuse(s, c, nil, "every precheck passed but the node order is empty")
	}
	if c.InstanceManagerImage == "" {
		return nil, refuse(s, c, nil, "every precheck passed but the target instance manager image is empty")
	}
	if err := checkPlan(s.RequestedNodes, c.Order); err != nil {
		return nil, refuse(s, c, nil, "%v", err)
	}
	return append(evs, events.UpgradePlanned{InstanceManagerImage: c.InstanceManagerImage, Nodes: cloneStrings(c.Order),
		LonghornProfile: c.LonghornProfile, LonghornVersion: c.LonghornVersion}), nil
}

func decideOutcome(s State, c RecordNodeOutcome) ([]events.Event, error) {
	if s.Terminal() {
		return nil, nil
	}
	if c.Node == "" {
		return nil, refuse(s, c, nil, "node is required")
	}
	if st, ok := s.Nodes[c.Node]; ok && st.State.Terminal() {
		if st.State == c.State {
			// Recorded; what follows it may not be (a decision stored in part).
			if s.UpgradingNode == "" && s.Planned() {
				return advance(s, c.Node), nil
			}
			return nil, nil
		}
		return nil, refuse(s, c, ErrConflict, "node %s already finished %s, got %s", c.Node, st.State, c.State)
	}
	if c.State != events.NodeCompleted && c.State != events.NodeError {
		return nil, refuse(s, c, nil, "outcome must be %s or %s, got %q (a cancelled node is confirmed with ConfirmCancelled)",
			events.NodeCompleted, events.NodeError, c.State)
	}
	if c.Node != s.UpgradingNode {
		return nil, refuse(s, c, nil, "node %s is not in flight (in flight: %q)", c.Node, s.UpgradingNode)
	}
	finished := events.NodeFinished{Node: c.Node, State: c.State, Message: c.Message}
	if c.State == events.NodeError {
		msg := c.Message
		if msg == "" {
			msg = "node upgrade failed"
		}
		return []events.Event{finished, events.UpgradeFailed{
			Reason:  ReasonNodeUpgradeFailed,
			Node:    c.Node,
			Message: fmt.Sprintf("node %s: %s", c.Node, msg),
		}}, nil
	}
	mid, err := preview(s, finished)
	if err != nil {
		return nil, refuse(s, c, err, "internal: recording the outcome would be illegal")
	}
	return append([]events.Event{finished}, advance(mid, c.Node)...), nil
}

func decideScheduleNext(s State, c ScheduleNext) ([]events.Event, error) {
	if s.Terminal() || s.CancelRequested || s.UpgradingNode != "" {
		return nil, nil
	}
	if !s.Planned() {
		return nil, refuse(s, c, nil, "the upgrade is not planned yet")
	}
	return advance(s, ""), nil
}

// advance is what happens when no node is in flight: the upgrade fails on a
// failed node, ends on a pending cancel, starts the next node in plan order,
// or completes. last is the node that just finished, for messages.
func advance(s State, last string) []events.Event {
	if failed := s.FailedNodes(); len(failed) > 0 {
		return []events.Event{events.UpgradeFailed{
			Reason:  ReasonNodeUpgradeFailed,
			Node:    failed[0],
			Message: fmt.Sprintf("node %s: %s", failed[0], orDefault(s.Nodes[failed[0]].Message, "node upgrade failed")),
		}}
	}
	if s.CancelRequested {
		return []events.Event{events.UpgradeCancelled{Node: last, Message: cancelledIdleMessage(s)}}
	}
	if next, ok := s.NextNode(); ok {
		if s.Held != nil {
			return nil // Release schedules it
		}
		return []events.Event{events.NodeScheduled{Node: next, Attempt: s.Nodes[next].Attempt + 1}}
	}
	return []events.Event{events.UpgradeCompleted{
		Message: fmt.Sprintf("upgraded %d node(s) to %s", len(s.Plan), s.InstanceManagerImage),
	}}
}

func decideHold(s State, c Hold) ([]events.Event, error) {
	if s.Terminal() || s.CancelRequested {
		return nil, nil
	}
	if !s.Planned() {
		return nil, refuse(s, c, nil, "the upgrade is not planned yet")
	}
	if c.Reason == "" || c.Message == "" {
		return nil, refuse(s, c, nil, "a hold needs a reason and a message")
	}
	if s.Held != nil && s.Held.Reason == c.Reason && s.Held.Message == c.Message {
		return nil, nil
	}
	return []events.Event{events.UpgradeHeld{Reason: c.Reason, Message: c.Message}}, nil
}

func decideRelease(s State, c Release) ([]events.Event, error) {
	if s.Terminal() {
		return nil, nil
	}
	if s.Held == nil {
		// Released already; what follows may not be stored (a decision
		// stored in part): what ScheduleNext would do.
		if s.CancelRequested || s.UpgradingNode != "" || !s.Planned() {
			return nil, nil
		}
		return advance(s, ""), nil
	}
	released := events.UpgradeReleased{Message: c.Message}
	if s.UpgradingNode != "" {
		return []events.Event{released}, nil
	}
	mid, err := preview(s, released)
	if err != nil {
		return nil, refuse(s, c, err, "internal: releasing would be illegal")
	}
	return append([]events.Event{released}, advance(mid, "")...), nil
}

func decideCancel(s State, c RequestCancel) ([]events.Event, error) {
	if s.Terminal() {
		return nil, nil
	}
	if s.CancelRequested {
		// Only the conclusion may be missing (a decision stored in part).
		if s.UpgradingNode == "" {
			return []events.Event{events.UpgradeCancelled{Message: cancelledIdleMessage(s)}}, nil
		}
		return nil, nil
	}
	evs := []events.Event{events.CancelRequested{Reason: c.Reason}}
	// With no node in flight there is no safe point to wait for.
	if s.UpgradingNode == "" {
		evs = append(evs, events.UpgradeCancelled{Message: cancelledIdleMessage(s)})
	}
	return evs, nil
}

func decideConfirmCancelled(s State, c ConfirmCancelled) ([]events.Event, error) {
	if s.Terminal() {
		return nil, nil
	}
	if !s.CancelRequested {
		return nil, refuse(s, c, nil, "no cancel was requested")
	}
	if c.Node != s.UpgradingNode {
		return nil, refuse(s, c, nil, "node in flight is %q, confirmation is for %q", s.UpgradingNode, c.Node)
	}
	msg := c.Message
	if msg == "" && c.Node != "" {
		msg = fmt.Sprintf("upgrade cancelled; node %s reached a safe point", c.Node)
	}
	return []events.Event{events.UpgradeCancelled{Node: c.Node, Message: msg}}, nil
}

func decideFail(s State, c Fail) ([]events.Event, error) {
	if s.Terminal() {
		return nil, nil
	}
	return []events.Event{events.UpgradeFailed{Reason: c.Reason, Message: c.Message, Node: c.Node}}, nil
}

func cancelledIdleMessage(s State) string {
	done := 0
	for _, st := range s.Nodes {
		if st.State == events.NodeCompleted {
			done++
		}
	}
	return fmt.Sprintf("upgrade cancelled with no node in flight; %d of %d planned node(s) completed", done, len(s.Plan))
}

// preview applies evs to s as Decide's own look-ahead, so a multi-event
// decision is computed on exactly the state Evolve will produce.
func preview(s State, evs ...events.Event) (State, error) {
	for _, d := range evs {
		var err error
		if s, err = Evolve(s, events.Envelope{Aggregate: s.Aggregate(), Data: d}); err != nil {
			return s, err
		}
	}
	return s, nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// offer is cmd offered to s, for the checks every command passes and for
// refusals. Before the manager exists it is named by the ref the opening
// command gives, if any.
func offer(s State, cmd Command) aggregate.Offer {
	name := ""
	if s.Exists {
		name = s.Ref.String()
	} else if r, ok := cmd.(RequestUpgrade); ok && r.Ref.Name != "" {
		name = r.Ref.String()
	}
	if cmd == nil {
		return s.subject().Offer(name, "", "")
	}
	return s.subject().Offer(name, cmd.commandName(), cmd.CommandID())
}
