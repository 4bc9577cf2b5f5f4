package sim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/dataplane"
)

func TestFault_IMStartFailure(t *testing.T) {
	s, _ := cluster3(t, Config{}, VolumeSpec{Name: "vol-1", ReplicasOn: three, AttachedTo: "node-2"})
	require.NoError(t, s.InjectIMStartFailure("node-1"))
	require.Equal(t, dataplane.IMRunning, currentIM(t, s, "node-1").State, "the running IM is unaffected")
	require.NoError(t, s.CutInstanceManager("im-node-1-1"))
	s.Settle()
	im := currentIM(t, s, "node-1")
	require.Equal(t, dataplane.IMError, im.State)
	require.Equal(t, dataplane.RobustnessDegraded, vol(t, s, "vol-1").Robustness)

	require.NoError(t, s.HealIMStartFailure("node-1"))
	require.NoError(t, s.HealIMStartFailure("node-1"), "healing twice is a no-op")
	s.Settle()
	require.Equal(t, dataplane.InstanceManager{Name: im.Name, Node: "node-1", Image: NewIMImage, DataEngine: "v2", State: dataplane.IMRunning, Replicas: 1},
		currentIM(t, s, "node-1"))
	require.Equal(t, dataplane.RobustnessHealthy, vol(t, s, "vol-1").Robustness)
	require.Zero(t, s.IOStats().Failed)
}

func TestFault_NeverHealthy(t *testing.T) {
	s, _ := cluster3(t, Config{RebuildLatency: time.Minute}, VolumeSpec{Name: "vol-1", ReplicasOn: three, AttachedTo: "node-2"})
	require.NoError(t, s.InjectNeverHealthy("vol-1"))
	require.NoError(t, s.FailReplica(ctx, "vol-1", "vol-1-r-1"))
	s.Advance(24 * time.Hour)
	requireDegraded(t, s, "vol-1", "node-1", dataplane.ReplicaRebuilding)

	require.NoError(t, s.HealNeverHealthy("vol-1"))
	require.Equal(t, dataplane.RobustnessHealthy, vol(t, s, "vol-1").Robustness)
}

func TestFault_SlowRebuild(t *testing.T) {
	s, _ := cluster3(t, Config{RebuildLatency: time.Second}, VolumeSpec{Name: "vol-1", ReplicasOn: three, AttachedTo: "node-3"})
	require.NoError(t, s.InjectSlowRebuild("vol-1", time.Hour))
	require.NoError(t, s.FailReplica(ctx, "vol-1", "vol-1-r-1"))
	s.Advance(59 * time.Minute)
	require.Equal(t, dataplane.RobustnessDegraded, vol(t, s, "vol-1").Robustness)
	s.Advance(time.Minute)
	require.Equal(t, dataplane.RobustnessHealthy, vol(t, s, "vol-1").Robustness)

	require.NoError(t, s.HealSlowRebuild("vol-1"))
	require.NoError(t, s.FailReplica(ctx, "vol-1", "vol-1-r-2"))
	s.Advance(time.Second)
	require.Equal(t, dataplane.RobustnessHealthy, vol(t, s, "vol-1").Robustness)
}

// A NotReady node holding a target fails that volume's I/O, but the failure
// is the fault's, not an action's.
func TestFault_NodeNotReady(t *testing.T) {
	s, _ := cluster3(t, Config{},
		VolumeSpec{Name: "vol-1", ReplicasOn: three, AttachedTo: "node-1"},
		VolumeSpec{Name: "vol-2", ReplicasOn: []string{"node-2", "node-3"}, AttachedTo: "node-2"})
	require.NoError(t, s.InjectNodeNotReady("node-1"))
	require.False(t, nodeOf(t, s, "node-1").Ready)
	require.Equal(t, dataplane.ReplicaError, replicaOnNode(t, vol(t, s, "vol-1"), "node-1").State)

	st := s.IOStats()
	require.NotZero(t, st.Failed)
	require.Equal(t, st.Failed, st.FailedInjected, st.String())
	require.Zero(t, st.FailedByActions())
	require.Equal(t, "vol-1", st.Failures[0].Volume)
	require.Equal(t, InjectedPrefix+"initiator node node-1 NotReady", st.Failures[0].Reason)

	require.NoError(t, s.HealNodeNotReady("node-1"))
	s.Settle()
	require.True(t, nodeOf(t, s, "node-1").Ready)
	require.Equal(t, dataplane.RobustnessHealthy, vol(t, s, "vol-1").Robustness, "the replica came back")
	require.Zero(t, s.CheckIO())
}

