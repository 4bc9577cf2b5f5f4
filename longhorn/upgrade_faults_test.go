package longhorn_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/aggregate/manager"
	"github.com/switchback-dev/switchback/aggregate/nodeupgrade"
	"github.com/switchback-dev/switchback/api/v1beta2"
	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/longhorn"
	"github.com/switchback-dev/switchback/sim"
	"github.com/switchback-dev/switchback/test/harness/enginetest"
)

// TestImageMissingOnANodeIsRefused: the target image must be in a node's
// status.images (the kubelet's list) for DefaultImageOnAllNodesReady.
func TestImageMissingOnANodeIsRefused(t *testing.T) {
	s := build(t, latencies, vol{name: "vol-1", attached: "node-1", replicas: all3})
	require.NoError(t, s.SetNodeImages("node-3", []string{sim.OldIMImage}))
	c := newCluster(t, s)
	e := enginetest.Start(t, c.plane, enginetest.Options{})
	m := ref("image-missing")
	e.Request(m)
	st := e.WaitManager(m, 30*time.Second, "a terminal state", terminal)
	require.Equal(t, events.ManagerError, st.State)
	assert.Contains(t, st.Message, "DefaultImageOnAllNodesReady")
	for _, p := range st.Prechecks {
		if p.Check == "DefaultImageOnAllNodesReady" {
			assert.Equal(t, "instance-manager image "+sim.NewIMImage+" is not present on nodes: node-3", p.Message)
		}
	}
	actions, _ := s.ActionLog()
	assert.Empty(t, actions, "the cluster was not touched")
}

// storageLayout is a v1.12 layout where every step of a storage node has
// work: volumes attached on client node c1 (not upgraded) with their
// engines on the storage nodes n1..n3 and 2 or 3 replicas there, one
// volume whose engine follows its attachment, and one detached. n3 does not
// schedule replicas to begin with, so the upgrade must restore two
// different values.
func storageLayout(t *testing.T, cfg sim.Config) (*sim.Sim, []string) {
	t.Helper()
	s := sim.New(cfg)
	for _, n := range []string{"c1", "n1", "n2", "n3"} {
		require.NoError(t, s.AddNodeSpec(sim.NodeSpec{Name: n, NoScheduling: n == "n3"}))
	}
	for _, v := range []sim.VolumeSpec{
		{Name: "vol-0", ReplicasOn: []string{"n1", "n2", "n3"}, AttachedTo: "c1", EngineOn: "n1"},
		{Name: "vol-1", ReplicasOn: []string{"n1", "n2"}, AttachedTo: "c1", EngineOn: "n1"},
		{Name: "vol-2", ReplicasOn: []string{"n2", "n3"}, AttachedTo: "c1", EngineOn: "n2"},
		{Name: "vol-3", ReplicasOn: []string{"n1", "n3"}, AttachedTo: "c1", EngineOn: "n3"},
		{Name: "vol-4", ReplicasOn: []string{"n1", "n2", "n3"}},
		{Name: "vol-5", ReplicasOn: []string{"n2", "n3"}, AttachedTo: "c1"},
	} {
		require.NoError(t, s.AddVolumeSpec(v))
	}
	require.NoError(t, s.AddVolume("legacy-v1", sim.EngineV1, []string{"n1", "n2"}, "c1"))
	return s, []string{"n1", "n2", "n3"}
}

// storageSpec is the request of an upgrade of nodes of storageLayout. n3
// does not schedule replicas, which the request accepts (precheck
// ReplicaSchedulingAllowed): Longhorn rebuilds its replicas elsewhere.
func storageSpec(nodes []string) v1beta2.DataEngineUpgradeManagerSpec {
	return v1beta2.DataEngineUpgradeManagerSpec{DataEngine: v1beta2.DataEngineTypeV2, Nodes: nodes, AllowNodesWithoutReplicaScheduling: true}
}

// TestNodeWithoutReplicaSchedulingIsRefusedUnlessAccepted: n3 of the
// storage layout does not allow replica scheduling and holds replicas of
// attached volumes: an upgrade naming it is refused, naming the node and
// its volumes, and the cluster is not touched.
func TestNodeWithoutReplicaSchedulingIsRefusedUnlessAccepted(t *testing.T) {
	s, storage := storageLayout(t, latencies)
	c := newCluster(t, s)
	e := enginetest.Start(t, c.plane, enginetest.Options{})
	m := ref("unschedulable")
	e.Request(m, storage...)
	st := e.WaitManager(m, 30*time.Second, "a terminal state", terminal)
	require.Equal(t, events.ManagerError, st.State)
	var failed []string
	for _, p := range st.Prechecks {
		if !p.Passed {
			failed = append(failed, p.Check)
			assert.Contains(t, p.Message, "n3 (replicas of vol-0, vol-2, vol-3, vol-5)")
		}
	}
	assert.Equal(t, []string{"ReplicaSchedulingAllowed"}, failed)
	actions, _ := s.ActionLog()
	assert.Empty(t, actions, "the cluster was not touched")
}

