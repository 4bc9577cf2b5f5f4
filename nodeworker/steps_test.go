package nodeworker

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/aggregate"
	"github.com/switchback-dev/switchback/aggregate/nodeupgrade"
	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/events"
)

// The step decisions are pure: each table gives what a round observed and
// what the node's history holds, and checks the plan: the data-plane calls
// in order, the history recorded, a block or done.

const (
	oldIM = "im:v1"
	newIM = "im:v2"
)

var cfg = settings{node: "n1", image: newIM, snapshot: "switchback-uid-n1", idPrefix: "worker/uid/n1/"}

func replica(vol, node string, st dataplane.ReplicaState) dataplane.Replica {
	return dataplane.Replica{Name: vol + "-r-" + node, Node: node, State: st}
}

// volume is an attached v2 volume with a settled target on its engine node
// (the attached node when engineOn is ""), a blockdev frontend and a
// running replica on each of replicaNodes.
func volume(name, attached, engineOn string, replicaNodes ...string) dataplane.Volume {
	v := dataplane.Volume{Name: name, DataEngine: dataplane.DataEngineV2, NumberOfReplicas: len(replicaNodes),
		AttachedNode: attached, EngineNode: engineOn, Frontend: dataplane.FrontendBlockdev, Robustness: dataplane.RobustnessHealthy}
	if attached != "" {
		v.TargetNode, v.TargetReady = v.EngineHome(engineOn), true
	}
	for _, n := range replicaNodes {
		v.Replicas = append(v.Replicas, replica(name, n, dataplane.ReplicaRunning))
	}
	return v
}

func im(name, image string, state dataplane.IMState) dataplane.InstanceManager {
	return dataplane.InstanceManager{Name: name, Node: "n1", Image: image, DataEngine: dataplane.DataEngineV2, State: state}
}

func observed(profile dataplane.Profile, vols ...dataplane.Volume) observation {
	o := observation{profile: profile, found: true,
		node:     dataplane.Node{Name: "n1", Ready: true, V2: true, AllowScheduling: true, ManagerIMImage: newIM},
		ims:      []dataplane.InstanceManager{im("im-n1-1", oldIM, dataplane.IMRunning)},
		on:       vols,
		recorded: map[string]dataplane.Volume{}}
	for _, v := range vols {
		o.recorded[v.Name] = v
	}
	return o
}

// state is a node upgrade at step with vols recorded in the given states;
// past initializing, the node's scheduling (true) is recorded.
func state(step events.NodeState, vols map[string]nodeupgrade.Volume) nodeupgrade.State {
	st := nodeupgrade.State{Exists: true, Node: "n1", State: step, InstanceManagerImage: newIM, Volumes: vols}
	if step != events.NodeInitializing {
		st.Scheduling = &nodeupgrade.Scheduling{Previous: true}
	}
	return st
}

// schedulingOff is o as seen mid-upgrade: the node's scheduling turned off.
func schedulingOff(o observation) observation {
	o.node.AllowScheduling = false
	return o
}

func ptr(s string) *string { return &s }

func actions(p stepPlan) []string {
	out := []string{}
	for _, a := range p.actions {
		out = append(out, a.String())
	}
	return out
}

func volumeChanges(p stepPlan) []string {
	out := []string{}
	for _, v := range p.volumes {
		s := v.Volume + "->" + string(v.To)
		if v.TargetNode != "" {
			s += "@" + v.TargetNode
		}
		if v.EngineNodeBefore != nil {
			s += " before=" + *v.EngineNodeBefore
		}
		out = append(out, s)
	}
	return out
}

func reason(p stepPlan) string {
	if p.block == nil {
		return ""
	}
	return p.block.reason
}

