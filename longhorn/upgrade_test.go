package longhorn_test

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
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
// simulator's I/O checker judges every step by the physics of the
// profile: on v1.12, an initiator dies with its node's instance manager.

var update = flag.Bool("update", false, "rewrite the golden files of testdata/")

func ref(name string) events.ManagerRef {
	return events.ManagerRef{Namespace: "longhorn-system", Name: name, UID: "uid-" + name}
}

func terminal(s manager.State) bool { return s.Terminal() }

// latencies make every Longhorn reaction take a little time, so steps
// really wait on the objects.
var latencies = sim.Config{TargetMoveLatency: 20 * time.Millisecond, IMStartLatency: 30 * time.Millisecond, RebuildLatency: 20 * time.Millisecond}

// vol is one volume of a layout: where it is attached (its initiator), where
// its engine is placed (spec.engineNodeID, "" = the attached node), and the
// nodes holding its replicas.
type vol struct {
	name     string
	engine   string // data engine, "" = v2
	attached string
	engineOn string
	replicas []string
}

var all3 = []string{"node-1", "node-2", "node-3"}

// build makes a cluster of node-1..node-3 with vols.
func build(t *testing.T, cfg sim.Config, vols ...vol) *sim.Sim {
	t.Helper()
	s := sim.New(cfg)
	for _, n := range all3 {
		require.NoError(t, s.AddNode(n))
	}
	for _, v := range vols {
		engine := v.engine
		if engine == "" {
			engine = sim.EngineV2
		}
		require.NoError(t, s.AddVolumeSpec(sim.VolumeSpec{Name: v.name, Engine: engine, ReplicasOn: v.replicas, AttachedTo: v.attached, EngineOn: v.engineOn}))
	}
	return s
}

// legacy is a v1 volume attached to node-1 with replicas on node-1 and
// node-2: the upgrade of those nodes must leave it and its replicas alone.
var legacy = vol{name: "legacy-v1", engine: sim.EngineV1, attached: "node-1", replicas: []string{"node-1", "node-2"}}

// untouched records the resourceVersions of the v1 volume, its engine and
// its replicas, and returns a check that none changed.
func untouched(t *testing.T, c *cluster, volume string) func() {
	t.Helper()
	engine := volume + "-e-node-1"
	rv := map[string]string{
		"volume/" + volume: c.object(longhorn.VolumesResource, volume).GetResourceVersion(),
		"engine/" + engine: c.object(longhorn.EnginesResource, engine).GetResourceVersion(),
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
				now = c.object(longhorn.EnginesResource, name).GetResourceVersion()
			default:
				now = c.object(longhorn.ReplicasResource, name).GetResourceVersion()
			}
			assert.Equal(t, before, now, "v1 %s %s untouched (resourceVersion)", kind, name)
		}
	}
}

// before records what the upgrade must give back: every v2 volume's
// spec.engineNodeID and every node's spec.allowScheduling, as Longhorn's
// objects hold them.
type before struct {
	engineNode map[string]string
	scheduling map[string]bool
}

func recordBefore(t *testing.T, c *cluster) before {
	t.Helper()
	b := before{engineNode: map[string]string{}, scheduling: map[string]bool{}}
	for _, u := range c.list(longhorn.VolumesResource) {
		var v longhorn.Volume
		require.NoError(t, longhorn.FromUnstructured(&u, &v))
		if v.Spec.DataEngine == dataplane.DataEngineV2 {
			b.engineNode[v.Name] = v.Spec.EngineNodeID
		}
	}
	for _, u := range c.list(longhorn.NodesResource) {
		var n longhorn.LonghornNode
		require.NoError(t, longhorn.FromUnstructured(&u, &n))
		b.scheduling[n.Name] = n.Spec.AllowScheduling
	}
	return b
}

