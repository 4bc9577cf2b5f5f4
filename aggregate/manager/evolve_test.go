package manager

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/events"
)

// fixture is a named state reached by a legal history.
type fixture struct {
	name    string
	history []events.Event
}

func fixtures() []fixture {
	req := []events.Event{evRequested}
	initOK := append(slices.Clone(req), evPassed("NodesKnown"))
	initBad := append(slices.Clone(req), evFailed("NodesKnown"))
	planned := append(slices.Clone(initOK), evPlanned)
	inFlight := append(slices.Clone(planned), evScheduled("node-1"))
	between := append(slices.Clone(inFlight), evFinished("node-1", events.NodeCompleted))
	errored := append(slices.Clone(inFlight), evFinished("node-1", events.NodeError))
	allDone := append(slices.Clone(between),
		evScheduled("node-2"), evFinished("node-2", events.NodeCompleted),
		evScheduled("node-3"), evFinished("node-3", events.NodeCompleted))
	cancelInFlight := append(slices.Clone(inFlight), events.CancelRequested{Reason: "manager deleted"})
	cancelIdle := append(slices.Clone(between), events.CancelRequested{Reason: "manager deleted"})
	heldIdle := append(slices.Clone(between), evHeld)
	heldInFlight := append(slices.Clone(inFlight), evHeld)
	return []fixture{
		{"absent", nil},
		{"pending", req},
		{"initializing", initOK},
		{"initializing-failed-check", initBad},
		{"planned", planned},
		{"in-flight", inFlight},
		{"between-nodes", between},
		{"node-errored", errored},
		{"all-nodes-done", allDone},
		{"cancel-in-flight", cancelInFlight},
		{"cancel-idle", cancelIdle},
		{"held-idle", heldIdle},
		{"held-in-flight", heldInFlight},
		{"completed", append(slices.Clone(allDone), events.UpgradeCompleted{})},
		{"error", append(slices.Clone(req), events.UpgradeFailed{Reason: "Manual", Message: "stopped"})},
		{"cancelled", append(slices.Clone(cancelInFlight), events.UpgradeCancelled{Node: "node-1"})},
	}
}

// canonical returns, for each event type, the payload that has the best chance
// of being legal in s, so the matrix below tests the state rule, not a typo.
func canonical(s State) map[string]events.Event {
	next, ok := s.NextNode()
	if !ok {
		next = "node-1"
	}
	inFlight := s.UpgradingNode
	if inFlight == "" {
		inFlight = "node-1"
	}
	return map[string]events.Event{
		"requested":        evRequested,
		"precheck-passed":  evPassed("DefaultImageOnAllNodesReady"),
		"precheck-failed":  evFailed("DefaultImageOnAllNodesReady"),
		"planned":          evPlanned,
		"scheduled":        evScheduled(next),
		"finished":         evFinished(inFlight, events.NodeCompleted),
		"completed":        events.UpgradeCompleted{},
		"failed":           events.UpgradeFailed{Reason: "Manual", Message: "stopped by operator"},
		"cancel-requested": events.CancelRequested{Reason: "manager deleted"},
		"cancelled":        events.UpgradeCancelled{Node: s.UpgradingNode},
		"held":             evHeld,
		"released":         events.UpgradeReleased{Message: "off again"},
	}
}

// evHeld is the hold of the fixtures, the same as the canonical Hold command.
var evHeld = events.UpgradeHeld{Reason: "OtherUpgraderActive", Message: "Longhorn's upgrader is on"}

// legal is the transition matrix: for each fixture, the event kinds it accepts.
// Every other kind must be refused.
var legal = map[string][]string{
	"absent":                    {"requested"},
	"pending":                   {"precheck-passed", "precheck-failed", "failed", "cancel-requested"},
	"initializing":              {"precheck-passed", "precheck-failed", "planned", "failed", "cancel-requested"},
	"initializing-failed-check": {"precheck-passed", "precheck-failed", "failed", "cancel-requested"},
	"planned":                   {"scheduled", "failed", "cancel-requested", "held"},
	"in-flight":                 {"finished", "failed", "cancel-requested", "held"},
	"between-nodes":             {"scheduled", "failed", "cancel-requested", "held"},
	"node-errored":              {"failed", "cancel-requested", "held"},
	"all-nodes-done":            {"completed", "failed", "cancel-requested", "held"},
	"cancel-in-flight":          {"finished", "failed", "cancelled"},
	"cancel-idle":               {"failed", "cancelled"},
	"held-idle":                 {"failed", "cancel-requested", "held", "released"},
	"held-in-flight":            {"finished", "failed", "cancel-requested", "held", "released"},
	"completed":                 nil,
	"error":                     nil,
	"cancelled":                 nil,
}

