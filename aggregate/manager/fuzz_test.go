package manager

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/events"
)

// choices is a deterministic source of choices for the fuzzers; once the input
// is used up it answers 0, so every input is a finite, valid program.
type choices struct {
	b []byte
	i int
}

func (r *choices) byte() byte {
	if r.i >= len(r.b) {
		return 0
	}
	r.i++
	return r.b[r.i-1]
}

func (r *choices) pick(n int) int { return int(r.byte()) % n }
func (r *choices) coin() bool     { return r.byte()&1 == 1 }
func (r *choices) done() bool     { return r.i >= len(r.b) }

var (
	fuzzNodes  = []string{"node-1", "node-2", "node-3", "node-4"}
	fuzzChecks = []string{"NodesKnown", "DefaultImageOnAllNodesReady", "NoVersionDrift", "VolumesHealthy"}
	fuzzStates = []events.NodeState{events.NodeCompleted, events.NodeError, events.NodeCancelled, events.NodePending, ""}
)

func (r *choices) nodes() []string {
	var out []string
	for _, n := range fuzzNodes {
		if r.coin() {
			out = append(out, n)
		}
	}
	return out
}

func (r *choices) permutation(in []string) []string {
	out := slices.Clone(in)
	for i := len(out) - 1; i > 0; i-- {
		j := r.pick(i + 1)
		out[i], out[j] = out[j], out[i]
	}
	return out
}

func (r *choices) str(s string) string {
	if r.pick(5) == 0 {
		return ""
	}
	return s
}