// restored checks, in Longhorn's objects, that every engine node and every
// node's replica scheduling is what it was before.
func (b before) restored(t *testing.T, c *cluster) {
	t.Helper()
	now := recordBefore(t, c)
	assert.Equal(t, b.engineNode, now.engineNode, "every spec.engineNodeID as it was before")
	assert.Equal(t, b.scheduling, now.scheduling, "every spec.allowScheduling as it was before")
}

// held is a node that cannot be upgraded live until its user detaches
// volumes.
type held struct {
	node    string
	volumes []string
}

// TestProposalTestPlan runs the proposal's test-plan layouts (three nodes,
// every node upgraded) through the adapter on the v1.12 profile, plus a
// layout of storage nodes. A node holding initiators of attached v2 volumes
// cannot be upgraded live on v1.12: the nodes that can go first and
// complete with no failed I/O, the upgrade stalls at the first one that
// cannot, naming its volumes and touching nothing, and goes on by itself
// once its user detached them.
func TestProposalTestPlan(t *testing.T) {
	healthy := []vol{{name: "vol-2", attached: "node-1", replicas: all3}, {name: "vol-3", attached: "node-1", replicas: all3}}
	cases := []struct {
		name string
		vols []vol
		// refused names the volume the prechecks refuse; otherwise live are
		// the nodes upgraded live, in order, then held the nodes that wait
		// for their user, in order, each with the volumes it names (which
		// the user then detaches).
		refused string
		live    []string
		held    []held
	}{
		{name: "refused case 1: vol-1 single replica on node 1, attached and engine on node 1",
			vols: append([]vol{{name: "vol-1", attached: "node-1", replicas: []string{"node-1"}}}, healthy...), refused: "vol-1"},
		{name: "refused case 2: vol-1 single replica on node 2, attached and engine on node 1",
			vols: append([]vol{{name: "vol-1", attached: "node-1", replicas: []string{"node-2"}}}, healthy...), refused: "vol-1"},
		{name: "accepted case 1: three volumes with 3 replicas, attached and engines on node 1",
			vols: []vol{{name: "vol-1", attached: "node-1", replicas: all3}, {name: "vol-2", attached: "node-1", replicas: all3}, {name: "vol-3", attached: "node-1", replicas: all3}},
			live: []string{"node-2", "node-3"}, held: []held{{"node-1", []string{"vol-1", "vol-2", "vol-3"}}}},
		{name: "accepted case 2: attached and engines on node 1, replicas only on nodes 2 and 3",
			vols: []vol{{name: "vol-1", attached: "node-1", replicas: all3[1:]}, {name: "vol-2", attached: "node-1", replicas: all3[1:]}, {name: "vol-3", attached: "node-1", replicas: all3[1:]}},
			live: []string{"node-2", "node-3"}, held: []held{{"node-1", []string{"vol-1", "vol-2", "vol-3"}}}},
		{name: "accepted case 3: attached and engines spread over nodes 1, 2 and 3 (and a detached volume)",
			vols: []vol{{name: "vol-1", attached: "node-1", replicas: all3}, {name: "vol-2", attached: "node-2", replicas: all3}, {name: "vol-3", attached: "node-3", replicas: all3},
				{name: "vol-detached", replicas: all3[:2]}},
			held: []held{{"node-1", []string{"vol-1"}}, {"node-2", []string{"vol-2"}}, {"node-3", []string{"vol-3"}}}},
		{name: "storage nodes: attached on node 1, engines on nodes 2 and 3",
			vols: []vol{{name: "vol-1", attached: "node-1", engineOn: "node-2", replicas: all3}, {name: "vol-2", attached: "node-1", engineOn: "node-3", replicas: all3},
				{name: "vol-3", attached: "node-1", engineOn: "node-2", replicas: all3[1:]}},
			live: []string{"node-3", "node-2"}, held: []held{{"node-1", []string{"vol-1", "vol-2", "vol-3"}}}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := build(t, latencies, append(slices.Clone(tc.vols), legacy)...)
			c := newCluster(t, s)
			v1Untouched := untouched(t, c, legacy.name)
			was := recordBefore(t, c)
			e := enginetest.Start(t, c.plane, enginetest.Options{StallAfter: 300 * time.Millisecond})
			m := ref(fmt.Sprintf("plan-%d", i))
			e.Request(m)

			if tc.refused != "" {
				st := e.WaitManager(m, 30*time.Second, "a terminal state", terminal)
				require.Equal(t, events.ManagerError, st.State, st.Message)
				assert.Contains(t, st.Message, "VolumesHealthy")
				for _, p := range st.Prechecks {
					if p.Check == "VolumesHealthy" {
						assert.False(t, p.Passed)
						assert.Contains(t, p.Message, tc.refused+" has a single replica")
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
			planned := e.WaitManager(m, 30*time.Second, "planned", func(s manager.State) bool { return len(s.Plan) > 0 })
			order := slices.Clone(tc.live)
			for _, h := range tc.held {
				order = append(order, h.node)
			}
			assert.Equal(t, order, planned.Plan, "the nodes that can be upgraded live come first")
			assert.Equal(t, string(dataplane.ProfileV112), planned.LonghornProfile, "the history says what the upgrade ran against")
			for _, n := range tc.live {
				st := e.WaitNode(m, n, 30*time.Second, "completed", func(n nodeupgrade.State) bool { return n.State == events.NodeCompleted })
				assert.Equal(t, string(dataplane.ProfileV112), st.LonghornProfile)
			}
			assert.Zero(t, s.IOStats().Failed, "no I/O failed while the live nodes were upgraded: %s", s.IOStats())
			for _, h := range tc.held {
				stalled := e.WaitNode(m, h.node, 30*time.Second, "stalled on its initiators", func(n nodeupgrade.State) bool {
					return n.Stalled && n.StallReason == "InitiatorsOnNode"
				})
				assert.Equal(t, events.NodeInitializing, stalled.State, "it stalls before touching anything")
				assert.Contains(t, stalled.StallMessage, "holds the initiators of attached v2 volumes "+strings.Join(h.volumes, ", ")+":")
				assert.Contains(t, stalled.StallMessage, "detach them or move their workloads")
				assert.Nil(t, stalled.Scheduling, "its replica scheduling was not touched")
				// The user stops the workloads on the node: the upgrade goes on.
				for _, name := range h.volumes {
					require.NoError(t, s.DetachVolume(name))
				}
				c.mgr.Kick()
			}
			st := e.WaitManager(m, 30*time.Second, "a terminal state", terminal)
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
			was.restored(t, c)
			v1Untouched()
		})
	}
}

// checkUpgraded checks the end state in Longhorn's objects, through the
// adapter: every v2 IM runs the target image, every attached v2 volume is
// healthy on a settled target, and the upgrade's snapshots are removed.
func checkUpgraded(t *testing.T, c *cluster, image string) {
	t.Helper()
	require.Equal(t, sim.NewIMImage, image)
	ims, err := c.plane.InstanceManagers(c.ctx, "")
	require.NoError(t, err)
	for _, im := range ims {
		assert.Equal(t, image, im.Image, "IM %s", im.Name)
		assert.Equal(t, dataplane.IMRunning, im.State, "IM %s", im.Name)
	}
	vols, err := c.plane.Volumes(c.ctx)
	require.NoError(t, err)
	for _, v := range vols {
		if v.DataEngine != dataplane.DataEngineV2 || !v.Attached() {
			continue
		}
		assert.Equal(t, dataplane.RobustnessHealthy, v.Robustness, "volume %s", v.Name)
		assert.True(t, v.TargetReady, "volume %s: switch-over settled", v.Name)
	}
	assert.Empty(t, c.list(longhorn.SnapshotsResource), "the upgrade removes its own snapshots once its nodes completed")
}

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

func lastOf[T events.Event](h []events.Envelope) (T, bool) {
	var zero T
	for i := len(h) - 1; i >= 0; i-- {
		if d, ok := h[i].Data.(T); ok {
			return d, true
		}
	}
	return zero, false
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
	e.Request(m, storage...)
	stalled := e.WaitNode(m, "n1", 20*time.Second, "stalled", func(n nodeupgrade.State) bool {
		return n.Stalled && n.StallVolume == "vol-0" && n.StallReason == "SwitchoverFailing"
	})
	assert.Equal(t, events.NodeSwitchingOver, stalled.State, "a stuck volume keeps the node in its current state")
	assert.Contains(t, stalled.StallMessage, `switchoverState "reverting"`)
	assert.Contains(t, stalled.StallMessage, "Failed to switch over target to ")
	assert.Contains(t, stalled.StallMessage, "injected fault: switch-over refused")
	assert.Equal(t, events.ManagerUpgrading, e.Manager(m).State, "not error")
	// What the user sees in Longhorn: the engine node asked for, the target
	// still on n1, the Warning on the EngineFrontend.
	v := decode[longhorn.Volume](c, longhorn.VolumesResource, "vol-0")
	assert.NotEqual(t, "n1", v.Spec.EngineNodeID)
	assert.Equal(t, "n1", v.Status.CurrentEngineNodeID)
	assert.Equal(t, "reverting", v.Status.SwitchoverState)
	warned := false
	for _, u := range c.list(longhorn.EventsResource) {
		var ev longhorn.Event
		require.NoError(t, longhorn.FromUnstructured(&u, &ev))
		warned = warned || (ev.Reason == longhorn.ReasonFailedSwitchover && ev.InvolvedObject.Name == "vol-0-ef-0" && ev.Type == "Warning")
	}
	assert.True(t, warned, "a FailedSwitchover Warning on vol-0's EngineFrontend")

	require.NoError(t, s.HealTargetMoveFailure("vol-0"))
	c.mgr.Kick()
	final := e.WaitManager(m, 30*time.Second, "a terminal state", terminal)
	require.Equal(t, events.ManagerCompleted, final.State, final.Message)
	_, resumed := lastOf[events.NodeResumed](e.History(m))
	assert.True(t, resumed, "history shows the resume")
	assert.Zero(t, s.IOStats().Failed, "%s", s.IOStats())
	assert.Empty(t, s.Unsafe(""))
	c.waitInStep("after the upgrade")
	was.restored(t, c)
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
			s, storage := storageLayout(t, latencies)
			c := newCluster(t, s)
			was := recordBefore(t, c)
			e := enginetest.Start(t, c.plane, enginetest.Options{})
			m := ref("cancel-" + string(step))
			e.Request(m, storage...)
			first := e.WaitManager(m, 10*time.Second, "a node in flight", func(s manager.State) bool { return s.UpgradingNode != "" }).UpgradingNode
			e.WaitNode(m, first, 10*time.Second, "step "+string(step), enginetest.AtOrPast(step))
			e.Cancel(m)
			st := e.WaitManager(m, 20*time.Second, "a terminal state", terminal)
			require.Equal(t, events.ManagerCancelled, st.State, st.Message)
			eventually(t, 5*time.Second, "the safe point", func() bool { return len(s.Unsafe("")) == 0 })
			c.waitInStep("after the cancel")
			was.restored(t, c)
			_, cancelled := lastOf[events.UpgradeCancelled](e.History(m))
			assert.True(t, cancelled)
			assert.Zero(t, s.IOStats().Failed, "%s", s.IOStats())
		})
	}
}

