package manager

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/aggregate"
	"github.com/switchback-dev/switchback/aggregate/internal/machinetest"
	"github.com/switchback-dev/switchback/events"
)

// TestDecideCommandMatrix decides every command kind (canonicalCommands) in
// every fixture and checks the outcome the matrix (decisions) expects.
func TestDecideCommandMatrix(t *testing.T) {
	machinetest.DecideMatrix(t, machine, fixtures(), canonicalCommands, decisions)
}

var (
	cmdRequest = RequestUpgrade{Meta: aggregate.Meta{ID: "req"}, Ref: ref, Generation: 1, DataEngine: "v2"}
	allPassed  = []PrecheckResult{
		{Check: "NodesKnown", Passed: true, Reason: "Satisfied"},
		{Check: "DefaultImageOnAllNodesReady", Passed: true, Reason: "Satisfied", Message: "image pulled on 3 nodes"},
		{Check: "VolumesHealthy", Passed: true, Reason: "Satisfied"},
	}
	someFailed = []PrecheckResult{
		{Check: "NodesKnown", Passed: true, Reason: "Satisfied"},
		{Check: "NoVersionDrift", Passed: false, Reason: "VersionDrift", Message: "node-4 runs im:v1.10.0"},
		{Check: "VolumesHealthy", Passed: false, Reason: "SingleReplica", Message: "vol-1 has 1 replica"},
	}
)

// canonicalCommands returns, per command kind, the command with the best
// chance of being accepted in s.
func canonicalCommands(s State) map[string]Command {
	inFlight := s.UpgradingNode
	if inFlight == "" {
		inFlight = "node-1"
	}
	other := cmdRequest
	other.ID = "req-2"
	other.Nodes = []string{"node-1"}
	return map[string]Command{
		"request":            cmdRequest,
		"request-other-spec": other,
		"prechecks-pass":     RecordPrechecks{Meta: aggregate.Meta{ID: "pre"}, Results: allPassed, InstanceManagerImage: image, Order: plan3},
		"prechecks-fail":     RecordPrechecks{Meta: aggregate.Meta{ID: "pre"}, Results: someFailed},
		"outcome-completed":  RecordNodeOutcome{Meta: aggregate.Meta{ID: "out"}, Node: inFlight, State: events.NodeCompleted},
		"outcome-error":      RecordNodeOutcome{Meta: aggregate.Meta{ID: "out"}, Node: inFlight, State: events.NodeError, Message: "instance manager never started"},
		"schedule-next":      ScheduleNext{Meta: aggregate.Meta{ID: "next"}},
		"cancel":             RequestCancel{Meta: aggregate.Meta{ID: "cancel"}, Reason: "manager deleted"},
		"confirm-cancelled":  ConfirmCancelled{Meta: aggregate.Meta{ID: "confirm"}, Node: s.UpgradingNode},
		"fail":               Fail{Meta: aggregate.Meta{ID: "fail"}, Reason: "Manual", Message: "stopped by operator"},
		"hold":               Hold{Meta: aggregate.Meta{ID: "hold"}, Reason: "OtherUpgraderActive", Message: "Longhorn's upgrader is on"},
		"release":            Release{Meta: aggregate.Meta{ID: "release"}, Message: "off again"},
	}
}

// outcome is what a command must decide: event types, none, or a refusal.
type outcome = machinetest.Outcome

var (
	emits                             = machinetest.Emits
	none, refused, conflict, notFound = machinetest.None, machinetest.Refused, machinetest.Conflict, machinetest.NotFound
)

// Short names for expected event types.
const (
	tReq   = events.TypeUpgradeRequested
	tPass  = events.TypePrecheckPassed
	tFail  = events.TypePrecheckFailed
	tPlan  = events.TypeUpgradePlanned
	tSched = events.TypeNodeScheduled
	tFin   = events.TypeNodeFinished
	tDone  = events.TypeUpgradeCompleted
	tErr   = events.TypeUpgradeFailed
	tCReq  = events.TypeCancelRequested
	tCanc  = events.TypeUpgradeCancelled
	tHeld  = events.TypeUpgradeHeld
	tRel   = events.TypeUpgradeReleased
)