func TestDecideInitialize(t *testing.T) {
	storage := volume("vol-s", "c1", "n1", "n1", "n2")
	tests := []struct {
		name    string
		o       observation
		st      nodeupgrade.State
		actions []string
		volumes []string
		record  int
		confirm int
		reason  string
		done    bool
	}{
		{name: "v1.12: a node holding initiators stalls before touching anything",
			o: observed(dataplane.ProfileV112, volume("vol-a", "n1", "", "n1", "n2"), storage), st: state(events.NodeInitializing, nil),
			reason: "InitiatorsOnNode"},
		{name: "in-place: initiators survive; scheduling recorded then turned off, volumes recorded, attached ones snapshotted",
			o: observed(dataplane.ProfileInPlace, volume("vol-a", "n1", "", "n1", "n2"), storage), st: state(events.NodeInitializing, nil),
			actions: []string{"SetReplicaScheduling n1 allow=false", "CreateSnapshot vol-a switchback-uid-n1", "CreateSnapshot vol-s switchback-uid-n1"},
			volumes: []string{"vol-a->pending@n1", "vol-s->pending@n1"}, record: 1, confirm: 1, done: true},
		{name: "v1.12: a storage node; a detached volume is recorded, a v1 volume is not; neither is snapshotted",
			o: func() observation {
				v1 := volume("vol-v1", "c1", "", "n1")
				v1.DataEngine = "v1"
				return observed(dataplane.ProfileV112, storage, volume("vol-d", "", "", "n1"), v1)
			}(), st: state(events.NodeInitializing, nil),
			actions: []string{"SetReplicaScheduling n1 allow=false", "CreateSnapshot vol-s switchback-uid-n1"},
			volumes: []string{"vol-s->pending@n1", "vol-d->pending"}, record: 1, confirm: 1, done: true},
		{name: "a node that already does not schedule: recorded as false, nothing to write",
			o: func() observation {
				o := observed(dataplane.ProfileV112, storage)
				o.node.AllowScheduling = false
				return o
			}(), st: state(events.NodeInitializing, nil),
			actions: []string{"CreateSnapshot vol-s switchback-uid-n1"}, volumes: []string{"vol-s->pending@n1"}, record: 1, confirm: 1, done: true},
		{name: "redelivered after everything was recorded: the write lost in a crash is redone, nothing recorded twice",
			o: observed(dataplane.ProfileV112, storage),
			st: func() nodeupgrade.State {
				st := state(events.NodeInitializing, map[string]nodeupgrade.Volume{"vol-s": {State: events.VolumePending}})
				st.Scheduling = &nodeupgrade.Scheduling{Previous: true}
				st.Snapshots = &nodeupgrade.Snapshots{Name: cfg.snapshot, Volumes: []string{"vol-s"}}
				return st
			}(),
			actions: []string{"SetReplicaScheduling n1 allow=false"}, done: true},
		{name: "a deleted node fails the upgrade", o: observation{profile: dataplane.ProfileV112}, st: state(events.NodeInitializing, nil)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := decideInitialize(tt.o, tt.st, cfg)
			if !tt.o.found {
				require.NotNil(t, p.fatal)
				assert.Equal(t, "NodeDeleted", p.fatal.reason)
				return
			}
			assert.Equal(t, append([]string{}, tt.actions...), actions(p))
			assert.Equal(t, append([]string{}, tt.volumes...), volumeChanges(p))
			assert.Len(t, p.record, tt.record)
			assert.Len(t, p.confirm, tt.confirm)
			assert.Equal(t, tt.reason, reason(p))
			assert.Equal(t, tt.done, p.done)
			if tt.reason == "InitiatorsOnNode" {
				assert.Contains(t, p.block.message, "vol-a")
				assert.Empty(t, p.actions, "nothing touched")
				assert.Empty(t, p.record)
			}
		})
	}
	// The recorded scheduling carries the value the node had.
	p := decideInitialize(observed(dataplane.ProfileV112, storage), state(events.NodeInitializing, nil), cfg)
	assert.Equal(t, nodeupgrade.RecordScheduling{Meta: aggregate.Meta{ID: "worker/uid/n1/scheduling"}, AllowScheduling: true}, p.record[0])
}