// planFor picks a plan that is often legal for s.
func (r *choices) planFor(s State) []string {
	switch r.pick(4) {
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
func (r *choices) nodeFor(s State) string {
	if r.coin() {
		if s.UpgradingNode != "" {
			return s.UpgradingNode
		}
		if n, ok := s.NextNode(); ok {
			return n
		}
	}
	return fuzzNodes[r.pick(len(fuzzNodes))]
}

// genEvent builds one catalogue event, legal or not, biased by s so that long
// inputs reach deep states.
func genEvent(r *choices, s State, i int) events.Envelope {
	id := agg
	switch r.pick(16) {
	case 0:
		id = events.ManagerAggregate(otherRef)
	case 1:
		id = events.NodeAggregate(ref, "node-1")
	}
	var d events.Event
	if r.coin() {
		if d = happyNext(r, s); d != nil {
			return events.New(id, events.SourceController, fmt.Sprintf("cmd-%d", i), t0.Add(time.Duration(i)*time.Second), d)[0]
		}
	}
	switch r.pick(12) {
	case 0:
		m := id.Manager
		d = events.UpgradeRequested{Namespace: m.Namespace, Name: m.Name, UID: m.UID, Generation: 1, DataEngine: r.str("v2"), Nodes: r.nodes()}
	case 1:
		d = events.PrecheckPassed{Check: fuzzChecks[r.pick(len(fuzzChecks))], Reason: r.str("Satisfied"), Message: r.str("ok")}
	case 2:
		d = events.PrecheckFailed{Check: fuzzChecks[r.pick(len(fuzzChecks))], Reason: "NotSatisfied", Message: r.str("bad")}
	case 3:
		d = events.UpgradePlanned{InstanceManagerImage: r.str(image), Nodes: r.planFor(s)}
	case 4:
		d = events.NodeScheduled{Node: r.nodeFor(s), Attempt: r.pick(3)}
	case 5:
		d = events.NodeFinished{Node: r.nodeFor(s), State: fuzzStates[r.pick(len(fuzzStates))], Message: r.str("msg")}
	case 6:
		d = events.UpgradeCompleted{Message: r.str("done")}
	case 7:
		d = events.UpgradeFailed{Reason: r.str("Reason"), Message: r.str("failed"), Node: r.str(r.nodeFor(s))}
	case 8:
		d = events.CancelRequested{Reason: r.str("deleted")}
	case 9:
		d = events.UpgradeCancelled{Node: r.str(r.nodeFor(s)), Message: r.str("cancelled")}
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
func happyNext(r *choices, s State) events.Event {
	switch {
	case !s.Exists:
		return evRequested
	case s.Terminal():
		return nil
	case s.CancelRequested:
		return events.UpgradeCancelled{Node: s.UpgradingNode}
	case s.UpgradingNode != "":
		st := events.NodeCompleted
		if r.pick(8) == 0 {
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

func countErrs(err error) int {
	if err == nil {
		return 0
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return len(j.Unwrap())
	}
	return 1
}

func FuzzFoldManager(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Fuzz(func(t *testing.T, data []byte) {
		r := &choices{b: data}
		var (
			history []events.Envelope
			states  []State
			s       State
			applied int
		)
		for !r.done() && len(history) < 64 {
			e := genEvent(r, s, len(history))
			before := cloneState(s)
			next, err := Evolve(s, e)
			require.Equal(t, before, s, "Evolve modified its input")
			if err != nil {
				require.ErrorIs(t, err, ErrIllegalTransition)
				var te *TransitionError
				require.ErrorAs(t, err, &te)
				require.Equal(t, s, next, "a refused event changed the state")
			} else {
				applied++
			}
			s = next
			checkInvariants(t, s)
			history = append(history, e)
			states = append(states, s)
		}
		require.Equal(t, applied, s.Transitions)

		s1, err1 := Fold(State{}, history...)
		s2, err2 := Fold(State{}, history...)
		require.Equal(t, s, s1)
		require.Equal(t, s1, s2, "folding the same history twice differs")
		require.Equal(t, fmt.Sprint(err1), fmt.Sprint(err2))
		require.Equal(t, len(history)-applied, countErrs(err1))

		k := 0
		if len(data) > 0 {
			k = int(data[0]) % (len(history) + 1)
		}
		p, errP := Fold(State{}, history[:k]...)
		all, errR := Fold(p, history[k:]...)
		require.Equal(t, s1, all, "prefix then rest differs from all at once")
		require.Equal(t, countErrs(err1), countErrs(errP)+countErrs(errR))

		// States are values: re-folding each prefix still gives the state
		// recorded on the way, so no later Evolve wrote into an earlier one.
		for _, i := range []int{k, len(states) / 2} {
			if i < len(states) {
				si, _ := Fold(State{}, history[:i+1]...)
				require.Equal(t, states[i], si)
			}
		}
		requireJSONRoundTrip(t, s)
	})
}

// FuzzDecideManager drives the manager with random commands: whatever Decide
// accepts must evolve, encode, and be idempotent; whatever it refuses must be
// a typed refusal.
func FuzzDecideManager(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 1, 1, 0, 2, 3, 3, 3, 3, 3, 3})
	f.Fuzz(func(t *testing.T, data []byte) {
		r := &choices{b: data}
		var s State
		for i := 0; !r.done() && i < 64; i++ {
			cmd := genCommand(r, s, i)
			before := cloneState(s)
			evs, err := Decide(s, cmd)
			require.Equal(t, before, s, "Decide modified its input")
			if err != nil {
				require.Nil(t, evs)
				require.ErrorIs(t, err, ErrIllegalCommand)
				var ce *CommandError
				require.True(t, errors.As(err, &ce))
				continue
			}
			id := s.Aggregate()
			if c, ok := cmd.(RequestUpgrade); ok && !s.Exists {
				id = events.ManagerAggregate(c.Ref)
			}
			for _, e := range events.New(id, events.SourceController, cmd.CommandID(), cmd.CommandTime(), evs...) {
				_, err := e.ToCloudEvent()
				require.NoError(t, err, "%T decided an event that does not encode", cmd)
				s, err = Evolve(s, e)
				require.NoError(t, err, "%T decided an event Evolve refuses", cmd)
			}
			checkInvariants(t, s)
			again, err := Decide(s, cmd)
			require.NoError(t, err, "re-deciding %T", cmd)
			require.Empty(t, again, "re-deciding %T is not idempotent", cmd)
		}
	})
}

func genCommand(r *choices, s State, i int) Command {
	id := fmt.Sprintf("cmd-%d", i)
	if r.pick(32) == 0 {
		id = ""
	}
	at := t0.Add(time.Duration(i) * time.Minute)
	if r.coin() {
		switch {
		case !s.Exists:
			return RequestUpgrade{ID: id, At: at, Ref: ref, Generation: 1, DataEngine: "v2", Nodes: r.nodes()}
		case s.State == events.ManagerPending:
			return RecordPrechecks{ID: id, At: at, Results: allPassed, InstanceManagerImage: image, Order: r.planFor(s)}
		case s.CancelRequested:
			return ConfirmCancelled{ID: id, At: at, Node: s.UpgradingNode}
		case s.UpgradingNode != "":
			return RecordNodeOutcome{ID: id, At: at, Node: s.UpgradingNode, State: events.NodeCompleted}
		case s.Planned():
			return ScheduleNext{ID: id, At: at}
		}
	}
	switch r.pick(9) {
	case 7:
		return Hold{ID: id, At: at, Reason: r.str("OtherUpgraderActive"), Message: r.str("Longhorn's upgrader is on")}
	case 8:
		return Release{ID: id, At: at, Message: r.str("off again")}
	case 0:
		m := ref
		if r.pick(4) == 0 {
			m = otherRef
		}
		return RequestUpgrade{ID: id, At: at, Ref: m, Generation: 1, DataEngine: r.str("v2"), Nodes: r.nodes()}
	case 1:
		var res []PrecheckResult
		for range 1 + r.pick(3) {
			passed := r.pick(4) != 0
			res = append(res, PrecheckResult{
				Check: fuzzChecks[r.pick(len(fuzzChecks))], Passed: passed, Reason: r.str("Reason"), Message: r.str("message"),
			})
		}
		if r.pick(8) == 0 {
			res = nil
		}
		return RecordPrechecks{ID: id, At: at, Results: res, InstanceManagerImage: r.str(image), Order: r.planFor(s)}
	case 2:
		st := events.NodeCompleted
		if r.pick(4) == 0 {
			st = fuzzStates[r.pick(len(fuzzStates))]
		}
		return RecordNodeOutcome{ID: id, At: at, Node: r.nodeFor(s), State: st, Message: r.str("outcome")}
	case 3:
		return ScheduleNext{ID: id, At: at}
	case 4:
		return RequestCancel{ID: id, At: at, Reason: r.str("manager deleted")}
	case 5:
		node := s.UpgradingNode
		if r.pick(4) == 0 {
			node = r.nodeFor(s)
		}
		return ConfirmCancelled{ID: id, At: at, Node: node, Message: r.str("safe")}
	default:
		return Fail{ID: id, At: at, Reason: r.str("Reason"), Message: r.str("failed"), Node: r.str(r.nodeFor(s))}
	}
}