// TestWorkerKilledAtEveryStep: a worker killed mid-step gets its command
// back and resumes through the adapter with no repeated side effect: each
// transition once, each snapshot, engine move and IM deletion once.
func TestWorkerKilledAtEveryStep(t *testing.T) {
	for _, step := range events.NodeSteps {
		t.Run(string(step), func(t *testing.T) {
			s, storage := storageLayout(t, latencies)
			c := newCluster(t, s)
			was := recordBefore(t, c)
			e := enginetest.Start(t, c.plane, enginetest.Options{AckWait: 300 * time.Millisecond})
			m := ref("kill-" + string(step))
			e.Request(m, storage...)
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
			// simulator once: a retried step found its own snapshot object.
			done := map[string]int{}
			actions, _ := s.ActionLog()
			for _, a := range actions {
				if !a.NoOp && a.Err == "" && (a.Action == "CreateSnapshot" || a.Action == "DeleteSnapshot") {
					done[a.Action+" "+a.Object+" "+a.Arg]++
				}
			}
			assert.NotEmpty(t, done)
			for key, n := range done {
				assert.Equal(t, 1, n, "%s done once", key)
			}
			assert.Zero(t, s.IOStats().Failed, "%s", s.IOStats())
			assert.Empty(t, s.Unsafe(""))
			c.waitInStep("after the upgrade")
			was.restored(t, c)
		})
	}
}