func TestDecideFailReplicas(t *testing.T) {
	pending := func(names ...string) map[string]nodeupgrade.Volume {
		m := map[string]nodeupgrade.Volume{}
		for _, n := range names {
			m[n] = nodeupgrade.Volume{State: events.VolumePending}
		}
		return m
	}
	stopped := volume("vol-x", "c1", "n2", "n1", "n2")
	stopped.Replicas[0].State = dataplane.ReplicaStopped
	lastHealthy := volume("vol-l", "c1", "n2", "n1", "n2")
	lastHealthy.Replicas[1].State = dataplane.ReplicaError
	rebuilding := volume("vol-r", "c1", "n2", "n1", "n2")
	rebuilding.Replicas[0].State = dataplane.ReplicaRebuilding
	tests := []struct {
		name    string
		o       observation
		actions []string
		reason  string
		done    bool
	}{
		{name: "the node's replicas of attached volumes are failed; detached volumes' are not",
			o:       observed(dataplane.ProfileV112, volume("vol-a", "c1", "n1", "n1", "n2"), volume("vol-d", "", "", "n1", "n2")),
			actions: []string{"FailReplica vol-a vol-a-r-n1"}},
		{name: "a rebuilding replica is failed too", o: observed(dataplane.ProfileV112, rebuilding), actions: []string{"FailReplica vol-r vol-r-r-n1"}},
		{name: "all stopped: done", o: observed(dataplane.ProfileV112, stopped), done: true},
		{name: "the last healthy replica is never failed", o: observed(dataplane.ProfileV112, lastHealthy), reason: "LastHealthyReplica"},
		{name: "the IM already runs the target image: nothing to disturb",
			o: func() observation {
				o := observed(dataplane.ProfileV112, volume("vol-a", "c1", "n1", "n1", "n2"))
				o.ims = []dataplane.InstanceManager{im("im-n1-2", newIM, dataplane.IMRunning)}
				return o
			}(), done: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			names := []string{}
			for n := range tt.o.recorded {
				names = append(names, n)
			}
			p := decideFailReplicas(schedulingOff(tt.o), state(events.NodeFailingReplicas, pending(names...)), cfg)
			assert.Equal(t, append([]string{}, tt.actions...), actions(p))
			assert.Equal(t, tt.reason, reason(p))
			assert.Equal(t, tt.done, p.done)
		})
	}
}

func TestDecideUpgradeInstanceManager(t *testing.T) {
	idle := im("im-n1-1", oldIM, dataplane.IMRunning)
	busy := idle
	busy.Replicas = 1
	frontends := idle
	frontends.Frontends = 2
	next := im("im-n1-2", newIM, dataplane.IMStopped)
	tests := []struct {
		name    string
		profile dataplane.Profile
		vols    []dataplane.Volume
		ims     []dataplane.InstanceManager
		actions []string
		reason  string
		done    bool
	}{
		{name: "v1.12: an idle old IM is deleted, as Longhorn would", profile: dataplane.ProfileV112, ims: []dataplane.InstanceManager{idle, next},
			actions: []string{"DeleteInstanceManager im-n1-1"}},
		{name: "v1.12: a busy old IM is waited for", profile: dataplane.ProfileV112, ims: []dataplane.InstanceManager{busy, next}, reason: "InstanceManagerBusy"},
		{name: "a target still on the node: never replaced", profile: dataplane.ProfileV112, ims: []dataplane.InstanceManager{idle, next},
			vols: []dataplane.Volume{volume("vol-s", "c1", "n1", "n2")}, reason: "TargetStillOnNode"},
		{name: "v1.12: initiators attached since: never replaced", profile: dataplane.ProfileV112, ims: []dataplane.InstanceManager{frontends, next},
			vols: []dataplane.Volume{volume("vol-a", "n1", "n2", "n2")}, reason: "InitiatorsOnNode"},
		{name: "being replaced: waits for the new IM", profile: dataplane.ProfileV112,
			ims: []dataplane.InstanceManager{im("im-n1-2", newIM, dataplane.IMStarting)}, reason: "InstanceManagerStarting"},
		{name: "the new IM in error: a permanent block", profile: dataplane.ProfileV112,
			ims: []dataplane.InstanceManager{im("im-n1-2", newIM, dataplane.IMError)}, reason: "InstanceManagerFailed"},
		{name: "running the target image: done", profile: dataplane.ProfileV112,
			ims: []dataplane.InstanceManager{im("im-n1-2", newIM, dataplane.IMRunning)}, done: true},
		{name: "in-place: initiators stay, the IM's image is set", profile: dataplane.ProfileInPlace,
			vols: []dataplane.Volume{volume("vol-a", "n1", "n2", "n2")}, ims: []dataplane.InstanceManager{frontends}, actions: []string{"SetInstanceManagerImage im-n1-1 im:v2"}},
		{name: "in-place: a replica still running: waits", profile: dataplane.ProfileInPlace, ims: []dataplane.InstanceManager{busy}, reason: "InstanceManagerBusy"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := schedulingOff(observed(tt.profile, tt.vols...))
			o.ims = tt.ims
			p := decideUpgradeInstanceManager(o, state(events.NodeUpgradingInstanceManager, nil), cfg)
			assert.Equal(t, append([]string{}, tt.actions...), actions(p))
			assert.Equal(t, tt.reason, reason(p))
			assert.Equal(t, tt.done, p.done)
		})
	}
}

