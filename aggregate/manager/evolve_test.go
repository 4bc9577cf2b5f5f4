package manager

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/aggregate/internal/machinetest"
	"github.com/switchback-dev/switchback/events"
)

// fixture is a named state reached by a legal history (machinetest.Fixture,
// written positionally below).
type fixture machinetest.Fixture

func fixtures() []machinetest.Fixture {
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
	return machinetest.Fixtures([]fixture{
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
	})
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
	machinetest.EvolveMatrix(t, machine, fixtures(), canonical, legal,
		func(at time.Time, d events.Event) events.Envelope { return envAt(agg, at, d) },
		func(t *testing.T, kind string, s, got State) {
			want := wantState[kind]
			if want == "" {
				want = s.State
			}
			require.Equal(t, want, got.State)
		})
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
	cases := []machinetest.EventRefusal{
		{Name: "no data", History: []events.Event{evRequested}, Env: events.Envelope{Aggregate: agg}, Reason: "no data"},
		{Name: "node aggregate", History: []events.Event{evRequested}, Env: envAt(events.NodeAggregate(ref, "node-1"), t0, evPassed("A")), Reason: "node-upgrade event"},
		{Name: "other manager incarnation", History: []events.Event{evRequested}, Env: envAt(events.ManagerAggregate(otherRef), t0, evPassed("A")), Reason: "belongs to manager"},
		{Name: "payload names another manager", History: nil, Env: envAt(events.ManagerAggregate(otherRef), t0, evRequested), Reason: "payload names manager"},
		{Name: "invalid payload", History: []events.Event{evRequested}, Env: env(events.PrecheckPassed{Check: "A"}), Reason: "invalid payload"},
		{Name: "node event type", History: []events.Event{evRequested}, Env: env(events.NodeStateChanged{From: events.NodePending, To: events.NodeInitializing}), Reason: "not a manager event"},
		{Name: "requested twice", History: []events.Event{evRequested}, Env: env(evRequested), Reason: "already requested"},
		{Name: "precheck twice", History: []events.Event{evRequested, evPassed("A")}, Env: env(evFailed("A")), Reason: "already recorded"},
		{Name: "precheck after plan", History: planned, Env: env(evPassed("B")), Reason: "already planned"},
		{Name: "plan twice", History: planned, Env: env(evPlanned), Reason: "already planned"},
		{Name: "plan after failed precheck", History: []events.Event{evRequested, evPassed("A"), evFailed("B")}, Env: env(evPlanned), Reason: "not every precheck passed"},
		{Name: "plan with duplicate node", History: []events.Event{evRequested, evPassed("A")},
			Env: env(events.UpgradePlanned{InstanceManagerImage: image, Nodes: []string{"node-1", "node-1"}}), Reason: "twice"},
		{Name: "plan with empty node", History: []events.Event{evRequested, evPassed("A")},
			Env: env(events.UpgradePlanned{InstanceManagerImage: image, Nodes: []string{""}}), Reason: "empty node"},
		{Name: "plan misses a requested node", History: []events.Event{requested("node-1", "node-2"), evPassed("A")},
			Env: env(events.UpgradePlanned{InstanceManagerImage: image, Nodes: []string{"node-1"}}), Reason: "misses requested node node-2"},
		{Name: "plan adds an unrequested node", History: []events.Event{requested("node-1"), evPassed("A")},
			Env: env(events.UpgradePlanned{InstanceManagerImage: image, Nodes: []string{"node-1", "node-9"}}), Reason: "does not request"},
		{Name: "schedule before plan", History: []events.Event{evRequested, evPassed("A")}, Env: env(evScheduled("node-1")), Reason: "not planned"},
		{Name: "schedule unplanned node", History: planned, Env: env(evScheduled("node-9")), Reason: "not in the plan"},
		{Name: "schedule while in flight", History: inFlight, Env: env(evScheduled("node-2")), Reason: "still in flight"},
		{Name: "schedule a finished node", History: append(slices.Clone(inFlight), evFinished("node-1", events.NodeCompleted)), Env: env(evScheduled("node-1")), Reason: "already scheduled"},
		{Name: "schedule after a node error", History: append(slices.Clone(inFlight), evFinished("node-1", events.NodeError)), Env: env(evScheduled("node-2")), Reason: "can only fail"},
		{Name: "schedule attempt 0", History: planned, Env: env(events.NodeScheduled{Node: "node-1"}), Reason: "invalid payload"},
		{Name: "finish with none in flight", History: planned, Env: env(evFinished("node-1", events.NodeCompleted)), Reason: "no node is in flight"},
		{Name: "finish another node", History: inFlight, Env: env(evFinished("node-2", events.NodeCompleted)), Reason: "is in flight"},
		{Name: "finish non-terminal", History: inFlight, Env: env(evFinished("node-1", events.NodeSwitchingOver)), Reason: "invalid payload"},
		{Name: "finish cancelled without cancel", History: inFlight, Env: env(evFinished("node-1", events.NodeCancelled)), Reason: "no cancel was requested"},
		{Name: "complete with nodes left", History: append(slices.Clone(inFlight), evFinished("node-1", events.NodeCompleted)), Env: env(events.UpgradeCompleted{}), Reason: "not every planned node"},
		{Name: "complete while in flight", History: inFlight, Env: env(events.UpgradeCompleted{}), Reason: "still in flight"},
		{Name: "failed without message", History: []events.Event{evRequested}, Env: env(events.UpgradeFailed{Reason: "X"}), Reason: "invalid payload"},
		{Name: "cancel requested twice", History: []events.Event{evRequested, events.CancelRequested{}}, Env: env(events.CancelRequested{}), Reason: "already requested"},
		{Name: "cancelled without request", History: inFlight, Env: env(events.UpgradeCancelled{Node: "node-1"}), Reason: "no cancel was requested"},
		{Name: "cancelled without the in-flight node", History: append(slices.Clone(inFlight), events.CancelRequested{}), Env: env(events.UpgradeCancelled{}), Reason: "safe point must be confirmed"},
		{Name: "cancelled naming another node", History: append(slices.Clone(inFlight), events.CancelRequested{}), Env: env(events.UpgradeCancelled{Node: "node-2"}), Reason: "safe point must be confirmed"},
	}
	machinetest.EvolveRefusals(t, machine, cases)
}

func TestFoldSkipsIllegalAndJoinsErrors(t *testing.T) {
	h := envs(evRequested, evScheduled("node-1"), evPassed("A"), evRequested, evPlanned)
	s, err := FoldSkipping(State{}, h...)
	require.ErrorIs(t, err, ErrIllegalTransition)
	require.Len(t, err.(interface{ Unwrap() []error }).Unwrap(), 2)
	require.Equal(t, 3, s.Transitions)
	require.Equal(t, plan3, s.Plan)

	p, errP := FoldSkipping(State{}, h[:2]...)
	all, errR := FoldSkipping(p, h[2:]...)
	require.Error(t, errP)
	require.Error(t, errR)
	require.Equal(t, s, all)

	clean, err := FoldSkipping(State{})
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