func TestFault_NodeDeleted(t *testing.T) {
	s, _ := cluster3(t, Config{},
		VolumeSpec{Name: "vol-1", ReplicasOn: three, AttachedTo: "node-2"},
		VolumeSpec{Name: "vol-2", ReplicasOn: three, AttachedTo: "node-2", EngineOn: "node-1"})
	require.NoError(t, s.InjectNodeDeleted("node-1"))
	_, err := s.Node(ctx, "node-1")
	require.ErrorIs(t, err, dataplane.ErrNotFound)
	_, err = s.InstanceManagers(ctx, "node-1")
	require.ErrorIs(t, err, dataplane.ErrNotFound)
	nodes, err := s.Nodes(ctx)
	require.NoError(t, err)
	require.Len(t, nodes, 2)
	require.NotContains(t, replicaNodes(vol(t, s, "vol-1")), "node-1")
	require.NoError(t, s.DeleteInstanceManager(ctx, "im-node-1-1"), "its IM is gone already")
	require.Contains(t, s.Describe(), "node-1  deleted")

	st := s.IOStats()
	require.Equal(t, "vol-2", st.Failures[0].Volume)
	require.Equal(t, InjectedPrefix+"target node node-1 deleted", st.Failures[0].Reason)
	require.Zero(t, st.FailedByActions())

	// Longhorn cannot switch a dead engine over: the user attaches the
	// volume again with its engine elsewhere, and I/O resumes.
	require.NoError(t, s.PlaceEngine("vol-2", ""))
	require.NoError(t, s.DetachVolume("vol-2"))
	require.NoError(t, s.AttachVolume("vol-2", "node-2"))
	require.Zero(t, s.CheckIO())

	require.NoError(t, s.HealNodeDeleted("node-1"))
	s.Settle()
	n := nodeOf(t, s, "node-1")
	require.True(t, n.Ready)
	require.True(t, n.AllowScheduling)
	im := currentIM(t, s, "node-1")
	require.Equal(t, "im-node-1-3", im.Name, "a fresh IM after im-node-1-1 and the waiting im-node-1-2")
	require.Equal(t, NewIMImage, im.Image)
	require.Equal(t, dataplane.ReplicaRunning, replicaNodes(vol(t, s, "vol-1"))["node-1"], "rebuilt on the restored node")
}

func TestFault_TargetMoveFailure(t *testing.T) {
	s := failingSwitchover(t)
	s.Advance(time.Hour)
	v := vol(t, s, "vol-1")
	require.Equal(t, "node-1", v.TargetNode)
	require.Equal(t, "node-2", v.EngineNode)
	require.Equal(t, dataplane.SwitchoverSwitchingOver, v.Switchover, "the initiator's phase call fails and is retried")
	require.NotEmpty(t, v.SwitchoverError)
	require.NoError(t, s.HealTargetMoveFailure("vol-1"))
	require.Equal(t, "node-2", vol(t, s, "vol-1").TargetNode)
}

// Faults armed up front fire when an upgrade step reaches the node.
func TestFault_Triggers(t *testing.T) {
	nodeGone := func(s *Sim) bool { _, err := s.Node(ctx, "node-1"); return err != nil }
	imFailed := func(s *Sim) bool { return currentIM(t, s, "node-1").State == dataplane.IMError }
	for _, tc := range []struct {
		name    string
		profile dataplane.Profile
		f       Fault
		step    func(t *testing.T, s *Sim)
		hit     func(s *Sim) bool
	}{
		{name: "NotReady on scheduling disabled", f: Fault{Kind: FaultNodeNotReady, Object: "node-1", When: TriggerSchedulingDisabled},
			step: func(t *testing.T, s *Sim) { require.NoError(t, s.SetReplicaScheduling(ctx, "node-1", false)) },
			hit:  func(s *Sim) bool { return !nodeOf(t, s, "node-1").Ready }},
		// On v1.12 Longhorn replaces the node's IM by itself once its last
		// replica is failed: the trigger fires all the same.
		{name: "deleted on IM replaced by Longhorn", f: Fault{Kind: FaultNodeDeleted, Object: "node-1", When: TriggerIMDeleted},
			step: failNode1Replica, hit: nodeGone},
		{name: "IM start failure on IM replaced by Longhorn", f: Fault{Kind: FaultIMStartFailure, Object: "node-1", When: TriggerIMDeleted},
			step: failNode1Replica, hit: imFailed},
		{name: "IM start failure on IM deleted", profile: dataplane.ProfileInPlace,
			f: Fault{Kind: FaultIMStartFailure, Object: "node-1", When: TriggerIMDeleted},
			step: func(t *testing.T, s *Sim) {
				failNode1Replica(t, s)
				require.NoError(t, s.DeleteInstanceManager(ctx, currentIM(t, s, "node-1").Name))
			}, hit: imFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := cluster3(t, Config{Profile: tc.profile, Faults: []Fault{tc.f}},
				VolumeSpec{Name: "vol-1", ReplicasOn: three, AttachedTo: "node-2", EngineOn: "node-3"})
			require.Equal(t, []FaultState{{Fault: tc.f}}, s.Faults())
			require.False(t, tc.hit(s))
			tc.step(t, s)
			require.True(t, tc.hit(s))
			require.Equal(t, []FaultState{{Fault: tc.f, Active: true}}, s.Faults())
		})
	}
}