func TestDecideWaitHealthyAndFinalize(t *testing.T) {
	rebuilding := volume("vol-s", "c1", "n1", "n1", "n2")
	rebuilding.Replicas[0].State = dataplane.ReplicaRebuilding
	st := state(events.NodeRebuildingReplica, map[string]nodeupgrade.Volume{"vol-s": {State: events.VolumeSwitchedBack}})
	st.Scheduling = &nodeupgrade.Scheduling{Previous: false, Restored: true}
	p := decideWaitHealthy(observed(dataplane.ProfileV112, rebuilding), st, cfg)
	assert.Equal(t, "VolumeNotHealthy", reason(p))
	assert.Contains(t, p.block.message, "does not allow replica scheduling, as before the upgrade")
	assert.True(t, decideWaitHealthy(observed(dataplane.ProfileV112, volume("vol-s", "c1", "n1", "n1", "n2")), st, cfg).done)

	st.State = events.NodeFinalizing
	st.Snapshots = &nodeupgrade.Snapshots{Name: cfg.snapshot, Volumes: []string{"vol-gone", "vol-s"}}
	p = decideFinalize(observed(dataplane.ProfileV112, volume("vol-s", "c1", "n1", "n1", "n2")), st, cfg)
	assert.Empty(t, actions(p), "the snapshots stay for the nodes after this one; the controller removes them at the end")
	assert.Equal(t, []string{"vol-s->completed"}, volumeChanges(p))
	assert.True(t, p.done)
}

func TestDecideCancel(t *testing.T) {
	away := volume("vol-s", "c1", "n3", "n2")
	away.Away = &dataplane.TargetAway{Node: "n1", EngineNodeBefore: "n1", Temporary: "n3"}
	st := state(events.NodeUpgradingInstanceManager, map[string]nodeupgrade.Volume{
		"vol-s": {State: events.VolumeSwitchedOver, TargetNode: "n3", EngineNodeBefore: ptr("n1")},
	})
	st.CancelRequested = true
	st.Scheduling = &nodeupgrade.Scheduling{Previous: true}

	o := observed(dataplane.ProfileV112, away)
	o.ims = []dataplane.InstanceManager{im("im-n1-2", newIM, dataplane.IMStarting)}
	o.node.AllowScheduling = false
	p := decideCancel(o, st, cfg)
	assert.Equal(t, "WaitingForInstanceManager", reason(p), "the target waits for the node's IM to run")
	assert.Empty(t, actions(p), "and scheduling stays off until every target is home")

	o.ims = []dataplane.InstanceManager{im("im-n1-2", newIM, dataplane.IMRunning)}
	p = decideCancel(o, st, cfg)
	assert.Equal(t, []string{`SetEngineNode vol-s "n1"`}, actions(p))
	assert.False(t, p.done)

	home := observed(dataplane.ProfileV112, volume("vol-s", "c1", "n1", "n2"))
	home.node.AllowScheduling = false
	st.Volumes["vol-s"] = nodeupgrade.Volume{State: events.VolumeSwitchingBack, TargetNode: "n1", EngineNodeBefore: ptr("n1")}
	p = decideCancel(home, st, cfg)
	assert.Equal(t, []string{"SetReplicaScheduling n1 allow=true"}, actions(p))
	assert.Equal(t, []string{"vol-s->switched-back@n1"}, volumeChanges(p))
	assert.True(t, p.done)
}