// TestFailingSwitchoverStallsThenResumes: Longhorn keeps reverting a
// volume's switch-over (told to fail it); the node stays in switching-over
// (not error) with a message naming the volume, the state and the Warning's
// text; once healed, the upgrade goes on.
func TestFailingSwitchoverStallsThenResumes(t *testing.T) {
	s, storage := storageLayout(t, latencies)
	require.NoError(t, s.InjectTargetMoveFailure("vol-0")) // its engine is on n1
	c := newCluster(t, s)
	was := recordBefore(t, c)
	e := enginetest.Start(t, c.plane, enginetest.Options{})
	m := ref("stuck")
	e.RequestSpec(m, storageSpec(storage))
	// The stall is recorded once the initiator's phase call fails, and
	// recorded again with the Warning's text once its Event reaches the
	// worker's cache.
	stalled := e.WaitNode(m, "n1", 20*time.Second, "stalled, naming the Warning", func(n nodeupgrade.State) bool {
		return n.Stalled && n.StallVolume == "vol-0" && n.StallReason == "SwitchoverFailing" &&
			strings.Contains(n.StallMessage, "Failed to switch over target to ")
	})
	assert.Equal(t, events.NodeSwitchingOver, stalled.State, "a stuck volume keeps the node in its current state")
	assert.Contains(t, stalled.StallMessage, `switchoverState "switching-over"`)
	assert.Contains(t, stalled.StallMessage, "Failed to switch over target to ")
	assert.Contains(t, stalled.StallMessage, "injected fault: switch-over refused")
	assert.Equal(t, events.ManagerUpgrading, e.Manager(m).State, "not error")
	// What the user sees in Longhorn: the engine node asked for, the target
	// still on n1, the Warning on the EngineFrontend.
	v := decode[longhorn.Volume](c, longhorn.VolumesResource, "vol-0")
	assert.NotEqual(t, "n1", v.Spec.EngineNodeID)
	assert.Equal(t, "n1", v.Status.CurrentEngineNodeID)
	assert.Equal(t, "switching-over", v.Status.SwitchoverState)
	warned := false
	for _, u := range c.list(longhorn.EventsResource) {
		var ev longhorn.Event
		require.NoError(t, longhorn.FromUnstructured(&u, &ev))
		warned = warned || (ev.Reason == longhorn.ReasonFailedSwitchover && ev.InvolvedObject.Name == "vol-0-ef-0" && ev.Type == "Warning")
	}
	assert.True(t, warned, "a FailedSwitchover Warning on vol-0's EngineFrontend")

	require.NoError(t, s.HealTargetMoveFailure("vol-0"))
	c.mgr.Kick()
	completed(t, e, m)
	_, resumed := enginetest.LastOf[events.NodeResumed](e.History(m))
	assert.True(t, resumed, "history shows the resume")
	was.leftClean(t, s, c)
}

// TestInstanceManagerThatNeverStartsStallsThenFails: the new IM on n1 goes
// to error; the node stalls, then fails after failAfter; targets stayed on
// running IMs, and n1's replica scheduling is restored before the failure.
func TestInstanceManagerThatNeverStartsStallsThenFails(t *testing.T) {
	s, _ := storageLayout(t, latencies)
	require.NoError(t, s.InjectIMStartFailure("n1"))
	c := newCluster(t, s)
	was := recordBefore(t, c)
	e := enginetest.Start(t, c.plane, enginetest.Options{StallAfter: 100 * time.Millisecond, FailAfter: time.Second})
	st := e.IMNeverStarts(ref("im-fails"), "n1", "n2")
	// What Longhorn shows: n1's new IM, on the target image, in error.
	var inError []string
	for _, u := range c.list(longhorn.InstanceManagersResource) {
		var im longhorn.InstanceManager
		require.NoError(t, longhorn.FromUnstructured(&u, &im))
		if im.Spec.NodeID == "n1" && im.Status.CurrentState == longhorn.StateError {
			assert.Equal(t, st.InstanceManagerImage, im.Spec.Image)
			inError = append(inError, im.Name)
		}
	}
	assert.Len(t, inError, 1)
	assert.Zero(t, s.IOStats().FailedByActions(), "targets stayed on running IMs: %s", s.IOStats())
	assert.Equal(t, was.scheduling, recordBefore(t, c).scheduling, "replica scheduling restored before the error")
}

// TestCancelReachesASafePoint deletes the manager while the first node is
// at each step in turn: every target comes home with its engine node as it
// was, replica scheduling is restored, no I/O fails.
func TestCancelReachesASafePoint(t *testing.T) {
	for _, step := range events.NodeSteps {
		t.Run(string(step), func(t *testing.T) {
			u := upgradeToStep(t, "cancel-", step, enginetest.Options{})
			u.e.Cancel(u.m)
			st := u.e.WaitManager(u.m, 20*time.Second, "a terminal state", terminal)
			require.Equal(t, events.ManagerCancelled, st.State, st.Message)
			eventually(t, 5*time.Second, "the safe point", func() bool { return len(u.s.Unsafe("")) == 0 })
			u.c.waitInStep("after the cancel")
			u.was.restored(t, u.c)
			_, cancelled := enginetest.LastOf[events.UpgradeCancelled](u.e.History(u.m))
			assert.True(t, cancelled)
			assert.Zero(t, u.s.IOStats().Failed, "%s", u.s.IOStats())
		})
	}
}

