package orchestrator_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/aggregate/manager"
	"github.com/switchback-dev/switchback/aggregate/nodeupgrade"
	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/sim"
	"github.com/switchback-dev/switchback/test/harness/enginetest"
)

func ref(name string) events.ManagerRef {
	return events.ManagerRef{Namespace: "longhorn-system", Name: name, UID: "uid-" + name}
}

func terminal(s manager.State) bool { return s.Terminal() }

func TestUpgradeFiveNodesThirtyVolumes(t *testing.T) {
	cluster := layout(t, 5, 30)
	e := enginetest.Start(t, cluster, enginetest.Options{})
	m := ref("up-5x30")
	e.Request(m)
	st := e.WaitManager(m, 60*time.Second, "a terminal state", terminal)
	require.Equal(t, events.ManagerCompleted, st.State, st.Message)

	io := cluster.IOStats()
	assert.NotZero(t, io.Issued, "the I/O checker ran")
	assert.Zero(t, io.Failed, "no I/O failed: %+v", io.Failures)

	ims, err := cluster.InstanceManagers(e.Context(), "")
	require.NoError(t, err)
	for _, im := range ims {
		assert.Equal(t, st.InstanceManagerImage, im.Image, "IM %s", im.Name)
	}
	for key, n := range enginetest.Transitions(e.History(m)) {
		assert.Equal(t, 1, n, "transition %q appears once", key)
	}
	assert.Empty(t, cluster.Unsafe(""), "nothing unsafe at the end")
}

// inPlace is the profile of the engine's generic tests: every node holds
// initiators there, and on this profile an initiator survives its node's
// instance-manager update, so every step of every node has work to do. The
// v1.12 profile's own flows are tested in longhorn/ and nodeworker/.
const inPlace = dataplane.ProfileInPlace

// layout builds nodes n1..n<nodes> and v2 volumes with 2 or 3 replicas on
// consecutive nodes; every sixth volume is detached, the others are attached
// round-robin (target on the attached node), plus one v1 volume that must
// never be touched.
func layout(t *testing.T, nodes, volumes int) *sim.Sim {
	t.Helper()
	s := sim.New(sim.Config{Profile: inPlace})
	for i := 1; i <= nodes; i++ {
		require.NoError(t, s.AddNode(fmt.Sprintf("n%d", i)))
	}
	for v := range volumes {
		replicas := 2 + v%2
		var on []string
		for r := range replicas {
			on = append(on, fmt.Sprintf("n%d", (v+r)%nodes+1))
		}
		attached := fmt.Sprintf("n%d", (v*7)%nodes+1)
		if v%6 == 5 {
			attached = ""
		}
		require.NoError(t, s.AddVolume(fmt.Sprintf("vol-%02d", v), sim.EngineV2, on, attached))
	}
	require.NoError(t, s.AddVolume("vol-v1", sim.EngineV1, []string{"n1", "n2"}, "n1"))
	return s
}

// upgradeWaiting returns a 3-node cluster with latencies, so that each step
// lasts long enough to be interrupted.
func slowLayout(t *testing.T) *sim.Sim {
	t.Helper()
	s, err := sim.ThreeNodes(sim.Config{Profile: inPlace, TargetMoveLatency: 20 * time.Millisecond, IMStartLatency: 30 * time.Millisecond, RebuildLatency: 20 * time.Millisecond})
	require.NoError(t, err)
	return s
}