// wantState is the manager state each accepted kind leads to (from a
// non-terminal fixture); "" means unchanged.
var wantState = map[string]events.ManagerState{
	"requested":        events.ManagerPending,
	"precheck-passed":  events.ManagerInitializing,
	"precheck-failed":  events.ManagerInitializing,
	"planned":          events.ManagerInitializing,
	"scheduled":        events.ManagerUpgrading,
	"finished":         events.ManagerUpgrading,
	"completed":        events.ManagerCompleted,
	"failed":           events.ManagerError,
	"cancel-requested": "",
	"cancelled":        events.ManagerCancelled,
	"held":             "",
	"released":         "",
}

func TestEvolveTransitionMatrix(t *testing.T) {
	at := t0.Add(time.Hour)
	for _, f := range fixtures() {
		s := fold(t, f.history...)
		allowed, ok := legal[f.name]
		require.True(t, ok, "fixture %s missing from matrix", f.name)
		for kind, data := range canonical(s) {
			t.Run(f.name+"/"+kind, func(t *testing.T) {
				before := cloneState(s)
				got, err := Evolve(s, envAt(agg, at, data))
				require.Equal(t, before, s, "Evolve modified its input")
				if !slices.Contains(allowed, kind) {
					requireTransitionError(t, err, s.stateName(), data.EventType())
					require.Equal(t, s, got, "a refused event must leave the state unchanged")
					return
				}
				require.NoError(t, err)
				require.Equal(t, s.Transitions+1, got.Transitions)
				require.Equal(t, at, got.UpdatedAt)
				want := wantState[kind]
				if want == "" {
					want = s.State
				}
				require.Equal(t, want, got.State)
			})
		}
	}
}

func TestEvolveEffects(t *testing.T) {
	t.Run("requested opens the aggregate with the spec", func(t *testing.T) {
		d := evRequested
		d.Nodes = []string{"node-2", "node-1"}
		s := fold(t, d)
		require.True(t, s.Exists)
		require.Equal(t, ref, s.Ref)
		require.Equal(t, int64(1), s.Generation)
		require.Equal(t, "v2", s.DataEngine)
		require.Equal(t, []string{"node-2", "node-1"}, s.RequestedNodes)
		require.Equal(t, events.ManagerPending, s.State)
		require.Equal(t, t0, s.UpdatedAt)
	})
	t.Run("prechecks are kept in order", func(t *testing.T) {
		s := fold(t, evRequested, evPassed("A"), evFailed("B"), evPassed("C"))
		require.Equal(t, []PrecheckResult{
			{Check: "A", Passed: true, Reason: "Satisfied", Message: "A holds"},
			{Check: "B", Passed: false, Reason: "NotSatisfied", Message: "B does not hold"},
			{Check: "C", Passed: true, Reason: "Satisfied", Message: "C holds"},
		}, s.Prechecks)
		require.False(t, s.AllPrechecksPassed())
	})
	t.Run("plan captures image and order", func(t *testing.T) {
		s := fold(t, evRequested, evPassed("A"), evPlanned)
		require.Equal(t, image, s.InstanceManagerImage)
		require.Equal(t, plan3, s.Plan)
		require.Empty(t, s.Nodes)
		require.Contains(t, s.Message, "planned 3 node(s)")
	})
	t.Run("scheduled node is pending and in flight", func(t *testing.T) {
		s := fold(t, evRequested, evPassed("A"), evPlanned, events.NodeScheduled{Node: "node-1", Attempt: 2})
		require.Equal(t, "node-1", s.UpgradingNode)
		require.Equal(t, map[string]NodeStatus{"node-1": {State: events.NodePending, Attempt: 2}}, s.Nodes)
		require.Equal(t, "upgrading node node-1 (1 of 3)", s.Message)
	})
	t.Run("finished records the outcome and frees the slot", func(t *testing.T) {
		s := fold(t, evRequested, evPassed("A"), evPlanned, evScheduled("node-1"),
			events.NodeFinished{Node: "node-1", State: events.NodeError, Message: "IM did not start"})
		require.Empty(t, s.UpgradingNode)
		require.Equal(t, NodeStatus{State: events.NodeError, Message: "IM did not start", Attempt: 1}, s.Nodes["node-1"])
		require.Equal(t, "node node-1 error: IM did not start", s.Message)
		require.Equal(t, []string{"node-1"}, s.FailedNodes())
	})
	t.Run("failed keeps reason, node and the node in flight", func(t *testing.T) {
		s := fold(t, evRequested, evPassed("A"), evPlanned, evScheduled("node-1"),
			events.UpgradeFailed{Reason: "NodeDeleted", Message: "node-1 was deleted", Node: "node-1"})
		require.Equal(t, events.ManagerError, s.State)
		require.Equal(t, "NodeDeleted", s.FailReason)
		require.Equal(t, "node-1", s.FailedNode)
		require.Equal(t, "node-1", s.UpgradingNode)
		require.Equal(t, "node-1 was deleted", s.Message)
	})
	t.Run("cancel with a node in flight marks it cancelled", func(t *testing.T) {
		s := fold(t, evRequested, evPassed("A"), evPlanned, evScheduled("node-1"),
			events.CancelRequested{Reason: "manager deleted"},
			events.UpgradeCancelled{Node: "node-1", Message: "node-1 at a safe point"})
		require.Equal(t, events.ManagerCancelled, s.State)
		require.True(t, s.CancelRequested)
		require.Equal(t, "manager deleted", s.CancelReason)
		require.Empty(t, s.UpgradingNode)
		require.Equal(t, NodeStatus{State: events.NodeCancelled, Message: "node-1 at a safe point", Attempt: 1}, s.Nodes["node-1"])
	})
	t.Run("cancelled node outcome is accepted once cancel was requested", func(t *testing.T) {
		s := fold(t, evRequested, evPassed("A"), evPlanned, evScheduled("node-1"),
			events.CancelRequested{}, evFinished("node-1", events.NodeCancelled), events.UpgradeCancelled{Node: "node-1"})
		require.Equal(t, events.ManagerCancelled, s.State)
		require.Equal(t, events.NodeCancelled, s.Nodes["node-1"].State)
	})
	t.Run("completed sets a default message", func(t *testing.T) {
		s := fold(t, evRequested, evPassed("A"), evPlanned,
			evScheduled("node-1"), evFinished("node-1", events.NodeCompleted),
			evScheduled("node-2"), evFinished("node-2", events.NodeCompleted),
			evScheduled("node-3"), evFinished("node-3", events.NodeCompleted),
			events.UpgradeCompleted{})
		require.Equal(t, "upgraded 3 node(s) to "+image, s.Message)
		require.Equal(t, 10, s.Transitions)
	})
	t.Run("nodes may be scheduled out of plan order", func(t *testing.T) {
		s := fold(t, evRequested, evPassed("A"), evPlanned, evScheduled("node-3"))
		require.Equal(t, "node-3", s.UpgradingNode)
	})
}

