package manager

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/aggregate"
	"github.com/switchback-dev/switchback/aggregate/internal/machinetest"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/test/harness/fuzzinput"
)

func FuzzFoldManager(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Fuzz(func(t *testing.T, data []byte) {
		machinetest.FoldProgram(t, machine, data, genEvent, checkInvariants)
	})
}

// FuzzDecideManager drives the manager with random commands: whatever Decide
// accepts must evolve, encode, and be idempotent; whatever it refuses must be
// a typed refusal.
func FuzzDecideManager(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 1, 1, 0, 2, 3, 3, 3, 3, 3, 3})
	f.Fuzz(func(t *testing.T, data []byte) {
		machinetest.DecideProgram(t, machine, data, genCommand, checkInvariants)
	})
}

// choices are the fuzzers' choices, with the manager's own generators.
type choices struct{ *fuzzinput.Choices }

var (
	fuzzNodes  = []string{"node-1", "node-2", "node-3", "node-4"}
	fuzzChecks = []string{"NodesKnown", "DefaultImageOnAllNodesReady", "NoVersionDrift", "VolumesHealthy"}
	fuzzStates = []events.NodeState{events.NodeCompleted, events.NodeError, events.NodeCancelled, events.NodePending, ""}
)

func (r choices) nodes() []string {
	var out []string
	for _, n := range fuzzNodes {
		if r.Coin() {
			out = append(out, n)
		}
	}
	return out
}

