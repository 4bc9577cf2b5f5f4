package nodeupgrade

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/events"
)

// choices is a deterministic source of choices for the fuzzers; once the
// input is used up it answers 0, so every input is a finite, valid program.
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

func (r *choices) str(s string) string {
	if r.pick(5) == 0 {
		return ""
	}
	return s
}

var (
	fuzzNodeStates = append(append([]events.NodeState{}, events.NodeSteps...),
		events.NodeCompleted, events.NodeError, events.NodeCancelled, "", "bogus")
	fuzzVolStates = []events.VolumeState{"", events.VolumePending, events.VolumeSwitchingOver, events.VolumeSwitchedOver,
		events.VolumeSwitchingBack, events.VolumeSwitchedBack, events.VolumeCompleted, events.VolumeError, "bogus"}
	fuzzVolumes = []string{"vol-a", "vol-b", "vol-c"}
	fuzzTargets = []string{"", node, "node-2", "node-3"}
)

func (r *choices) nodeState(s State) events.NodeState {
	if r.coin() {
		return s.State
	}
	return fuzzNodeStates[r.pick(len(fuzzNodeStates))]
}

// happyNext is the next event of the normal course (timeline), or nil.
func happyNext(s State) events.Event {
	if s.CancelRequested && len(s.VolumesWhere(Volume.TargetAway)) == 0 && !s.Terminal() {
		return events.NodeUpgradeCancelled{Step: s.State}
	}
	for _, d := range timeline {
		if _, err := Evolve(s, env(d)); err == nil {
			return d
		}
	}
	return nil
}

// genEvent builds one catalogue event, legal or not, biased by s.
func genEvent(r *choices, s State, i int) events.Envelope {
	id := agg
	switch r.pick(16) {
	case 0:
		id = events.NodeAggregate(ref, "node-2")
	case 1:
		id = events.ManagerAggregate(ref)
	case 2:
		id = events.NodeAggregate(otherRef, node)
	}
	at := t0.Add(time.Duration(i) * time.Second)
	mk := func(d events.Event) events.Envelope {
		return events.New(id, source, fmt.Sprintf("cmd-%d", i), at, d)[0]
	}
	if r.coin() {
		if d := happyNext(s); d != nil {
			return mk(d)
		}
	}
	switch r.pick(10) {
	case 0:
		return mk(events.NodeUpgradeStarted{Node: id.Node, DataEngine: r.str("v2"), InstanceManagerImage: r.str(image), Attempt: r.pick(3)})
	case 1:
		from := r.nodeState(s)
		to, _ := from.Next()
		if r.pick(4) == 0 {
			to = fuzzNodeStates[r.pick(len(fuzzNodeStates))]
		}
		return mk(events.NodeStateChanged{From: from, To: to, Message: r.str("next step")})
	case 2:
		vol := fuzzVolumes[r.pick(len(fuzzVolumes))]
		from := s.Volumes[vol].State
		if r.pick(4) == 0 {
			from = fuzzVolStates[r.pick(len(fuzzVolStates))]
		}
		return mk(events.VolumeStateChanged{Volume: vol, From: from, To: fuzzVolStates[r.pick(len(fuzzVolStates))],
			TargetNode: fuzzTargets[r.pick(len(fuzzTargets))], Message: r.str("moved")})
	case 3:
		return mk(events.NodeStalled{Step: r.nodeState(s), Volume: r.str("vol-a"), Reason: r.str("Blocked"), Message: r.str(fmt.Sprint("blocked ", r.pick(3)))})
	case 4:
		return mk(events.NodeResumed{Step: r.nodeState(s), Message: r.str("resumed")})
	case 5:
		return mk(events.NodeUpgradeCompleted{Message: r.str("done")})
	case 6:
		return mk(events.NodeUpgradeFailed{Step: r.nodeState(s), Reason: r.str("Boom"), Message: r.str("failed")})
	case 7:
		return mk(events.NodeCancelRequested{Reason: r.str("deleted")})
	case 8:
		return mk(events.NodeUpgradeCancelled{Step: r.nodeState(s), Message: r.str("cancelled")})
	}
	if r.coin() {
		return mk(events.CancelRequested{})
	}
	return events.Envelope{ID: "no-data", Aggregate: id}
}