// terminalRe is every command on a terminal manager.
var terminalRe = map[string]outcome{
	"request": none, "request-other-spec": conflict, "prechecks-pass": none, "prechecks-fail": none,
	"outcome-completed": none, "outcome-error": none, "schedule-next": none, "cancel": none,
	"confirm-cancelled": none, "fail": none, "hold": none, "release": none,
}

// decisions is the command matrix: every command kind in every fixture
// (TestDecideCommandMatrix).
var decisions = map[string]map[string]outcome{
	"absent": {
		"request": emits(tReq), "request-other-spec": emits(tReq), "prechecks-pass": notFound, "prechecks-fail": notFound,
		"outcome-completed": notFound, "outcome-error": notFound, "schedule-next": notFound, "cancel": notFound,
		"confirm-cancelled": notFound, "fail": notFound,
		"hold": notFound, "release": notFound,
	},
	"pending": {
		"request": none, "request-other-spec": conflict,
		"prechecks-pass": emits(tPass, tPass, tPass, tPlan), "prechecks-fail": emits(tPass, tFail, tFail, tErr),
		"outcome-completed": refused, "outcome-error": refused, "schedule-next": refused,
		"cancel": emits(tCReq, tCanc), "confirm-cancelled": refused, "fail": emits(tErr),
		"hold": refused, "release": none,
	},
	"initializing": {
		"request": none, "request-other-spec": conflict, "prechecks-pass": emits(tPass, tPass, tPlan), "prechecks-fail": emits(tFail, tFail, tErr), // completes a decision stored in part
		"outcome-completed": refused, "outcome-error": refused, "schedule-next": refused,
		"cancel": emits(tCReq, tCanc), "confirm-cancelled": refused, "fail": emits(tErr),
		"hold": refused, "release": none,
	},
	"initializing-failed-check": {
		"request": none, "request-other-spec": conflict, "prechecks-pass": emits(tPass, tPass, tErr), "prechecks-fail": emits(tFail, tFail, tErr), // the recorded failure wins
		"outcome-completed": refused, "outcome-error": refused, "schedule-next": refused,
		"cancel": emits(tCReq, tCanc), "confirm-cancelled": refused, "fail": emits(tErr),
		"hold": refused, "release": none,
	},
	"planned": {
		"request": none, "request-other-spec": conflict, "prechecks-pass": none, "prechecks-fail": none,
		"outcome-completed": refused, "outcome-error": refused, "schedule-next": emits(tSched),
		"cancel": emits(tCReq, tCanc), "confirm-cancelled": refused, "fail": emits(tErr),
		"hold": emits(tHeld), "release": emits(tSched),
	},
	"in-flight": {
		"request": none, "request-other-spec": conflict, "prechecks-pass": none, "prechecks-fail": none,
		"outcome-completed": emits(tFin, tSched), "outcome-error": emits(tFin, tErr), "schedule-next": none,
		"cancel": emits(tCReq), "confirm-cancelled": refused, "fail": emits(tErr),
		"hold": emits(tHeld), "release": none,
	},
	"between-nodes": { // node-1 completed: a repeated outcome completes what followed it
		"request": none, "request-other-spec": conflict, "prechecks-pass": none, "prechecks-fail": none,
		"outcome-completed": emits(tSched), "outcome-error": conflict, "schedule-next": emits(tSched),
		"cancel": emits(tCReq, tCanc), "confirm-cancelled": refused, "fail": emits(tErr),
		"hold": emits(tHeld), "release": emits(tSched),
	},
	"node-errored": { // only reachable by raw events: NodeFinished(error) without UpgradeFailed
		"request": none, "request-other-spec": conflict, "prechecks-pass": none, "prechecks-fail": none,
		"outcome-completed": conflict, "outcome-error": emits(tErr), "schedule-next": emits(tErr),
		"cancel": emits(tCReq, tCanc), "confirm-cancelled": refused, "fail": emits(tErr),
		"hold": emits(tHeld), "release": emits(tErr),
	},
	"all-nodes-done": {
		"request": none, "request-other-spec": conflict, "prechecks-pass": none, "prechecks-fail": none,
		"outcome-completed": emits(tDone), "outcome-error": conflict, "schedule-next": emits(tDone),
		"cancel": emits(tCReq, tCanc), "confirm-cancelled": refused, "fail": emits(tErr),
		"hold": emits(tHeld), "release": emits(tDone),
	},
	"cancel-in-flight": {
		"request": none, "request-other-spec": conflict, "prechecks-pass": none, "prechecks-fail": none,
		"outcome-completed": emits(tFin, tCanc), "outcome-error": emits(tFin, tErr), "schedule-next": none,
		"cancel": none, "confirm-cancelled": emits(tCanc), "fail": emits(tErr),
		"hold": none, "release": none,
	},
	"cancel-idle": {
		"request": none, "request-other-spec": conflict, "prechecks-pass": none, "prechecks-fail": none,
		"outcome-completed": emits(tCanc), "outcome-error": conflict, "schedule-next": none,
		"cancel": emits(tCanc), "confirm-cancelled": emits(tCanc), "fail": emits(tErr),
		"hold": none, "release": none,
	},
	"held-idle": { // between nodes, held: nothing starts until released
		"request": none, "request-other-spec": conflict, "prechecks-pass": none, "prechecks-fail": none,
		"outcome-completed": none, "outcome-error": conflict, "schedule-next": none,
		"cancel": emits(tCReq, tCanc), "confirm-cancelled": refused, "fail": emits(tErr),
		"hold": none, "release": emits(tRel, tSched),
	},
	"held-in-flight": { // the node in flight finishes; the next waits
		"request": none, "request-other-spec": conflict, "prechecks-pass": none, "prechecks-fail": none,
		"outcome-completed": emits(tFin), "outcome-error": emits(tFin, tErr), "schedule-next": none,
		"cancel": emits(tCReq), "confirm-cancelled": refused, "fail": emits(tErr),
		"hold": none, "release": emits(tRel),
	},
	"completed": terminalRe,
	"error":     terminalRe,
	"cancelled": terminalRe,
}