func TestFault_HealAfterAndArmingBeforeTheNodeExists(t *testing.T) {
	s, _ := newSim(t, Config{Faults: []Fault{{Kind: FaultNodeNotReady, Object: "node-1", HealAfter: time.Minute}}})
	require.NoError(t, s.AddNode("node-1"))
	require.False(t, nodeOf(t, s, "node-1").Ready, "armed before the node existed")
	s.Advance(time.Minute)
	require.True(t, nodeOf(t, s, "node-1").Ready)
	require.Empty(t, s.Faults())
}

func TestFault_Invalid(t *testing.T) {
	s, _ := cluster3(t, Config{})
	for _, f := range []Fault{
		{Kind: "bogus", Object: "node-1"},
		{Kind: FaultNodeNotReady},
		{Kind: FaultSlowRebuild, Object: "vol-1"},
		{Kind: FaultNodeDeleted, Object: "node-1", When: "sometime"},
	} {
		require.ErrorIs(t, s.Arm(f), ErrBadFault, f.String())
	}
	require.Panics(t, func() { New(Config{Faults: []Fault{{Kind: "bogus", Object: "x"}}}) })
}

func TestFault_HealAllAndBuilderNotReady(t *testing.T) {
	s, _ := newSim(t, Config{})
	require.NoError(t, s.AddNodeSpec(NodeSpec{Name: "node-1", NotReady: true}))
	require.NoError(t, s.AddNode("node-2"))
	require.NoError(t, s.AddVolume("vol-1", EngineV2, []string{"node-2"}, "node-2"))
	require.NoError(t, s.InjectTargetMoveFailure("vol-1"))
	require.NoError(t, s.InjectIMStartFailure("node-2"))
	require.Len(t, s.Faults(), 3)
	s.HealAll()
	require.Empty(t, s.Faults())
	require.True(t, nodeOf(t, s, "node-1").Ready)
}

func TestFault_HealAfterDoesNotHealALaterInjection(t *testing.T) {
	s, _ := cluster3(t, Config{Faults: []Fault{{Kind: FaultNodeNotReady, Object: "node-1", HealAfter: time.Minute}}})
	require.NoError(t, s.HealNodeNotReady("node-1"))
	require.NoError(t, s.InjectNodeNotReady("node-1"))
	s.Advance(time.Hour)
	require.False(t, nodeOf(t, s, "node-1").Ready)
}

func TestBuilder_ReplicaOnANotReadyNodeIsFailed(t *testing.T) {
	s, _ := newSim(t, Config{})
	require.NoError(t, s.AddNodeSpec(NodeSpec{Name: "node-1", NotReady: true}))
	require.NoError(t, s.AddNode("node-2"))
	require.NoError(t, s.AddVolume("vol-1", EngineV2, []string{"node-1", "node-2"}, "node-2"))
	requireDegraded(t, s, "vol-1", "node-1", dataplane.ReplicaError)
	require.NoError(t, s.HealNodeNotReady("node-1"))
	require.Equal(t, dataplane.RobustnessHealthy, vol(t, s, "vol-1").Robustness)
}

func TestRun_ReturnsWhenTheContextIsDone(t *testing.T) {
	s, _ := cluster3(t, Config{}, VolumeSpec{Name: "vol-1", ReplicasOn: three, AttachedTo: "node-1"})
	cctx, cancel := contextWithCancel()
	cancel()
	s.Run(cctx, time.Hour)
	require.Zero(t, s.IOStats().Failed)
}

// failNode1Replica fails vol-1's replica on node-1, the last instance of
// node-1's IM.
func failNode1Replica(t *testing.T, s *Sim) {
	require.NoError(t, s.SetReplicaScheduling(ctx, "node-1", false)) // not reused in the IM about to go
	retire(t, s, "vol-1", replicaOnNode(t, vol(t, s, "vol-1"), "node-1").Name)
	s.Settle()
}