func (r choices) permutation(in []string) []string {
	out := slices.Clone(in)
	for i := len(out) - 1; i > 0; i-- {
		j := r.Pick(i + 1)
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// planFor picks a plan that is often legal for s.
func (r choices) planFor(s State) []string {
	switch r.Pick(4) {
	case 0:
		return r.nodes()
	case 1:
		return append(r.permutation(fuzzNodes[:2]), fuzzNodes[1])
	}
	if len(s.RequestedNodes) > 0 {
		return r.permutation(s.RequestedNodes)
	}
	return r.permutation(fuzzNodes[:3])
}

// nodeFor picks a node that is often the one s expects.
func (r choices) nodeFor(s State) string {
	if r.Coin() {
		if s.UpgradingNode != "" {
			return s.UpgradingNode
		}
		if n, ok := s.NextNode(); ok {
			return n
		}
	}
	return fuzzNodes[r.Pick(len(fuzzNodes))]
}

// genEvent builds one catalogue event, legal or not, biased by s so that long
// inputs reach deep states.
func genEvent(c *fuzzinput.Choices, s State, i int) events.Envelope {
	r := choices{c}
	id := agg
	switch r.Pick(16) {
	case 0:
		id = events.ManagerAggregate(otherRef)
	case 1:
		id = events.NodeAggregate(ref, "node-1")
	}
	var d events.Event
	if r.Coin() {
		if d = happyNext(r, s); d != nil {
			return events.New(id, events.SourceController, fmt.Sprintf("cmd-%d", i), t0.Add(time.Duration(i)*time.Second), d)[0]
		}
	}
	switch r.Pick(12) {
	case 0:
		m := id.Manager
		d = events.UpgradeRequested{Namespace: m.Namespace, Name: m.Name, UID: m.UID, Generation: 1, DataEngine: r.OrEmpty("v2"), Nodes: r.nodes()}
	case 1:
		d = events.PrecheckPassed{Check: fuzzChecks[r.Pick(len(fuzzChecks))], Reason: r.OrEmpty("Satisfied"), Message: r.OrEmpty("ok")}
	case 2:
		d = events.PrecheckFailed{Check: fuzzChecks[r.Pick(len(fuzzChecks))], Reason: "NotSatisfied", Message: r.OrEmpty("bad")}
	case 3:
		d = events.UpgradePlanned{InstanceManagerImage: r.OrEmpty(image), Nodes: r.planFor(s)}
	case 4:
		d = events.NodeScheduled{Node: r.nodeFor(s), Attempt: r.Pick(3)}
	case 5:
		d = events.NodeFinished{Node: r.nodeFor(s), State: fuzzStates[r.Pick(len(fuzzStates))], Message: r.OrEmpty("msg")}
	case 6:
		d = events.UpgradeCompleted{Message: r.OrEmpty("done")}
	case 7:
		d = events.UpgradeFailed{Reason: r.OrEmpty("Reason"), Message: r.OrEmpty("failed"), Node: r.OrEmpty(r.nodeFor(s))}
	case 8:
		d = events.CancelRequested{Reason: r.OrEmpty("deleted")}
	case 9:
		d = events.UpgradeCancelled{Node: r.OrEmpty(r.nodeFor(s)), Message: r.OrEmpty("cancelled")}
	case 10:
		d = events.NodeStateChanged{From: events.NodePending, To: events.NodeInitializing}
	default:
		return events.Envelope{ID: "no-data", Aggregate: id}
	}
	at := t0.Add(time.Duration(i) * time.Second)
	return events.New(id, events.SourceController, fmt.Sprintf("cmd-%d", i), at, d)[0]
}

// happyNext is the event the upgrade's normal course would append next (an
// error outcome now and then), or nil at the end.
func happyNext(r choices, s State) events.Event {
	switch {
	case !s.Exists:
		return evRequested
	case s.Terminal():
		return nil
	case s.CancelRequested:
		return events.UpgradeCancelled{Node: s.UpgradingNode}
	case s.UpgradingNode != "":
		st := events.NodeCompleted
		if r.Pick(8) == 0 {
			st = events.NodeError
		}
		return events.NodeFinished{Node: s.UpgradingNode, State: st}
	case len(s.FailedNodes()) > 0:
		return events.UpgradeFailed{Reason: ReasonNodeUpgradeFailed, Message: "node failed"}
	case s.Planned():
		if n, ok := s.NextNode(); ok {
			return evScheduled(n)
		}
		return events.UpgradeCompleted{}
	case len(s.Prechecks) < 2:
		return evPassed(fuzzChecks[len(s.Prechecks)])
	case s.AllPrechecksPassed():
		return events.UpgradePlanned{InstanceManagerImage: image, Nodes: r.planFor(s)}
	}
	return events.UpgradeFailed{Reason: ReasonPrecheckFailed, Message: "precheck failed"}
}

// checkInvariants holds for every state Evolve can produce.
func checkInvariants(t testing.TB, s State) {
	t.Helper()
	if !s.Exists {
		require.Equal(t, State{}, s, "an absent manager has no state")
		return
	}
	require.NotEmpty(t, s.State)
	pending := 0
	for n, st := range s.Nodes {
		require.Contains(t, s.Plan, n, "scheduled node outside the plan")
		require.GreaterOrEqual(t, st.Attempt, 1)
		if st.State == events.NodePending {
			pending++
			require.Equal(t, n, s.UpgradingNode, "a pending node must be the one in flight")
		} else {
			require.True(t, st.State.Terminal(), "node %s in state %s", n, st.State)
		}
	}
	if s.UpgradingNode != "" {
		require.Equal(t, 1, pending)
		require.Contains(t, []events.ManagerState{events.ManagerUpgrading, events.ManagerError}, s.State)
	} else {
		require.Zero(t, pending)
	}
	if s.Planned() {
		require.True(t, s.AllPrechecksPassed())
		require.NotEmpty(t, s.InstanceManagerImage)
	}
	switch s.State {
	case events.ManagerPending:
		require.Empty(t, s.Prechecks)
	case events.ManagerUpgrading:
		require.True(t, s.Planned())
	case events.ManagerCompleted:
		require.True(t, s.AllNodesCompleted())
		require.False(t, s.CancelRequested)
	case events.ManagerCancelled:
		require.True(t, s.CancelRequested)
		require.Empty(t, s.UpgradingNode)
	}
}

func genCommand(c *fuzzinput.Choices, s State, i int) Command {
	r := choices{c}
	id, at := machine.FuzzCommandStamp(c, i)
	if r.Coin() {
		switch {
		case !s.Exists:
			return RequestUpgrade{Meta: aggregate.Meta{ID: id, At: at}, Ref: ref, Generation: 1, DataEngine: "v2", Nodes: r.nodes()}
		case s.State == events.ManagerPending:
			return RecordPrechecks{Meta: aggregate.Meta{ID: id, At: at}, Results: allPassed, InstanceManagerImage: image, Order: r.planFor(s)}
		case s.CancelRequested:
			return ConfirmCancelled{Meta: aggregate.Meta{ID: id, At: at}, Node: s.UpgradingNode}
		case s.UpgradingNode != "":
			return RecordNodeOutcome{Meta: aggregate.Meta{ID: id, At: at}, Node: s.UpgradingNode, State: events.NodeCompleted}
		case s.Planned():
			return ScheduleNext{Meta: aggregate.Meta{ID: id, At: at}}
		}
	}
	switch r.Pick(9) {
	case 7:
		return Hold{Meta: aggregate.Meta{ID: id, At: at}, Reason: r.OrEmpty("OtherUpgraderActive"), Message: r.OrEmpty("Longhorn's upgrader is on")}
	case 8:
		return Release{Meta: aggregate.Meta{ID: id, At: at}, Message: r.OrEmpty("off again")}
	case 0:
		m := ref
		if r.Pick(4) == 0 {
			m = otherRef
		}
		return RequestUpgrade{Meta: aggregate.Meta{ID: id, At: at}, Ref: m, Generation: 1, DataEngine: r.OrEmpty("v2"), Nodes: r.nodes()}
	case 1:
		var res []PrecheckResult
		for range 1 + r.Pick(3) {
			passed := r.Pick(4) != 0
			res = append(res, PrecheckResult{
				Check: fuzzChecks[r.Pick(len(fuzzChecks))], Passed: passed, Reason: r.OrEmpty("Reason"), Message: r.OrEmpty("message"),
			})
		}
		if r.Pick(8) == 0 {
			res = nil
		}
		return RecordPrechecks{Meta: aggregate.Meta{ID: id, At: at}, Results: res, InstanceManagerImage: r.OrEmpty(image), Order: r.planFor(s)}
	case 2:
		st := events.NodeCompleted
		if r.Pick(4) == 0 {
			st = fuzzStates[r.Pick(len(fuzzStates))]
		}
		return RecordNodeOutcome{Meta: aggregate.Meta{ID: id, At: at}, Node: r.nodeFor(s), State: st, Message: r.OrEmpty("outcome")}
	case 3:
		return ScheduleNext{Meta: aggregate.Meta{ID: id, At: at}}
	case 4:
		return RequestCancel{Meta: aggregate.Meta{ID: id, At: at}, Reason: r.OrEmpty("manager deleted")}
	case 5:
		node := s.UpgradingNode
		if r.Pick(4) == 0 {
			node = r.nodeFor(s)
		}
		return ConfirmCancelled{Meta: aggregate.Meta{ID: id, At: at}, Node: node, Message: r.OrEmpty("safe")}
	default:
		return Fail{Meta: aggregate.Meta{ID: id, At: at}, Reason: r.OrEmpty("Reason"), Message: r.OrEmpty("failed"), Node: r.OrEmpty(r.nodeFor(s))}
	}
}