func TestDecidePayloads(t *testing.T) {
	t.Run("request copies the spec", func(t *testing.T) {
		c := cmdRequest
		c.Nodes = []string{"node-2", "node-1"}
		evs, err := Decide(State{}, c)
		require.NoError(t, err)
		require.Equal(t, []events.Event{events.UpgradeRequested{
			Namespace: ref.Namespace, Name: ref.Name, UID: ref.UID, Generation: 1, DataEngine: "v2",
			Nodes: []string{"node-2", "node-1"},
		}}, evs)
	})
	t.Run("failed prechecks name every failure", func(t *testing.T) {
		s := fold(t, evRequested)
		evs, err := Decide(s, RecordPrechecks{Meta: aggregate.Meta{ID: "p"}, Results: someFailed})
		require.NoError(t, err)
		require.Equal(t, events.PrecheckFailed{Check: "NoVersionDrift", Reason: "VersionDrift", Message: "node-4 runs im:v1.10.0"}, evs[1])
		require.Equal(t, events.UpgradeFailed{
			Reason:  ReasonPrecheckFailed,
			Message: "2 precheck(s) failed: NoVersionDrift: node-4 runs im:v1.10.0; VolumesHealthy: vol-1 has 1 replica",
		}, evs[3])
	})
	t.Run("plan uses the given order", func(t *testing.T) {
		s := fold(t, evRequested)
		order := []string{"node-3", "node-1", "node-2"}
		evs, err := Decide(s, RecordPrechecks{Meta: aggregate.Meta{ID: "p"}, Results: allPassed, InstanceManagerImage: image, Order: order})
		require.NoError(t, err)
		require.Equal(t, events.UpgradePlanned{InstanceManagerImage: image, Nodes: order}, evs[3])
	})
	t.Run("schedule-next picks the first unfinished plan node", func(t *testing.T) {
		s := fold(t, evRequested, evPassed("A"), evPlanned, evScheduled("node-2"), evFinished("node-2", events.NodeCompleted))
		evs, err := Decide(s, ScheduleNext{Meta: aggregate.Meta{ID: "n"}})
		require.NoError(t, err)
		require.Equal(t, []events.Event{events.NodeScheduled{Node: "node-1", Attempt: 1}}, evs)
	})
	t.Run("completed outcome schedules the next node", func(t *testing.T) {
		s := fold(t, evRequested, evPassed("A"), evPlanned, evScheduled("node-1"))
		evs, err := Decide(s, RecordNodeOutcome{Meta: aggregate.Meta{ID: "o"}, Node: "node-1", State: events.NodeCompleted, Message: "done"})
		require.NoError(t, err)
		require.Equal(t, []events.Event{
			events.NodeFinished{Node: "node-1", State: events.NodeCompleted, Message: "done"},
			events.NodeScheduled{Node: "node-2", Attempt: 1},
		}, evs)
	})
	t.Run("error outcome fails the upgrade naming the node", func(t *testing.T) {
		s := fold(t, evRequested, evPassed("A"), evPlanned, evScheduled("node-1"))
		evs, err := Decide(s, RecordNodeOutcome{Meta: aggregate.Meta{ID: "o"}, Node: "node-1", State: events.NodeError})
		require.NoError(t, err)
		require.Equal(t, events.UpgradeFailed{Reason: ReasonNodeUpgradeFailed, Node: "node-1", Message: "node node-1: node upgrade failed"}, evs[1])
	})
	t.Run("completed outcome under cancel ends cancelled", func(t *testing.T) {
		s := fold(t, evRequested, evPassed("A"), evPlanned, evScheduled("node-1"), events.CancelRequested{})
		evs, err := Decide(s, RecordNodeOutcome{Meta: aggregate.Meta{ID: "o"}, Node: "node-1", State: events.NodeCompleted})
		require.NoError(t, err)
		require.Equal(t, events.UpgradeCancelled{Node: "node-1", Message: "upgrade cancelled with no node in flight; 1 of 3 planned node(s) completed"}, evs[1])
	})
	t.Run("confirm cancelled names the node's safe point", func(t *testing.T) {
		s := fold(t, evRequested, evPassed("A"), evPlanned, evScheduled("node-1"), events.CancelRequested{})
		evs, err := Decide(s, ConfirmCancelled{Meta: aggregate.Meta{ID: "c"}, Node: "node-1"})
		require.NoError(t, err)
		require.Equal(t, []events.Event{events.UpgradeCancelled{Node: "node-1", Message: "upgrade cancelled; node node-1 reached a safe point"}}, evs)
	})
	t.Run("same spec with another generation is a retry", func(t *testing.T) {
		s := fold(t, evRequested)
		c := cmdRequest
		c.Generation = 2
		evs, err := Decide(s, c)
		require.NoError(t, err)
		require.Empty(t, evs)
	})
}