// checkInvariants holds for every state Evolve can produce.
func checkInvariants(t testing.TB, s State) {
	t.Helper()
	if !s.Exists {
		require.Equal(t, State{}, s, "an absent node upgrade has no state")
		return
	}
	require.True(t, s.State.Valid(), "state %q", s.State)
	require.NotEmpty(t, s.Node)
	require.GreaterOrEqual(t, s.Attempt, 1)
	if s.Stalled {
		require.False(t, s.State.Terminal())
		require.Equal(t, s.State, s.StallStep)
		require.NotEmpty(t, s.StallReason)
		require.NotEmpty(t, s.StallMessage)
	} else {
		require.Empty(t, s.StallStep)
		require.Empty(t, s.StallReason)
		require.Zero(t, s.StalledAt)
	}
	for name, v := range s.Volumes {
		require.True(t, v.State.Valid(), "volume %s state %q", name, v.State)
	}
	switch s.State {
	case events.NodeError:
		require.NotEmpty(t, s.FailedStep)
	case events.NodeCancelled:
		require.True(t, s.CancelRequested)
		require.NotEmpty(t, s.CancelledStep)
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

func requireJSONRoundTrip(t testing.TB, s State) {
	t.Helper()
	b, err := json.Marshal(s)
	require.NoError(t, err)
	var back State
	require.NoError(t, json.Unmarshal(b, &back))
	require.Equal(t, s, back)
}

func FuzzFoldNodeUpgrade(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{3, 1, 3, 1, 3, 1, 3, 1, 3, 0, 9, 7})
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

		// ApplyAll is Evolve one by one up to the first refusal.
		want, wantErr := State{}, error(nil)
		for _, e := range history {
			next, err := Evolve(want, e)
			if err != nil {
				wantErr = err
				break
			}
			want = next
		}
		gotAll, errAll := ApplyAll(State{}, history)
		require.Equal(t, want, gotAll, "ApplyAll differs from Evolve one by one")
		require.Equal(t, fmt.Sprint(wantErr), fmt.Sprint(errAll))

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

		// States are values: re-folding a prefix still gives the state
		// recorded on the way, so no later Evolve wrote into an earlier one.
		for _, i := range []int{k, len(states) / 2} {
			if i < len(states) {
				si, _ := Fold(State{}, history[:i+1]...)
				require.Equal(t, states[i], si)
			}
		}
		requireFolderAgrees(t, history, states, data)
		requireJSONRoundTrip(t, s)
	})
}

// requireFolderAgrees: a Folder over history goes through exactly Evolve's
// states, refuses the same events, and the states it hands out on the way
// (chosen by data) are values that its later in-place changes do not touch.
func requireFolderAgrees(t *testing.T, history []events.Envelope, states []State, data []byte) {
	t.Helper()
	f := NewFolder(State{})
	type taken struct {
		at    int
		state State
		copy  State
	}
	var out []taken
	var ev State
	for i, e := range history {
		err := f.Apply(e)
		next, evolveErr := Evolve(ev, e)
		require.Equal(t, evolveErr == nil, err == nil, "Folder and Evolve disagree on event %d", i)
		ev = next
		if i < len(data) && data[i]%3 == 0 {
			st := f.State()
			out = append(out, taken{at: i, state: st, copy: cloneState(st)})
		}
	}
	if len(states) > 0 {
		require.Equal(t, states[len(states)-1], f.State())
	}
	for _, tk := range out {
		require.Equal(t, states[tk.at], tk.state)
		require.Equal(t, tk.copy, tk.state, "a state handed out at %d changed later", tk.at)
	}
}