func TestEvolveRefusals(t *testing.T) {
	planned := []events.Event{evRequested, evPassed("A"), evPlanned}
	inFlight := append(slices.Clone(planned), evScheduled("node-1"))
	requested := func(nodes ...string) events.UpgradeRequested {
		d := evRequested
		d.Nodes = nodes
		return d
	}
	cases := []struct {
		name    string
		history []events.Event
		env     events.Envelope
		reason  string
	}{
		{"no data", []events.Event{evRequested}, events.Envelope{Aggregate: agg}, "no data"},
		{"node aggregate", []events.Event{evRequested}, envAt(events.NodeAggregate(ref, "node-1"), t0, evPassed("A")), "node-upgrade event"},
		{"other manager incarnation", []events.Event{evRequested}, envAt(events.ManagerAggregate(otherRef), t0, evPassed("A")), "belongs to manager"},
		{"payload names another manager", nil, envAt(events.ManagerAggregate(otherRef), t0, evRequested), "payload names manager"},
		{"invalid payload", []events.Event{evRequested}, env(events.PrecheckPassed{Check: "A"}), "invalid payload"},
		{"node event type", []events.Event{evRequested}, env(events.NodeStateChanged{From: events.NodePending, To: events.NodeInitializing}), "not a manager event"},
		{"requested twice", []events.Event{evRequested}, env(evRequested), "already requested"},
		{"precheck twice", []events.Event{evRequested, evPassed("A")}, env(evFailed("A")), "already recorded"},
		{"precheck after plan", planned, env(evPassed("B")), "already planned"},
		{"plan twice", planned, env(evPlanned), "already planned"},
		{"plan after failed precheck", []events.Event{evRequested, evPassed("A"), evFailed("B")}, env(evPlanned), "not every precheck passed"},
		{"plan with duplicate node", []events.Event{evRequested, evPassed("A")},
			env(events.UpgradePlanned{InstanceManagerImage: image, Nodes: []string{"node-1", "node-1"}}), "twice"},
		{"plan with empty node", []events.Event{evRequested, evPassed("A")},
			env(events.UpgradePlanned{InstanceManagerImage: image, Nodes: []string{""}}), "empty node"},
		{"plan misses a requested node", []events.Event{requested("node-1", "node-2"), evPassed("A")},
			env(events.UpgradePlanned{InstanceManagerImage: image, Nodes: []string{"node-1"}}), "misses requested node node-2"},
		{"plan adds an unrequested node", []events.Event{requested("node-1"), evPassed("A")},
			env(events.UpgradePlanned{InstanceManagerImage: image, Nodes: []string{"node-1", "node-9"}}), "does not request"},
		{"schedule before plan", []events.Event{evRequested, evPassed("A")}, env(evScheduled("node-1")), "not planned"},
		{"schedule unplanned node", planned, env(evScheduled("node-9")), "not in the plan"},
		{"schedule while in flight", inFlight, env(evScheduled("node-2")), "still in flight"},
		{"schedule a finished node", append(slices.Clone(inFlight), evFinished("node-1", events.NodeCompleted)), env(evScheduled("node-1")), "already scheduled"},
		{"schedule after a node error", append(slices.Clone(inFlight), evFinished("node-1", events.NodeError)), env(evScheduled("node-2")), "can only fail"},
		{"schedule attempt 0", planned, env(events.NodeScheduled{Node: "node-1"}), "invalid payload"},
		{"finish with none in flight", planned, env(evFinished("node-1", events.NodeCompleted)), "no node is in flight"},
		{"finish another node", inFlight, env(evFinished("node-2", events.NodeCompleted)), "is in flight"},
		{"finish non-terminal", inFlight, env(evFinished("node-1", events.NodeSwitchingOver)), "invalid payload"},
		{"finish cancelled without cancel", inFlight, env(evFinished("node-1", events.NodeCancelled)), "no cancel was requested"},
		{"complete with nodes left", append(slices.Clone(inFlight), evFinished("node-1", events.NodeCompleted)), env(events.UpgradeCompleted{}), "not every planned node"},
		{"complete while in flight", inFlight, env(events.UpgradeCompleted{}), "still in flight"},
		{"failed without message", []events.Event{evRequested}, env(events.UpgradeFailed{Reason: "X"}), "invalid payload"},
		{"cancel requested twice", []events.Event{evRequested, events.CancelRequested{}}, env(events.CancelRequested{}), "already requested"},
		{"cancelled without request", inFlight, env(events.UpgradeCancelled{Node: "node-1"}), "no cancel was requested"},
		{"cancelled without the in-flight node", append(slices.Clone(inFlight), events.CancelRequested{}), env(events.UpgradeCancelled{}), "safe point must be confirmed"},
		{"cancelled naming another node", append(slices.Clone(inFlight), events.CancelRequested{}), env(events.UpgradeCancelled{Node: "node-2"}), "safe point must be confirmed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := fold(t, tc.history...)
			got, err := Evolve(s, tc.env)
			var typ events.Type
			if tc.env.Data != nil {
				typ = tc.env.Type()
			}
			requireTransitionError(t, err, s.stateName(), typ)
			require.Contains(t, err.Error(), tc.reason)
			require.Equal(t, s, got)
		})
	}
}

