package longhorn_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/aggregate/manager"
	"github.com/switchback-dev/switchback/aggregate/nodeupgrade"
	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/internal/enginetest"
	"github.com/switchback-dev/switchback/longhorn"
	"github.com/switchback-dev/switchback/sim"
)

// The whole upgrade engine (embedded NATS, orchestrator, one worker per
// node) drives the Longhorn adapter; the simulated Longhorn manager turns
// the objects the adapter writes into simulator actions, and the
// simulator's I/O checker judges every step.

func ref(name string) events.ManagerRef {
	return events.ManagerRef{Namespace: "longhorn-system", Name: name, UID: "uid-" + name}
}

func terminal(s manager.State) bool { return s.Terminal() }

// latencies make every Longhorn reaction take a little time, so steps
// really wait on the objects.
var latencies = sim.Config{TargetMoveLatency: 20 * time.Millisecond, IMStartLatency: 30 * time.Millisecond, RebuildLatency: 20 * time.Millisecond}

type vol struct {
	name     string
	engine   string
	attached string
	replicas []string
}

// build makes a cluster of node-1..node-3 with vols.
func build(t *testing.T, vols ...vol) *sim.Sim {
	t.Helper()
	s := sim.New(latencies)
	for _, n := range []string{"node-1", "node-2", "node-3"} {
		require.NoError(t, s.AddNode(n))
	}
	for _, v := range vols {
		engine := v.engine
		if engine == "" {
			engine = sim.EngineV2
		}
		require.NoError(t, s.AddVolume(v.name, engine, v.replicas, v.attached))
	}
	return s
}

var all3 = []string{"node-1", "node-2", "node-3"}

// legacy is a v1 volume attached to node-1 with replicas on node-1 and
// node-2: the upgrade of those nodes must leave it and its replicas alone.
var legacy = vol{name: "legacy-v1", engine: sim.EngineV1, attached: "node-1", replicas: []string{"node-1", "node-2"}}

// untouched records the resourceVersions of the v1 volume, its engine and
// its replicas, and returns a check that none changed.
func untouched(t *testing.T, c *cluster, volume string) func() {
	t.Helper()
	rv := map[string]string{
		"volume/" + volume: c.object(longhorn.VolumesResource, volume).GetResourceVersion(),
		"engine/" + volume: c.object(longhorn.EnginesResource, volume+"-e-0").GetResourceVersion(),
	}
	for _, r := range c.list(longhorn.ReplicasResource) {
		var rep longhorn.Replica
		require.NoError(t, longhorn.FromUnstructured(&r, &rep))
		if rep.Spec.VolumeName == volume {
			rv["replica/"+rep.Name] = rep.ResourceVersion
		}
	}
	require.Len(t, rv, 4, "volume, engine and two replicas")
	return func() {
		t.Helper()
		for key, before := range rv {
			kind, name, _ := strings.Cut(key, "/")
			var now string
			switch kind {
			case "volume":
				now = c.object(longhorn.VolumesResource, name).GetResourceVersion()
			case "engine":
				now = c.object(longhorn.EnginesResource, name+"-e-0").GetResourceVersion()
			default:
				now = c.object(longhorn.ReplicasResource, name).GetResourceVersion()
			}
			assert.Equal(t, before, now, "v1 %s %s untouched (resourceVersion)", kind, name)
		}
	}
}