func TestWorkerKilledAtEveryStep(t *testing.T) {
	for _, step := range events.NodeSteps {
		t.Run(string(step), func(t *testing.T) {
			cluster := slowLayout(t)
			e := enginetest.Start(t, cluster, enginetest.Options{AckWait: 300 * time.Millisecond})
			m := ref("kill-" + string(step))
			e.Request(m)
			st := e.WaitManager(m, 10*time.Second, "a node in flight", func(s manager.State) bool { return s.UpgradingNode != "" })
			victim := st.UpgradingNode
			e.WaitNode(m, victim, 10*time.Second, "step "+string(step), enginetest.AtOrPast(step))
			e.StopWorker(victim)
			e.StartWorker(victim)

			final := e.WaitManager(m, 30*time.Second, "a terminal state", terminal)
			require.Equal(t, events.ManagerCompleted, final.State, final.Message)
			for key, n := range enginetest.Transitions(e.History(m)) {
				assert.Equal(t, 1, n, "transition %q appears once", key)
			}
			assert.Zero(t, cluster.IOStats().Failed, "no I/O failed: %+v", cluster.IOStats().Failures)
			assert.Empty(t, cluster.Unsafe(""))
		})
	}
}

func TestStuckVolumeStallsThenResumes(t *testing.T) {
	cluster := slowLayout(t)
	// vol-0 is attached to n1 with its target there: its switch-over will hang.
	require.NoError(t, cluster.InjectTargetMoveFailure("vol-0"))
	e := enginetest.Start(t, cluster, enginetest.Options{})
	m := ref("stuck")
	e.Request(m, "n1", "n2", "n3")
	stalled := e.WaitNode(m, "n1", 20*time.Second, "stalled", func(n nodeupgrade.State) bool { return n.Stalled })
	assert.Equal(t, events.NodeSwitchingOver, stalled.State, "a stuck volume keeps the node in its current state")
	assert.Equal(t, "vol-0", stalled.StallVolume)
	assert.Contains(t, stalled.StallMessage, "vol-0")
	assert.Equal(t, events.ManagerUpgrading, e.Manager(m).State, "not error")

	require.NoError(t, cluster.HealTargetMoveFailure("vol-0"))
	final := e.WaitManager(m, 30*time.Second, "a terminal state", terminal)
	require.Equal(t, events.ManagerCompleted, final.State, final.Message)
	h := e.History(m)
	_, resumed := enginetest.LastOf[events.NodeResumed](h)
	assert.True(t, resumed, "history shows the resume")
	assert.Zero(t, cluster.IOStats().Failed)
}

func TestPrechecksRefuse(t *testing.T) {
	cases := []struct {
		name      string
		build     func(t *testing.T) *sim.Sim
		nodes     []string
		check     string
		inMessage string
	}{
		{"single replica attached volume", func(t *testing.T) *sim.Sim {
			s := slowLayout(t)
			require.NoError(t, s.AddVolume("lonely", sim.EngineV2, []string{"n1"}, "n1"))
			return s
		}, nil, "VolumesHealthy", "lonely"},
		{"degraded attached volume", func(t *testing.T) *sim.Sim {
			s := slowLayout(t)
			require.NoError(t, s.AddVolumeSpec(sim.VolumeSpec{Name: "degraded", ReplicasOn: []string{"n1", "n2"}, NumberOfReplicas: 3, AttachedTo: "n1"}))
			// Longhorn would rebuild it; keep it degraded for the check.
			require.NoError(t, s.InjectNeverHealthy("degraded"))
			return s
		}, nil, "VolumesHealthy", "degraded"},
		{"unknown nodes", slowLayout, []string{"n1", "ghost-1", "ghost.2"}, "NodesKnown", "ghost-1, ghost.2"},
		{"Longhorn's own upgrader on", func(t *testing.T) *sim.Sim {
			s := slowLayout(t)
			s.SetLonghornUpgrader(dataplane.LonghornUpgrader{Settings: map[string]string{dataplane.SettingV2IMAutoUpgrade: "true"}})
			return s
		}, nil, "NoOtherUpgrader", `setting allow-v2-instance-manager-automatic-upgrade is "true": set it to "false"`},
		{"one node", func(t *testing.T) *sim.Sim {
			s := sim.New(sim.Config{Profile: inPlace})
			require.NoError(t, s.AddNode("solo"))
			return s
		}, nil, "AtLeastTwoNodes", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cluster := tc.build(t)
			e := enginetest.Start(t, cluster, enginetest.Options{})
			m := ref("refused")
			e.Request(m, tc.nodes...)
			st := e.WaitManager(m, 10*time.Second, "a terminal state", terminal)
			require.Equal(t, events.ManagerError, st.State)
			assert.Contains(t, st.Message, tc.check)
			var failed []string
			for _, p := range st.Prechecks {
				if !p.Passed {
					failed = append(failed, p.Check)
					if p.Check == tc.check {
						assert.Contains(t, p.Message, tc.inMessage)
					}
				}
			}
			assert.Contains(t, failed, tc.check)
			assert.Empty(t, st.Nodes, "no node was touched")
			actions, _ := cluster.ActionLog()
			assert.Empty(t, actions, "the cluster was not touched")
		})
	}
}