func TestDecideRefusals(t *testing.T) {
	pending := []events.Event{evRequested}
	scoped := evRequested
	scoped.Nodes = []string{"node-1", "node-2"}
	inFlight := []events.Event{evRequested, evPassed("A"), evPlanned, evScheduled("node-1")}
	cases := []machinetest.CommandRefusal[Command]{
		{Name: "nil command", History: pending, Cmd: nil, Kind: nil, Reason: "no command"},
		{Name: "missing command id", History: pending, Cmd: ScheduleNext{}, Kind: nil, Reason: "command id is required"},
		{Name: "request without uid", History: nil, Cmd: RequestUpgrade{Meta: aggregate.Meta{ID: "r"}, Ref: events.ManagerRef{Namespace: "ns", Name: "n"}, DataEngine: "v2"}, Kind: nil, Reason: "uid are required"},
		{Name: "request without data engine", History: nil, Cmd: RequestUpgrade{Meta: aggregate.Meta{ID: "r"}, Ref: ref}, Kind: nil, Reason: "invalid event"},
		{Name: "request for another incarnation", History: pending, Cmd: RequestUpgrade{Meta: aggregate.Meta{ID: "r"}, Ref: otherRef, DataEngine: "v2"}, Kind: ErrConflict, Reason: "aggregate holds manager"},
		{Name: "request with another engine", History: pending, Cmd: RequestUpgrade{Meta: aggregate.Meta{ID: "r"}, Ref: ref, DataEngine: "v1"}, Kind: ErrConflict, Reason: "immutable"},
		{Name: "prechecks without results", History: pending, Cmd: RecordPrechecks{Meta: aggregate.Meta{ID: "p"}}, Kind: nil, Reason: "no precheck results"},
		{Name: "prechecks listed twice", History: pending, Cmd: RecordPrechecks{Meta: aggregate.Meta{ID: "p"}, Results: []PrecheckResult{allPassed[0], allPassed[0]}, InstanceManagerImage: image, Order: plan3}, Kind: nil, Reason: "listed twice"},
		{Name: "all passed without order", History: pending, Cmd: RecordPrechecks{Meta: aggregate.Meta{ID: "p"}, Results: allPassed, InstanceManagerImage: image}, Kind: nil, Reason: "order is empty"},
		{Name: "all passed without image", History: pending, Cmd: RecordPrechecks{Meta: aggregate.Meta{ID: "p"}, Results: allPassed, Order: plan3}, Kind: nil, Reason: "image is empty"},
		{Name: "order outside spec.nodes", History: []events.Event{scoped}, Cmd: RecordPrechecks{Meta: aggregate.Meta{ID: "p"}, Results: allPassed, InstanceManagerImage: image, Order: plan3}, Kind: nil, Reason: "does not request"},
		{Name: "order with a duplicate", History: pending, Cmd: RecordPrechecks{Meta: aggregate.Meta{ID: "p"}, Results: allPassed, InstanceManagerImage: image, Order: []string{"a", "a"}}, Kind: nil, Reason: "twice"},
		{Name: "failed precheck without message", History: pending, Cmd: RecordPrechecks{Meta: aggregate.Meta{ID: "p"}, Results: []PrecheckResult{{Check: "X", Reason: "Bad"}}}, Kind: nil, Reason: "message is required"},
		{Name: "passed precheck without reason", History: pending, Cmd: RecordPrechecks{Meta: aggregate.Meta{ID: "p"}, Results: []PrecheckResult{{Check: "X", Passed: true}}, InstanceManagerImage: image, Order: plan3}, Kind: nil, Reason: "reason is required"},
		{Name: "outcome without node", History: inFlight, Cmd: RecordNodeOutcome{Meta: aggregate.Meta{ID: "o"}, State: events.NodeCompleted}, Kind: nil, Reason: "node is required"},
		{Name: "outcome cancelled", History: inFlight, Cmd: RecordNodeOutcome{Meta: aggregate.Meta{ID: "o"}, Node: "node-1", State: events.NodeCancelled}, Kind: nil, Reason: "ConfirmCancelled"},
		{Name: "outcome not terminal", History: inFlight, Cmd: RecordNodeOutcome{Meta: aggregate.Meta{ID: "o"}, Node: "node-1", State: events.NodeSwitchingBack}, Kind: nil, Reason: "outcome must be"},
		{Name: "outcome for a node not in flight", History: inFlight, Cmd: RecordNodeOutcome{Meta: aggregate.Meta{ID: "o"}, Node: "node-2", State: events.NodeCompleted}, Kind: nil, Reason: "not in flight"},
		{Name: "confirm for another node", History: append(slices.Clone(inFlight), events.CancelRequested{}), Cmd: ConfirmCancelled{Meta: aggregate.Meta{ID: "c"}, Node: "node-2"}, Kind: nil, Reason: "node in flight is"},
		{Name: "fail without reason", History: pending, Cmd: Fail{Meta: aggregate.Meta{ID: "f"}, Message: "m"}, Kind: nil, Reason: "reason is required"},
		{Name: "fail without message", History: pending, Cmd: Fail{Meta: aggregate.Meta{ID: "f"}, Reason: "R"}, Kind: nil, Reason: "message is required"},
	}
	machinetest.DecideRefusals(t, machine, ref.String(), cases)
}

// TestDecideFullRun walks a complete upgrade through commands alone.
func TestDecideFullRun(t *testing.T) {
	h := newHarness(t)
	h.Do(cmdRequest)
	h.Do(RecordPrechecks{Meta: aggregate.Meta{ID: "pre"}, Results: allPassed, InstanceManagerImage: image, Order: plan3})
	h.Do(ScheduleNext{Meta: aggregate.Meta{ID: "next"}})
	for _, n := range plan3 {
		require.Equal(t, n, h.S.UpgradingNode)
		h.Do(RecordNodeOutcome{Meta: aggregate.Meta{ID: "out-" + n}, Node: n, State: events.NodeCompleted})
	}
	require.Equal(t, events.ManagerCompleted, h.S.State)
	require.True(t, h.S.AllNodesCompleted())
	// requested; 3 passed + planned; scheduled; 3 × (finished + scheduled|completed)
	require.Len(t, h.History, 12)
}