// TestProposalTestPlan runs the proposal's test-plan layouts (SPEC.md,
// "Preconditions": three nodes, every node upgraded) through the adapter.
func TestProposalTestPlan(t *testing.T) {
	// e = engine (attached node, target), r = replicas; the proposal's
	// tables, plus a v1 volume on nodes 1 and 2 that must stay untouched.
	healthy := []vol{{"vol-2", "", "node-1", all3}, {"vol-3", "", "node-1", all3}}
	cases := []struct {
		name     string
		vols     []vol
		accepted bool
	}{
		{"refused case 1: vol-1 single replica on node 1, engine on node 1",
			append([]vol{{name: "vol-1", attached: "node-1", replicas: []string{"node-1"}}}, healthy...), false},
		{"refused case 2: vol-1 single replica on node 2, engine on node 1",
			append([]vol{{name: "vol-1", attached: "node-1", replicas: []string{"node-2"}}}, healthy...), false},
		{"accepted case 1: three volumes with 3 replicas, engines all on node 1",
			[]vol{{"vol-1", "", "node-1", all3}, {"vol-2", "", "node-1", all3}, {"vol-3", "", "node-1", all3}}, true},
		{"accepted case 2: engines on node 1, replicas only on nodes 2 and 3",
			[]vol{{"vol-1", "", "node-1", all3[1:]}, {"vol-2", "", "node-1", all3[1:]}, {"vol-3", "", "node-1", all3[1:]}}, true},
		{"accepted case 3: engines spread over nodes 1, 2 and 3 (and a detached volume)",
			[]vol{{"vol-1", "", "node-1", all3}, {"vol-2", "", "node-2", all3}, {"vol-3", "", "node-3", all3},
				{name: "vol-detached", replicas: all3[:2]}}, true},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := build(t, append(slices.Clone(tc.vols), legacy)...)
			c := newCluster(t, s)
			v1Untouched := untouched(t, c, legacy.name)
			e := enginetest.Start(t, c.plane, enginetest.Options{StallAfter: 2 * time.Second})
			m := ref(fmt.Sprintf("plan-%d", i))
			e.Request(m)
			st := e.WaitManager(m, 30*time.Second, "a terminal state", terminal)

			if !tc.accepted {
				require.Equal(t, events.ManagerError, st.State, st.Message)
				assert.Contains(t, st.Message, "VolumesHealthy")
				for _, p := range st.Prechecks {
					if p.Check == "VolumesHealthy" {
						assert.False(t, p.Passed)
						assert.Contains(t, p.Message, "vol-1 has a single replica")
					} else {
						assert.True(t, p.Passed, "%s: %s", p.Check, p.Message)
					}
				}
				assert.Empty(t, st.Nodes, "no node was touched")
				actions, _ := s.ActionLog()
				assert.Empty(t, actions, "the cluster was not touched")
				v1Untouched()
				return
			}
			require.Equal(t, events.ManagerCompleted, st.State, st.Message)
			for key, n := range enginetest.Transitions(e.History(m)) {
				assert.Equal(t, 1, n, "transition %q appears once", key)
			}
			io := s.IOStats()
			assert.NotZero(t, io.Issued, "the I/O checker ran")
			assert.Zero(t, io.Failed, "no I/O failed: %s", io)
			assert.Empty(t, s.Unsafe(""), "nothing unsafe at the end")
			c.waitInStep("after the upgrade")
			checkUpgraded(t, c, st.InstanceManagerImage)
			v1Untouched()
		})
	}
}

// checkUpgraded checks the end state in Longhorn's objects, through the
// adapter: every v2 IM runs the target image, no node is flagged, no
// override is left, detached v2 volumes are on the target image, every
// attached v2 volume got its snapshot.
func checkUpgraded(t *testing.T, c *cluster, image string) {
	t.Helper()
	require.Equal(t, sim.NewIMImage, image)
	ims, err := c.plane.InstanceManagers(c.ctx, "")
	require.NoError(t, err)
	for _, im := range ims {
		assert.Equal(t, image, im.Image, "IM %s", im.Name)
		assert.Equal(t, dataplane.IMRunning, im.State, "IM %s", im.Name)
	}
	nodes, err := c.plane.Nodes(c.ctx)
	require.NoError(t, err)
	for _, n := range nodes {
		assert.False(t, n.UpgradeRequested, "node %s flag cleared", n.Name)
	}
	vols, err := c.plane.Volumes(c.ctx)
	require.NoError(t, err)
	snapshotted := map[string]bool{}
	for _, u := range c.list(longhorn.SnapshotsResource) {
		var snap longhorn.Snapshot
		require.NoError(t, longhorn.FromUnstructured(&u, &snap))
		snapshotted[snap.Spec.Volume] = snap.Status.ReadyToUse
	}
	for _, v := range vols {
		if v.DataEngine != dataplane.DataEngineV2 {
			continue
		}
		assert.Empty(t, v.DesiredTargetNode, "volume %s override cleared", v.Name)
		assert.Equal(t, dataplane.RobustnessHealthy, v.Robustness, "volume %s", v.Name)
		if v.Attached() {
			assert.Equal(t, v.AttachedNode, v.TargetNode, "volume %s target home", v.Name)
			assert.True(t, snapshotted[v.Name], "volume %s snapshotted", v.Name)
		} else {
			assert.Equal(t, image, v.Image, "detached volume %s on the target image", v.Name)
		}
	}
}