// A user turning the node's replica scheduling back on mid-upgrade is undone
// by every step until the new IM runs; once it runs, it is left alone (the
// switch-back restores the recorded value).
func TestSchedulingKeptOffUntilTheNewIMRuns(t *testing.T) {
	storage := volume("vol-s", "c1", "n1", "n1", "n2")
	recorded := map[string]nodeupgrade.Volume{"vol-s": {State: events.VolumePending}}
	newRunning := []dataplane.InstanceManager{im("im-n1-2", newIM, dataplane.IMRunning)}
	tests := []struct {
		step   events.NodeState
		ims    []dataplane.InstanceManager
		decide func(o observation, st nodeupgrade.State) stepPlan
		turned bool
	}{
		{step: events.NodeFailingReplicas, turned: true,
			decide: func(o observation, st nodeupgrade.State) stepPlan { return decideFailReplicas(o, st, cfg) }},
		{step: events.NodeSwitchingOver, turned: true,
			decide: func(o observation, st nodeupgrade.State) stepPlan { return decideSwitchOver(o, st, cfg) }},
		{step: events.NodeUpgradingInstanceManager, turned: true,
			decide: func(o observation, st nodeupgrade.State) stepPlan { return decideUpgradeInstanceManager(o, st, cfg) }},
		{step: events.NodeUpgradingInstanceManager, ims: newRunning,
			decide: func(o observation, st nodeupgrade.State) stepPlan { return decideUpgradeInstanceManager(o, st, cfg) }},
	}
	for _, tt := range tests {
		name := string(tt.step)
		if tt.ims != nil {
			name += ", new IM running"
		}
		t.Run(name, func(t *testing.T) {
			v := storage
			if tt.step == events.NodeUpgradingInstanceManager {
				v = volume("vol-s", "c1", "n2", "n1", "n2") // switched over
			}
			o := observed(dataplane.ProfileV112, v) // scheduling on again
			if tt.ims != nil {
				o.ims = tt.ims
			}
			p := tt.decide(o, state(tt.step, recorded))
			assert.Equal(t, tt.turned, slices.Contains(actions(p), "SetReplicaScheduling n1 allow=false"), "%v", actions(p))
			assert.False(t, slices.ContainsFunc(p.record, func(c nodeupgrade.Command) bool {
				_, ok := c.(nodeupgrade.RecordScheduling)
				return ok
			}), "the value before the upgrade is not recorded again")
		})
	}
}

// A node whose data plane reports another Longhorn profile than the one its
// upgrade started on acts no more, whatever the step, until it is back.
func TestProfileChangedUnderTheUpgradeHoldsEveryStep(t *testing.T) {
	for _, step := range events.NodeSteps {
		t.Run(string(step), func(t *testing.T) {
			st := state(step, nil)
			st.LonghornProfile = string(dataplane.ProfileV112)
			p := decide(step, observed(dataplane.ProfileInPlace), st, cfg)
			assert.Equal(t, ReasonLonghornProfileChanged, reason(p))
			assert.Empty(t, p.actions)
			assert.False(t, p.done)
			assert.Contains(t, p.block.message, "started on Longhorn profile v1.12, and the data plane now reports in-place")

			p = decide(step, observed(dataplane.ProfileV112), st, cfg)
			assert.NotEqual(t, ReasonLonghornProfileChanged, reason(p))
		})
	}
}

// TestEveryWorkingStateHasItsStep: the steps table covers exactly the
// working states, each with a decision, and each completion but pending's
// says what the step did.
func TestEveryWorkingStateHasItsStep(t *testing.T) {
	require.Len(t, nodeSteps, len(events.NodeSteps))
	for _, s := range events.NodeSteps {
		step, ok := nodeSteps[s]
		require.True(t, ok, s)
		assert.NotNil(t, step.decide, s)
		assert.Equal(t, s != events.NodePending, step.done != "", s)
	}
	assert.True(t, decide(events.NodePending, observed(dataplane.ProfileV112), nodeupgrade.State{}, cfg).done)
	assert.Equal(t, "UnknownStep", decide(events.NodeCompleted, observed(dataplane.ProfileV112), nodeupgrade.State{}, cfg).fatal.reason)
}