func TestInstanceManagerThatNeverStartsStallsThenFails(t *testing.T) {
	cluster := slowLayout(t)
	require.NoError(t, cluster.InjectIMStartFailure("n1"))
	e := enginetest.Start(t, cluster, enginetest.Options{StallAfter: 100 * time.Millisecond, FailAfter: time.Second})
	e.IMNeverStarts(ref("im-fails"), "n1", "n2")
	assert.Zero(t, cluster.IOStats().FailedByActions(), "targets stayed on running IMs")
}

func TestNodeDeletedMidUpgradeFails(t *testing.T) {
	cluster := slowLayout(t)
	require.NoError(t, cluster.InjectTargetMoveFailure("vol-0")) // hold n1 in switching-over
	e := enginetest.Start(t, cluster, enginetest.Options{})
	m := ref("node-deleted")
	e.Request(m, "n1", "n2", "n3")
	e.WaitNode(m, "n1", 20*time.Second, "switching-over", func(n nodeupgrade.State) bool { return n.State == events.NodeSwitchingOver })
	require.NoError(t, cluster.InjectNodeDeleted("n1"))
	st := e.WaitManager(m, 20*time.Second, "a terminal state", terminal)
	require.Equal(t, events.ManagerError, st.State)
	n := e.Node(m, "n1")
	assert.Equal(t, "NodeDeleted", n.FailReason)
	assert.Contains(t, n.Message, "removed from the cluster")
}

// scheduledAfterCancel lists nodes scheduled after the cancel was recorded.
func scheduledAfterCancel(h []events.Envelope) []string {
	var out []string
	cancelled := false
	for _, e := range h {
		switch d := e.Data.(type) {
		case events.CancelRequested:
			cancelled = true
		case events.NodeScheduled:
			if cancelled {
				out = append(out, d.Node)
			}
		}
	}
	return out
}

func TestCancelAtEveryStep(t *testing.T) {
	for _, step := range events.NodeSteps {
		t.Run(string(step), func(t *testing.T) {
			cluster := slowLayout(t)
			e := enginetest.Start(t, cluster, enginetest.Options{})
			m := ref("cancel-" + string(step))
			e.Request(m)
			first := e.WaitManager(m, 10*time.Second, "a node in flight", func(s manager.State) bool { return s.UpgradingNode != "" }).UpgradingNode
			e.WaitNode(m, first, 10*time.Second, "step "+string(step), enginetest.AtOrPast(step))
			e.Cancel(m)
			st := e.WaitManager(m, 20*time.Second, "a terminal state", terminal)
			require.Equal(t, events.ManagerCancelled, st.State, st.Message)
			assert.Empty(t, cluster.Unsafe(""), "safe point: every engine node as its user set it, no volume without a healthy replica caused by us")
			nodes, err := cluster.Nodes(e.Context())
			require.NoError(t, err)
			for _, n := range nodes {
				assert.True(t, n.AllowScheduling, "node %s replica scheduling restored", n.Name)
			}
			vols, err := cluster.Volumes(e.Context())
			require.NoError(t, err)
			for _, v := range vols {
				if v.Attached() {
					assert.Equal(t, v.AttachedNode, v.TargetNode, "volume %s target home", v.Name)
					assert.Empty(t, v.EngineNode, "volume %s engine node as it was", v.Name)
				}
			}
			h := e.History(m)
			_, cancelled := enginetest.LastOf[events.UpgradeCancelled](h)
			assert.True(t, cancelled)
			if n := e.Node(m, first); n.CancelRequested {
				assert.Equal(t, st.CancelReason, n.CancelReason, "the node is told the manager's cancel reason")
			}
			assert.Empty(t, scheduledAfterCancel(h), "no new node starts after a cancel")
			assert.Zero(t, cluster.IOStats().Failed)
		})
	}
}