// TestImageMissingOnANodeIsRefused: the target image must be in a node's
// status.images (the kubelet's list) for DefaultImageOnAllNodesReady.
func TestImageMissingOnANodeIsRefused(t *testing.T) {
	s := build(t, vol{"vol-1", "", "node-1", all3})
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

// slowLayout is the engine tests' 3-node layout, plus the v1 volume.
func slowLayout(t *testing.T) *sim.Sim {
	t.Helper()
	s, err := sim.ThreeNodes(latencies)
	require.NoError(t, err)
	require.NoError(t, s.AddVolume("legacy-v1", sim.EngineV1, []string{"n1", "n2"}, "n1"))
	return s
}

func lastOf[T events.Event](h []events.Envelope) (T, bool) {
	var zero T
	for i := len(h) - 1; i >= 0; i-- {
		if d, ok := h[i].Data.(T); ok {
			return d, true
		}
	}
	return zero, false
}

// TestStuckVolumeStallsThenResumes: a volume whose target never moves keeps
// the node in switching-over (not error) with a message naming it; once
// fixed, the upgrade goes on.
func TestStuckVolumeStallsThenResumes(t *testing.T) {
	s := slowLayout(t)
	require.NoError(t, s.InjectTargetMoveFailure("vol-0")) // attached to n1, target there
	c := newCluster(t, s)
	e := enginetest.Start(t, c.plane, enginetest.Options{})
	m := ref("stuck")
	e.Request(m, "n1", "n2", "n3")
	stalled := e.WaitNode(m, "n1", 20*time.Second, "stalled", func(n nodeupgrade.State) bool {
		return n.Stalled && n.StallVolume == "vol-0"
	})
	assert.Equal(t, events.NodeSwitchingOver, stalled.State, "a stuck volume keeps the node in its current state")
	assert.Equal(t, "TargetNotMoved", stalled.StallReason)
	assert.Contains(t, stalled.StallMessage, "vol-0")
	assert.Equal(t, events.ManagerUpgrading, e.Manager(m).State, "not error")
	// What the user sees in Longhorn: the override is set, the target stays.
	v := decode[longhorn.Volume](c, longhorn.VolumesResource, "vol-0")
	assert.NotEmpty(t, v.Spec.TargetNodeID)
	assert.Equal(t, "n1", v.Status.CurrentTargetNodeID)

	require.NoError(t, s.HealTargetMoveFailure("vol-0"))
	c.mgr.Kick()
	final := e.WaitManager(m, 30*time.Second, "a terminal state", terminal)
	require.Equal(t, events.ManagerCompleted, final.State, final.Message)
	_, resumed := lastOf[events.NodeResumed](e.History(m))
	assert.True(t, resumed, "history shows the resume")
	assert.Zero(t, s.IOStats().Failed, "%s", s.IOStats())
	assert.Empty(t, s.Unsafe(""))
}

// TestInstanceManagerThatNeverStartsStallsThenFails: the new IM on n1 goes
// to error; the node stalls, then fails after failAfter; targets stayed on
// running IMs.
func TestInstanceManagerThatNeverStartsStallsThenFails(t *testing.T) {
	s := slowLayout(t)
	require.NoError(t, s.InjectIMStartFailure("n1"))
	c := newCluster(t, s)
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
}

// TestCancelReachesASafePoint deletes the manager while the first node is
// at each step in turn: every target comes home, overrides and flags are
// cleared, no I/O fails.
func TestCancelReachesASafePoint(t *testing.T) {
	for _, step := range events.NodeSteps {
		t.Run(string(step), func(t *testing.T) {
			s := slowLayout(t)
			c := newCluster(t, s)
			e := enginetest.Start(t, c.plane, enginetest.Options{})
			m := ref("cancel-" + string(step))
			e.Request(m)
			first := e.WaitManager(m, 10*time.Second, "a node in flight", func(s manager.State) bool { return s.UpgradingNode != "" }).UpgradingNode
			e.WaitNode(m, first, 10*time.Second, "step "+string(step), enginetest.AtOrPast(step))
			e.Cancel(m)
			st := e.WaitManager(m, 20*time.Second, "a terminal state", terminal)
			require.Equal(t, events.ManagerCancelled, st.State, st.Message)
			// The worker decides on the adapter's cache, which lags Longhorn:
			// a cancel may clear an override while the move it had asked
			// for is completing. Clearing the override is what sends a
			// target home, so Longhorn gets there on its own, within a move.
			eventually(t, 5*time.Second, "the safe point", func() bool { return len(s.Unsafe("")) == 0 })
			c.waitInStep("after the cancel")
			nodes, err := c.plane.Nodes(c.ctx)
			require.NoError(t, err)
			for _, n := range nodes {
				assert.False(t, n.UpgradeRequested, "node %s flag cleared", n.Name)
			}
			vols, err := c.plane.Volumes(c.ctx)
			require.NoError(t, err)
			for _, v := range vols {
				if v.Attached() {
					assert.Equal(t, v.AttachedNode, v.TargetNode, "volume %s target home", v.Name)
					assert.Empty(t, v.DesiredTargetNode, "volume %s override cleared", v.Name)
				}
			}
			_, cancelled := lastOf[events.UpgradeCancelled](e.History(m))
			assert.True(t, cancelled)
			assert.Zero(t, s.IOStats().Failed, "%s", s.IOStats())
		})
	}
}

// TestWorkerKilledAtEveryStep: a worker killed mid-step gets its command
// back and resumes through the adapter with no repeated side effect: each
// transition once, each snapshot and IM deletion once.
func TestWorkerKilledAtEveryStep(t *testing.T) {
	for _, step := range events.NodeSteps {
		t.Run(string(step), func(t *testing.T) {
			s := slowLayout(t)
			c := newCluster(t, s)
			e := enginetest.Start(t, c.plane, enginetest.Options{AckWait: 300 * time.Millisecond})
			m := ref("kill-" + string(step))
			e.Request(m)
			victim := e.WaitManager(m, 10*time.Second, "a node in flight", func(s manager.State) bool { return s.UpgradingNode != "" }).UpgradingNode
			e.WaitNode(m, victim, 10*time.Second, "step "+string(step), enginetest.AtOrPast(step))
			e.StopWorker(victim)
			e.StartWorker(victim)

			final := e.WaitManager(m, 30*time.Second, "a terminal state", terminal)
			require.Equal(t, events.ManagerCompleted, final.State, final.Message)
			for key, n := range enginetest.Transitions(e.History(m)) {
				assert.Equal(t, 1, n, "transition %q appears once", key)
			}
			// Side effects that must happen once per upgrade reached the
			// simulator once: a retried step found its own snapshot object
			// and its IM already gone.
			done := map[string]int{}
			actions, _ := s.ActionLog()
			for _, a := range actions {
				if !a.NoOp && a.Err == "" && (a.Action == "CreateSnapshot" || a.Action == "DeleteInstanceManager") {
					done[a.Action+" "+a.Object+" "+a.Arg]++
				}
			}
			assert.NotEmpty(t, done)
			for key, n := range done {
				assert.Equal(t, 1, n, "%s done once", key)
			}
			assert.Zero(t, s.IOStats().Failed, "%s", s.IOStats())
			assert.Empty(t, s.Unsafe(""))
		})
	}
}