// TestInPlaceWriteSequence: on a Longhorn that updates IMs in place
// (experimental, its physics not established), what is proven is the exact
// sequence of writes the adapter makes to Longhorn's objects: scheduling
// off, snapshots, replicas failed, engines moved, the IM's image set,
// scheduling restored, engines moved back, snapshots removed. Run with
// -update to rewrite testdata/inplace-writes.golden.
func TestInPlaceWriteSequence(t *testing.T) {
	cfg := latencies
	cfg.Profile = dataplane.ProfileInPlace
	s := sim.New(cfg)
	for _, n := range []string{"n1", "n2"} {
		require.NoError(t, s.AddNode(n))
	}
	require.NoError(t, s.AddVolume("vol-a", sim.EngineV2, []string{"n1", "n2"}, "n1"))
	require.NoError(t, s.AddVolumeSpec(sim.VolumeSpec{Name: "vol-b", ReplicasOn: []string{"n1", "n2"}, AttachedTo: "n2", EngineOn: "n1"}))
	writes := &writeLog{}
	c := newClusterWith(t, s, clusterOptions{
		platform: &dataplane.Platform{Profile: dataplane.ProfileInPlace, Evidence: "told by the test"},
		log:      slog.New(writes),
	})
	was := recordBefore(t, c)
	e := enginetest.Start(t, c.plane, enginetest.Options{})
	m := ref("in-place")
	e.Request(m, "n1")
	st := e.WaitManager(m, 30*time.Second, "a terminal state", terminal)
	require.Equal(t, events.ManagerCompleted, st.State, st.Message)
	was.restored(t, c)
	assert.Zero(t, s.IOStats().Failed, "the in-place physics the simulator assumes: %s", s.IOStats())

	got := writes.String()
	path := filepath.Join("testdata", "inplace-writes.golden")
	if *update {
		require.NoError(t, os.MkdirAll("testdata", 0o755))
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run with -update to create it")
	assert.Equal(t, string(want), got, "the writes the upgrade made, in order")
}

// writeLog is a slog handler keeping the adapter's write lines (resource,
// object, action) in order.
type writeLog struct {
	mu    sync.Mutex
	lines []string
}

func (w *writeLog) Enabled(context.Context, slog.Level) bool { return true }
func (w *writeLog) WithAttrs([]slog.Attr) slog.Handler       { return w }
func (w *writeLog) WithGroup(string) slog.Handler            { return w }
func (w *writeLog) Handle(_ context.Context, r slog.Record) error {
	var verb string
	switch r.Message {
	case "longhorn object patched":
		verb = "patch"
	case "longhorn object deleted":
		verb = "delete"
	case "longhorn snapshot created":
		verb = "create"
	default:
		return nil
	}
	attrs := map[string]string{}
	r.Attrs(func(a slog.Attr) bool {
		attrs[a.Key] = a.Value.String()
		return true
	})
	line := fmt.Sprintf("%s %s %s: %s", verb, attrs["resource"], attrs["name"], attrs["action"])
	if verb == "create" {
		line = fmt.Sprintf("create snapshots.longhorn.io %s: snapshot %s of %s", attrs["object"], attrs["snapshot"], attrs["volume"])
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.lines = append(w.lines, line)
	return nil
}

func (w *writeLog) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(w.lines, "\n") + "\n"
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
	e.Request(m, storage...)
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
	final := e.WaitManager(m, 30*time.Second, "a terminal state", terminal)
	require.Equal(t, events.ManagerCompleted, final.State, final.Message)
	_, released := lastOf[events.UpgradeReleased](e.History(m))
	assert.True(t, released)
	assert.Zero(t, s.IOStats().Failed, "%s", s.IOStats())
	c.waitInStep("after the upgrade")
	was.restored(t, c)
}

// schedulingProbe records, at each replica-scheduling write the upgrade
// makes, whether the node already runs an instance manager of the target
// image (read through the same adapter at that moment).
type schedulingProbe struct {
	dataplane.DataPlane
	image string
	mu    sync.Mutex
	calls []schedulingCall
}

type schedulingCall struct {
	node         string
	allow        bool
	newIMRunning bool
}

func (p *schedulingProbe) SetReplicaScheduling(ctx context.Context, node string, allow bool) error {
	ims, err := p.DataPlane.InstanceManagers(ctx, node)
	if err != nil {
		return err
	}
	running := slices.ContainsFunc(ims, func(im dataplane.InstanceManager) bool {
		return im.Image == p.image && im.State == dataplane.IMRunning
	})
	p.mu.Lock()
	p.calls = append(p.calls, schedulingCall{node: node, allow: allow, newIMRunning: running})
	p.mu.Unlock()
	return p.DataPlane.SetReplicaScheduling(ctx, node, allow)
}

// TestSchedulingOffExactlyUntilTheNewIMRuns: on the storage layout (n3 not
// scheduling replicas before the upgrade), each storage node's replica
// scheduling is turned off before its new instance manager runs and turned
// back on only once it runs; a node that did not schedule is never written;
// afterwards each node has exactly its own value, and the rebuilds that
// needed the restored scheduling completed.
func TestSchedulingOffExactlyUntilTheNewIMRuns(t *testing.T) {
	s, storage := storageLayout(t, latencies)
	c := newCluster(t, s)
	was := recordBefore(t, c)
	probe := &schedulingProbe{DataPlane: c.plane, image: sim.NewIMImage}
	e := enginetest.Start(t, probe, enginetest.Options{})
	m := ref("scheduling")
	e.Request(m, storage...)
	final := e.WaitManager(m, 30*time.Second, "a terminal state", terminal)
	require.Equal(t, events.ManagerCompleted, final.State, final.Message)

	byNode := map[string][]schedulingCall{}
	for _, call := range probe.calls {
		byNode[call.node] = append(byNode[call.node], call)
	}
	for _, n := range []string{"n1", "n2"} {
		calls := byNode[n]
		require.NotEmpty(t, calls, n)
		assert.Equal(t, schedulingCall{node: n, allow: false, newIMRunning: false}, calls[0], "%s: off before its new IM runs", n)
		last := calls[len(calls)-1]
		assert.Equal(t, schedulingCall{node: n, allow: true, newIMRunning: true}, last, "%s: back on only once its new IM runs", n)
		for _, call := range calls[1 : len(calls)-1] {
			assert.False(t, call.allow, "%s: never on in between: %+v", n, calls)
		}
	}
	assert.Empty(t, byNode["n3"], "a node that did not schedule replicas is never written")
	c.waitInStep("after the upgrade")
	was.restored(t, c)
	assert.Zero(t, s.IOStats().Failed, "%s", s.IOStats())
}