// After an error, the targets that left the node stay on their temporary
// node, on a running IM: nothing is unsafe for I/O, the node's replica
// scheduling is restored, and the failure names each volume left away with
// the spec.engineNodeID to restore once the node is fixed. A new manager
// then upgrades the node.
func TestFailedUpgradeLeavesTargetsSafeAndSaysWhere(t *testing.T) {
	cluster := slowLayout(t)
	require.NoError(t, cluster.InjectIMStartFailure("n1"))
	e := enginetest.Start(t, cluster, enginetest.Options{StallAfter: 50 * time.Millisecond, FailAfter: 300 * time.Millisecond})
	failed := ref("fails-on-n1")
	e.Request(failed, "n1")
	st := e.WaitManager(failed, 20*time.Second, "a terminal state", terminal)
	require.Equal(t, events.ManagerError, st.State)
	assert.Empty(t, dangerous(cluster.Unsafe("")))
	n := e.Node(failed, "n1")
	for _, v := range []string{"vol-0", "vol-1", "vol-2"} {
		assert.Contains(t, n.Message, v+` (spec.engineNodeID was ""`, "the failure says what to restore")
	}
	node, err := cluster.Node(e.Context(), "n1")
	require.NoError(t, err)
	assert.True(t, node.AllowScheduling, "replica scheduling restored before the error")

	// The user fixes the cause, restores the engine nodes as the failure
	// says, and creates a new manager.
	require.NoError(t, cluster.HealIMStartFailure("n1"))
	for _, v := range []string{"vol-0", "vol-1", "vol-2"} {
		require.NoError(t, cluster.PlaceEngine(v, ""))
	}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		vols, err := cluster.Volumes(e.Context())
		require.NoError(c, err)
		for _, v := range vols {
			if v.Attached() {
				assert.Equal(c, dataplane.RobustnessHealthy, v.Robustness, v.Name)
				assert.True(c, v.TargetReady, v.Name)
			}
		}
	}, 10*time.Second, 5*time.Millisecond, "the volumes healthy again, their targets home")
	retry := ref("retry-n1")
	e.Request(retry, "n1")
	st = e.WaitManager(retry, 20*time.Second, "a terminal state", terminal)
	require.Equal(t, events.ManagerCompleted, st.State, st.Message)
	assert.Empty(t, cluster.Unsafe(""), "every target is home again")
	assert.Zero(t, cluster.IOStats().FailedByActions())
}

// Upgrading nodes already on the target image (a second manager over them)
// touches nothing: no replica is failed, no target moves.
func TestNodesAlreadyOnTheTargetImageAreANoOp(t *testing.T) {
	cluster := slowLayout(t)
	e := enginetest.Start(t, cluster, enginetest.Options{})
	first := ref("first")
	e.Request(first, "n1", "n2")
	require.Equal(t, events.ManagerCompleted, e.WaitManager(first, 30*time.Second, "terminal", terminal).State)
	before, _ := cluster.ActionLog()
	again := ref("again")
	e.Request(again, "n1", "n2")
	st := e.WaitManager(again, 30*time.Second, "terminal", terminal)
	require.Equal(t, events.ManagerCompleted, st.State, st.Message)
	after, _ := cluster.ActionLog()
	for _, a := range after[len(before):] {
		assert.NotContains(t, []string{"FailReplica", "SetEngineNode", "DeleteInstanceManager", "SetInstanceManagerImage"}, a.Action, "%+v", a)
	}
	assert.Zero(t, cluster.IOStats().Failed)
}
