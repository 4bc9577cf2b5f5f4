package longhorn_test

import (
	"flag"
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
	"github.com/switchback-dev/switchback/longhorn"
	"github.com/switchback-dev/switchback/sim"
	"github.com/switchback-dev/switchback/test/harness/enginetest"
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

// completed waits until the upgrade m ends and requires that it completed.
func completed(t *testing.T, e *enginetest.Engine, m events.ManagerRef) manager.State {
	t.Helper()
	st := e.WaitManager(m, 30*time.Second, "a terminal state", terminal)
	require.Equal(t, events.ManagerCompleted, st.State, st.Message)
	return st
}

// transitionsOnce asserts that every transition of the upgrade m appears
// exactly once in its history: nothing was done twice.
func transitionsOnce(t *testing.T, e *enginetest.Engine, m events.ManagerRef) {
	t.Helper()
	for key, n := range enginetest.Transitions(e.History(m)) {
		assert.Equal(t, 1, n, "transition %q appears once", key)
	}
}

// leftClean checks what an upgrade must leave once it completed: no I/O
// failed, no volume left unsafe, nothing in a step any more, and Longhorn's
// objects as they were before.
func (b before) leftClean(t *testing.T, s *sim.Sim, c *cluster) {
	t.Helper()
	assert.Zero(t, s.IOStats().Failed, "%s", s.IOStats())
	assert.Empty(t, s.Unsafe(""))
	c.waitInStep("after the upgrade")
	b.restored(t, c)
}

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
			st := completed(t, e, m)
			transitionsOnce(t, e, m)
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
	// Deleted before the upgrade is recorded completed; Longhorn's
	// finalizer lets each object go once the snapshot is gone.
	eventually(t, 20*time.Second, "the upgrade's snapshots removed once its last node completed", func() bool {
		return len(c.list(longhorn.SnapshotsResource)) == 0
	})
}
