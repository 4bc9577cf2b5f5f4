package nodeupgrade

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/aggregate"
	"github.com/switchback-dev/switchback/aggregate/internal/machinetest"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/test/harness/fuzzinput"
)

// choices are the fuzzers' choices, with the node upgrade's own generators.
type choices struct{ *fuzzinput.Choices }

func FuzzFoldNodeUpgrade(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{3, 1, 3, 1, 3, 1, 3, 1, 3, 0, 9, 7})
	f.Fuzz(func(t *testing.T, data []byte) {
		p := machinetest.FoldProgram(t, machine, data, genEvent, checkInvariants)

		// FoldStopping is Evolve one by one up to the first refusal.
		want, wantErr := State{}, error(nil)
		for _, e := range p.History {
			next, err := Evolve(want, e)
			if err != nil {
				wantErr = err
				break
			}
			want = next
		}
		gotAll, errAll := FoldStopping(State{}, p.History)
		require.Equal(t, want, gotAll, "FoldStopping differs from Evolve one by one")
		require.Equal(t, fmt.Sprint(wantErr), fmt.Sprint(errAll))
		requireFolderAgrees(t, p.History, p.States, data)
	})
}

// FuzzDecideNodeUpgrade drives the node upgrade with random commands:
// whatever Decide accepts must evolve, encode, and be idempotent; whatever it
// refuses must be a typed refusal.
func FuzzDecideNodeUpgrade(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		machinetest.DecideProgram(t, machine, data, genCommand, checkDecided)
	})
}

var (
	fuzzNodeStates = append(append([]events.NodeState{}, events.NodeSteps...),
		events.NodeCompleted, events.NodeError, events.NodeCancelled, "", "bogus")
	fuzzVolStates = []events.VolumeState{"", events.VolumePending, events.VolumeSwitchingOver, events.VolumeSwitchedOver,
		events.VolumeSwitchingBack, events.VolumeSwitchedBack, events.VolumeCompleted, events.VolumeError, "bogus"}
	fuzzVolumes = []string{"vol-a", "vol-b", "vol-c"}
	fuzzTargets = []string{"", node, "node-2", "node-3"}
	fuzzPods    = []string{"app/web-1", "app/db-0"}
)

const fuzzTaint = "upgrade.switchback.io/moving-workloads"