// happyCommands maps the timeline to the commands a worker would send.
var happyCommands = func() []Command {
	var out []Command
	for i, d := range timeline {
		id := fmt.Sprintf("happy-%d", i)
		switch d := d.(type) {
		case events.NodeUpgradeStarted:
			out = append(out, Start{ID: id, Node: d.Node, DataEngine: d.DataEngine, InstanceManagerImage: d.InstanceManagerImage, Attempt: d.Attempt})
		case events.NodeStateChanged:
			out = append(out, CompleteStep{ID: id, From: d.From})
		case events.VolumeStateChanged:
			out = append(out, SetVolumeState{ID: id, Volume: d.Volume, To: d.To, TargetNode: d.TargetNode})
		case events.NodeUpgradeCompleted:
			out = append(out, CompleteStep{ID: id, From: events.NodeFinalizing})
		}
	}
	return out
}()

func genCommand(r *choices, s State, i int) Command {
	id := fmt.Sprintf("cmd-%d", i)
	if r.pick(32) == 0 {
		id = ""
	}
	at := t0.Add(time.Duration(i) * time.Minute)
	if r.coin() {
		if s.CancelRequested {
			if evs, err := Decide(s, ConfirmCancelled{ID: id, At: at}); err == nil && len(evs) > 0 {
				return ConfirmCancelled{ID: id, At: at}
			}
		}
		for _, c := range happyCommands {
			if evs, err := Decide(s, c); err == nil && len(evs) > 0 {
				return c
			}
		}
	}
	step := func() events.NodeState {
		if r.coin() {
			return ""
		}
		return fuzzNodeStates[r.pick(len(fuzzNodeStates))]
	}
	switch r.pick(8) {
	case 0:
		c := cmdStart
		c.ID, c.At = id, at
		if r.pick(4) == 0 {
			c.Attempt = r.pick(3)
		}
		return c
	case 1:
		return CompleteStep{ID: id, At: at, From: r.nodeState(s), Message: r.str("done")}
	case 2:
		return SetVolumeState{ID: id, At: at, Volume: fuzzVolumes[r.pick(len(fuzzVolumes))],
			To: fuzzVolStates[r.pick(len(fuzzVolStates))], TargetNode: fuzzTargets[r.pick(len(fuzzTargets))], Message: r.str("m")}
	case 3:
		return ReportStall{ID: id, At: at, Step: step(), Volume: r.str("vol-a"), Reason: r.str("Blocked"), Message: r.str(fmt.Sprint("blocked ", r.pick(3)))}
	case 4:
		return ReportProgress{ID: id, At: at, Step: step(), Message: r.str("moving")}
	case 5:
		return Fail{ID: id, At: at, Step: step(), Reason: r.str("Boom"), Message: r.str("failed")}
	case 6:
		return RequestCancel{ID: id, At: at, Reason: r.str("deleted")}
	}
	return ConfirmCancelled{ID: id, At: at, Message: r.str("safe")}
}

// FuzzDecideNodeUpgrade drives the node upgrade with random commands:
// whatever Decide accepts must evolve, encode, and be idempotent; whatever it
// refuses must be a typed refusal.
func FuzzDecideNodeUpgrade(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1})
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
			for _, e := range events.New(agg, source, cmd.CommandID(), cmd.CommandTime(), evs...) {
				_, err := e.ToCloudEvent()
				require.NoError(t, err, "%T decided an event that does not encode", cmd)
				s, err = Evolve(s, e)
				require.NoError(t, err, "%T decided an event Evolve refuses", cmd)
			}
			checkInvariants(t, s)
			if s.State == events.NodeCompleted {
				require.Empty(t, s.VolumesWhere(func(v Volume) bool { return v.State != events.VolumeCompleted }),
					"a node completed with volumes not completed")
			}
			if s.State == events.NodeCancelled {
				require.Empty(t, s.VolumesWhere(Volume.TargetAway), "a node cancelled with a target away")
			}
			again, err := Decide(s, cmd)
			require.NoError(t, err, "re-deciding %T", cmd)
			require.Empty(t, again, "re-deciding %T is not idempotent", cmd)
		}
	})
}