func TestFoldSkipsIllegalAndJoinsErrors(t *testing.T) {
	h := envs(evRequested, evScheduled("node-1"), evPassed("A"), evRequested, evPlanned)
	s, err := Fold(State{}, h...)
	require.ErrorIs(t, err, ErrIllegalTransition)
	require.Len(t, err.(interface{ Unwrap() []error }).Unwrap(), 2)
	require.Equal(t, 3, s.Transitions)
	require.Equal(t, plan3, s.Plan)

	p, errP := Fold(State{}, h[:2]...)
	all, errR := Fold(p, h[2:]...)
	require.Error(t, errP)
	require.Error(t, errR)
	require.Equal(t, s, all)

	clean, err := Fold(State{})
	require.NoError(t, err)
	require.Equal(t, State{}, clean)
}

// TestNodeCancelReason: a node brought to its safe point is told the real
// cause: the failure (with its reason), the deletion, or the end.
func TestNodeCancelReason(t *testing.T) {
	for name, tc := range map[string]struct {
		s    State
		want string
	}{
		"failed": {State{Exists: true, State: events.ManagerError, FailReason: "CommandDeadLettered", Message: "command bogus was dead-lettered"},
			"the upgrade failed (CommandDeadLettered): command bogus was dead-lettered"},
		"failed without a reason": {State{Exists: true, State: events.ManagerError}, "the upgrade failed"},
		"deleted":                 {State{Exists: true, State: events.ManagerUpgrading, CancelRequested: true, CancelReason: DeletedReason}, DeletedReason},
		"deleted, then cancelled": {State{Exists: true, State: events.ManagerCancelled, CancelRequested: true}, DeletedReason},
		"completed":               {State{Exists: true, State: events.ManagerCompleted}, "the upgrade had already ended (completed)"},
		"running":                 {State{Exists: true, State: events.ManagerUpgrading}, "the upgrade is not running"},
	} {
		t.Run(name, func(t *testing.T) {
			require.Equal(t, tc.want, tc.s.NodeCancelReason())
		})
	}
}