func (r choices) nodeState(s State) events.NodeState {
	if r.Coin() {
		return s.State
	}
	return fuzzNodeStates[r.Pick(len(fuzzNodeStates))]
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
func genEvent(c *fuzzinput.Choices, s State, i int) events.Envelope {
	r := choices{c}
	id := agg
	switch r.Pick(16) {
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
	if r.Coin() {
		if d := happyNext(s); d != nil {
			return mk(d)
		}
	}
	switch r.Pick(13) {
	case 0:
		return mk(events.NodeUpgradeStarted{Node: id.Node, DataEngine: r.OrEmpty("v2"), InstanceManagerImage: r.OrEmpty(image), Attempt: r.Pick(3),
			InitiatorPolicy: r.OrEmpty(events.InitiatorPolicyMoveWorkloads), ReplicaPolicy: r.OrEmpty(events.ReplicaPolicyAddFirst)})
	case 1:
		from := r.nodeState(s)
		to, _ := from.Next()
		if r.Pick(4) == 0 {
			to = fuzzNodeStates[r.Pick(len(fuzzNodeStates))]
		}
		return mk(events.NodeStateChanged{From: from, To: to, Message: r.OrEmpty("next step")})
	case 2:
		vol := fuzzVolumes[r.Pick(len(fuzzVolumes))]
		from := s.Volumes[vol].State
		if r.Pick(4) == 0 {
			from = fuzzVolStates[r.Pick(len(fuzzVolStates))]
		}
		return mk(events.VolumeStateChanged{Volume: vol, From: from, To: fuzzVolStates[r.Pick(len(fuzzVolStates))],
			TargetNode: fuzzTargets[r.Pick(len(fuzzTargets))], Message: r.OrEmpty("moved")})
	case 3:
		return mk(events.NodeStalled{Step: r.nodeState(s), Volume: r.OrEmpty("vol-a"), Reason: r.OrEmpty("Blocked"), Message: r.OrEmpty(fmt.Sprint("blocked ", r.Pick(3)))})
	case 4:
		return mk(events.NodeResumed{Step: r.nodeState(s), Message: r.OrEmpty("resumed")})
	case 5:
		return mk(events.NodeUpgradeCompleted{Message: r.OrEmpty("done")})
	case 6:
		return mk(events.NodeUpgradeFailed{Step: r.nodeState(s), Reason: r.OrEmpty("Boom"), Message: r.OrEmpty("failed")})
	case 7:
		return mk(events.NodeCancelRequested{Reason: r.OrEmpty("deleted")})
	case 8:
		return mk(events.NodeUpgradeCancelled{Step: r.nodeState(s), Message: r.OrEmpty("cancelled")})
	case 9:
		return mk(events.NodeTainted{Key: r.OrEmpty(fuzzTaint)})
	case 10:
		return mk(events.NodeUntainted{Key: r.OrEmpty(fuzzTaint)})
	case 11:
		return mk(events.PodMoved{Pod: r.OrEmpty(fuzzPods[r.Pick(len(fuzzPods))]), UID: r.OrEmpty(fmt.Sprint("uid-", r.Pick(2))),
			Volumes: []string{fuzzVolumes[r.Pick(len(fuzzVolumes))]}, Restart: r.Coin()})
	}
	if r.Coin() {
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
	if s.Taint != nil {
		require.NotEmpty(t, s.Taint.Key)
	}
	for i, m := range s.Moved {
		require.NotEmpty(t, m.Pod)
		require.NotEmpty(t, m.Volumes)
		for _, o := range s.Moved[:i] {
			require.False(t, o.Pod == m.Pod && o.UID == m.UID, "pod %s (uid %q) moved twice", m.Pod, m.UID)
		}
	}
	switch s.State {
	case events.NodeError:
		require.NotEmpty(t, s.FailedStep)
	case events.NodeCancelled:
		require.True(t, s.CancelRequested)
		require.NotEmpty(t, s.CancelledStep)
	}
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
			out = append(out, Start{Meta: aggregate.Meta{ID: id}, Node: d.Node, DataEngine: d.DataEngine, InstanceManagerImage: d.InstanceManagerImage, Attempt: d.Attempt})
		case events.NodeStateChanged:
			out = append(out, CompleteStep{Meta: aggregate.Meta{ID: id}, From: d.From})
		case events.VolumeStateChanged:
			out = append(out, SetVolumeState{Meta: aggregate.Meta{ID: id}, Volume: d.Volume, To: d.To, TargetNode: d.TargetNode})
		case events.NodeUpgradeCompleted:
			out = append(out, CompleteStep{Meta: aggregate.Meta{ID: id}, From: events.NodeFinalizing})
		}
	}
	return out
}()

func genCommand(c *fuzzinput.Choices, s State, i int) Command {
	r := choices{c}
	id, at := machine.FuzzCommandStamp(c, i)
	if r.Coin() {
		if s.CancelRequested {
			if evs, err := Decide(s, ConfirmCancelled{Meta: aggregate.Meta{ID: id, At: at}}); err == nil && len(evs) > 0 {
				return ConfirmCancelled{Meta: aggregate.Meta{ID: id, At: at}}
			}
		}
		for _, c := range happyCommands {
			if evs, err := Decide(s, c); err == nil && len(evs) > 0 {
				return c
			}
		}
	}
	step := func() events.NodeState {
		if r.Coin() {
			return ""
		}
		return fuzzNodeStates[r.Pick(len(fuzzNodeStates))]
	}
	switch r.Pick(13) {
	case 0:
		c := cmdStart
		c.ID, c.At = id, at
		if r.Pick(4) == 0 {
			c.Attempt = r.Pick(3)
		}
		return c
	case 1:
		return CompleteStep{Meta: aggregate.Meta{ID: id, At: at}, From: r.nodeState(s), Message: r.OrEmpty("done")}
	case 2:
		return SetVolumeState{Meta: aggregate.Meta{ID: id, At: at}, Volume: fuzzVolumes[r.Pick(len(fuzzVolumes))],
			To: fuzzVolStates[r.Pick(len(fuzzVolStates))], TargetNode: fuzzTargets[r.Pick(len(fuzzTargets))], Message: r.OrEmpty("m")}
	case 3:
		return ReportStall{Meta: aggregate.Meta{ID: id, At: at}, Step: step(), Volume: r.OrEmpty("vol-a"), Reason: r.OrEmpty("Blocked"), Message: r.OrEmpty(fmt.Sprint("blocked ", r.Pick(3)))}
	case 4:
		return ReportProgress{Meta: aggregate.Meta{ID: id, At: at}, Step: step(), Message: r.OrEmpty("moving")}
	case 5:
		return Fail{Meta: aggregate.Meta{ID: id, At: at}, Step: step(), Reason: r.OrEmpty("Boom"), Message: r.OrEmpty("failed")}
	case 6:
		return RequestCancel{Meta: aggregate.Meta{ID: id, At: at}, Reason: r.OrEmpty("deleted")}
	case 7:
		return RecordTaint{Meta: aggregate.Meta{ID: id, At: at}, Key: fuzzTaint}
	case 8:
		return ConfirmUntainted{Meta: aggregate.Meta{ID: id, At: at}}
	case 10:
		var evs []events.Event
		for range 1 + r.Pick(3) {
			vol := fuzzVolumes[r.Pick(len(fuzzVolumes))]
			switch r.Pick(8) {
			case 4:
				evs = append(evs, events.TemporaryReplicaRequested{Volume: vol, NumberOfReplicas: 2, Replicas: []string{"r"}, At: at, Deadline: at.Add(time.Minute)})
			case 5:
				evs = append(evs, events.ReplicaCountRaised{Volume: vol, NumberOfReplicas: 2, Raised: 3, FirstNode: r.OrEmpty("n0")})
			case 6:
				evs = append(evs, events.TemporaryReplicaAdded{Volume: vol, Replica: "r-t", Node: "n3"})
			case 7:
				evs = append(evs, events.ReplicaCountRestored{Volume: vol, NumberOfReplicas: 2, Replica: r.OrEmpty("r-t"), Message: "kept"})
			case 0:
				evs = append(evs, events.HashingRequested{Volume: vol, Snapshot: "snap", At: at, Deadline: at.Add(time.Minute)})
			case 1:
				evs = append(evs, events.RebuildPlanned{Volume: vol, Hashed: r.Coin(), Reason: r.OrEmpty("Skipped"), ExpectedBytes: int64(r.Pick(3)), FullBytes: 4})
			case 2:
				evs = append(evs, events.RebuildStarted{Volume: vol, Replica: "r", Progress: r.Pick(101), At: at})
			default:
				evs = append(evs, events.RebuildFinished{Volume: vol, At: at})
			}
		}
		return RecordRebuilds{Meta: aggregate.Meta{ID: id, At: at}, Events: evs}
	case 9:
		return RecordPodMoved{Meta: aggregate.Meta{ID: id, At: at}, Pod: fuzzPods[r.Pick(len(fuzzPods))], UID: fmt.Sprint("uid-", r.Pick(2)),
			Volumes: []string{fuzzVolumes[r.Pick(len(fuzzVolumes))]}, Restart: r.Coin()}
	}
	return ConfirmCancelled{Meta: aggregate.Meta{ID: id, At: at}, Message: r.OrEmpty("safe")}
}

// checkDecided holds for every state a decision leads to: the invariants,
// and no node ends with its volume work undone.
func checkDecided(t testing.TB, s State) {
	t.Helper()
	checkInvariants(t, s)
	if s.State == events.NodeCompleted {
		require.Empty(t, s.VolumesWhere(func(v Volume) bool { return v.State != events.VolumeCompleted }),
			"a node completed with volumes not completed")
	}
	if s.State == events.NodeCancelled {
		require.Empty(t, s.VolumesWhere(Volume.TargetAway), "a node cancelled with a target away")
	}
}