// TestWorkerKilledAtEveryStep: a worker killed mid-step gets its command
// back and resumes through the adapter with no repeated side effect: each
// transition once, each snapshot, engine move and IM deletion once.
func TestWorkerKilledAtEveryStep(t *testing.T) {
	for _, step := range events.NodeSteps {
		t.Run(string(step), func(t *testing.T) {
			u := upgradeToStep(t, "kill-", step, enginetest.Options{AckWait: 300 * time.Millisecond})
			u.e.StopWorker(u.node)
			u.e.StartWorker(u.node)

			completed(t, u.e, u.m)
			transitionsOnce(t, u.e, u.m)
			// Side effects that must happen once per upgrade reached the
			// simulator once: a retried step found its own snapshot object.
			done := map[string]int{}
			actions, _ := u.s.ActionLog()
			for _, a := range actions {
				if !a.NoOp && a.Err == "" && (a.Action == "CreateSnapshot" || a.Action == "DeleteSnapshot") {
					done[a.Action+" "+a.Object+" "+a.Arg]++
				}
			}
			assert.NotEmpty(t, done)
			for key, n := range done {
				assert.Equal(t, 1, n, "%s done once", key)
			}
			u.was.leftClean(t, u.s, u.c)
		})
	}
}

// inFlight is an upgrade of the storage nodes of storageLayout through the
// adapter, with its first node in flight.
type inFlight struct {
	s    *sim.Sim
	c    *cluster
	was  before
	e    *enginetest.Engine
	m    events.ManagerRef
	node string // the first node in flight
}

// upgradeToStep starts the upgrade prefix+step of the storage nodes of
// storageLayout, its engine run with opts, and returns once the first node
// in flight is at or past step.
func upgradeToStep(t *testing.T, prefix string, step events.NodeState, opts enginetest.Options) inFlight {
	t.Helper()
	s, storage := storageLayout(t, latencies)
	c := newCluster(t, s)
	u := inFlight{s: s, c: c, was: recordBefore(t, c), e: enginetest.Start(t, c.plane, opts), m: ref(prefix + string(step))}
	u.e.RequestSpec(u.m, storageSpec(storage))
	u.node = u.e.WaitManager(u.m, 10*time.Second, "a node in flight", func(s manager.State) bool { return s.UpgradingNode != "" }).UpgradingNode
	u.e.WaitNode(u.m, u.node, 10*time.Second, "step "+string(step), enginetest.AtOrPast(step))
	return u
}

// TestOtherUpgraderSwitchedOnHoldsBeforeTheNextNode: Longhorn's own
// upgrader switched on (its setting, as Longhorn's objects show it) while a
// storage node is upgraded: that node finishes, no new node starts, the
// upgrade is held naming the setting; switched off, it goes on and
// completes with every node as it was.
func TestOtherUpgraderSwitchedOnHoldsBeforeTheNextNode(t *testing.T) {
	s, storage := storageLayout(t, latencies)
	c := newCluster(t, s)
	was := recordBefore(t, c)
	e := enginetest.Start(t, c.plane, enginetest.Options{})
	m := ref("held")
	e.RequestSpec(m, storageSpec(storage))
	first := e.WaitManager(m, 20*time.Second, "a node in flight", func(s manager.State) bool { return s.UpgradingNode != "" }).UpgradingNode
	s.SetLonghornUpgrader(dataplane.LonghornUpgrader{Settings: map[string]string{dataplane.SettingIMAutoUpgrade: `{"v1":"false","v2":"true"}`}})
	c.mgr.Kick()

	held := e.WaitManager(m, 30*time.Second, "held between nodes", func(s manager.State) bool { return s.Held != nil && s.UpgradingNode == "" })
	assert.Equal(t, events.ManagerUpgrading, held.State)
	assert.Equal(t, events.NodeCompleted, held.Nodes[first].State, "the node in flight finished")
	assert.Len(t, held.Nodes, 1, "no new node started")
	assert.Equal(t, `Longhorn's own instance-manager upgrader would race this upgrade: setting allow-instance-manager-automatic-upgrade is "{\"v1\":\"false\",\"v2\":\"true\"}": set "v2" to "false" in it`, held.Held.Message)

	s.SetLonghornUpgrader(dataplane.LonghornUpgrader{Settings: map[string]string{dataplane.SettingIMAutoUpgrade: `{"v1":"false","v2":"false"}`}})
	c.mgr.Kick()
	completed(t, e, m)
	_, released := enginetest.LastOf[events.UpgradeReleased](e.History(m))
	assert.True(t, released)
	assert.Zero(t, s.IOStats().Failed, "%s", s.IOStats())
	c.waitInStep("after the upgrade")
	was.restored(t, c)
}
