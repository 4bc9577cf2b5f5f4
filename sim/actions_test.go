package sim

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/dataplane"
)

var three = []string{"node-1", "node-2", "node-3"}

func TestActions_UnknownObjectsAreNotFound(t *testing.T) {
	s, _ := cluster3(t, Config{}, VolumeSpec{Name: "vol-1", ReplicasOn: three, AttachedTo: "node-1"})
	for _, tc := range []struct {
		name, object string
		call         func() error
	}{
		{"Node", "node-9", func() error { _, err := s.Node(ctx, "node-9"); return err }},
		{"Volume", "vol-9", func() error { _, err := s.Volume(ctx, "vol-9"); return err }},
		{"InstanceManagers", "node-9", func() error { _, err := s.InstanceManagers(ctx, "node-9"); return err }},
		{"SetNodeUpgradeRequested", "node-9", func() error { return s.SetNodeUpgradeRequested(ctx, "node-9", true) }},
		{"CreateSnapshot", "vol-9", func() error { return s.CreateSnapshot(ctx, "vol-9", "snap") }},
		{"FailReplica volume", "vol-9", func() error { return s.FailReplica(ctx, "vol-9", "vol-1-r-1") }},
		{"FailReplica replica", "vol-1-r-9", func() error { return s.FailReplica(ctx, "vol-1", "vol-1-r-9") }},
		{"DeleteReplica", "vol-1-r-9", func() error { return s.DeleteReplica(ctx, "vol-1", "vol-1-r-9") }},
		{"SetTargetNode volume", "vol-9", func() error { return s.SetTargetNode(ctx, "vol-9", "node-2") }},
		{"SetTargetNode node", "node-9", func() error { return s.SetTargetNode(ctx, "vol-1", "node-9") }},
		{"DeleteInstanceManager", "im-node-9-1", func() error { return s.DeleteInstanceManager(ctx, "im-node-9-1") }},
		{"SetVolumeImage", "vol-9", func() error { return s.SetVolumeImage(ctx, "vol-9", NewIMImage) }},
		{"InjectNodeNotReady", "node-9", func() error { return s.InjectNodeNotReady("node-9") }},
		{"HealNeverHealthy", "vol-9", func() error { return s.HealNeverHealthy("vol-9") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			require.ErrorIs(t, err, dataplane.ErrNotFound)
			require.ErrorContains(t, err, tc.object)
		})
	}
	require.Zero(t, s.IOStats().Failed)
}

func TestActions_CancelledContext(t *testing.T) {
	s, _ := cluster3(t, Config{})
	cctx, cancel := contextWithCancel()
	cancel()
	require.ErrorIs(t, s.SetNodeUpgradeRequested(cctx, "node-1", true), errCanceled)
	_, err := s.Nodes(cctx)
	require.ErrorIs(t, err, errCanceled)
	require.False(t, nodeOf(t, s, "node-1").UpgradeRequested)
}

// Every action, called twice, changes the cluster once: the second call is a
// no-op and is logged as one.
func TestActions_Idempotent(t *testing.T) {
	for _, tc := range []struct {
		name  string
		call  func(s *Sim) error
		check func(t *testing.T, s *Sim)
	}{
		{"SetNodeUpgradeRequested", func(s *Sim) error { return s.SetNodeUpgradeRequested(ctx, "node-2", true) },
			func(t *testing.T, s *Sim) { require.True(t, nodeOf(t, s, "node-2").UpgradeRequested) }},
		{"CreateSnapshot", func(s *Sim) error { return s.CreateSnapshot(ctx, "vol-1", "pre-upgrade") },
			func(t *testing.T, s *Sim) {
				snaps, err := s.Snapshots("vol-1")
				require.NoError(t, err)
				require.Equal(t, []string{"pre-upgrade"}, snaps)
			}},
		{"FailReplica", func(s *Sim) error { return s.FailReplica(ctx, "vol-1", "vol-1-r-1") },
			func(t *testing.T, s *Sim) {
				require.Equal(t, dataplane.ReplicaStopped, replicaOnNode(t, vol(t, s, "vol-1"), "node-1").State)
			}},
		{"DeleteReplica", func(s *Sim) error { return s.DeleteReplica(ctx, "vol-1", "vol-1-r-1") },
			func(t *testing.T, s *Sim) { require.NotContains(t, replicaNodes(vol(t, s, "vol-1")), "node-1") }},
		{"SetTargetNode", func(s *Sim) error { return s.SetTargetNode(ctx, "vol-1", "node-2") },
			func(t *testing.T, s *Sim) { require.Equal(t, "node-2", vol(t, s, "vol-1").TargetNode) }},
		{"DeleteInstanceManager", func(s *Sim) error { return s.DeleteInstanceManager(ctx, "im-node-3-1") },
			func(t *testing.T, s *Sim) { require.Equal(t, "im-node-3-2", currentIM(t, s, "node-3").Name) }},
		{"SetVolumeImage", func(s *Sim) error { return s.SetVolumeImage(ctx, "vol-2", NewIMImage) },
			func(t *testing.T, s *Sim) { require.Equal(t, NewIMImage, vol(t, s, "vol-2").Image) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The node is flagged so that a failed replica stays failed.
			s, _ := cluster3(t, Config{},
				VolumeSpec{Name: "vol-1", ReplicasOn: three, AttachedTo: "node-1"},
				VolumeSpec{Name: "vol-2", ReplicasOn: three})
			require.NoError(t, s.SetNodeUpgradeRequested(ctx, "node-1", true))
			before, _ := s.ActionLog()

			require.NoError(t, tc.call(s))
			s.Settle()
			tc.check(t, s)
			require.NoError(t, tc.call(s))
			s.Settle()
			tc.check(t, s)

			log, _ := s.ActionLog()
			log = log[len(before):]
			require.Len(t, log, 2)
			require.False(t, log[0].NoOp, "first call must change the cluster")
			require.True(t, log[1].NoOp, "second call must be a no-op")
			require.Zero(t, s.IOStats().Failed)
		})
	}
}

func TestSetNodeUpgradeRequested_BlocksAttachOfV2Volumes(t *testing.T) {
	s, _ := cluster3(t, Config{},
		VolumeSpec{Name: "vol-1", ReplicasOn: three},
		VolumeSpec{Name: "vol-v1", Engine: EngineV1, ReplicasOn: three})
	require.NoError(t, s.SetNodeUpgradeRequested(ctx, "node-1", true))
	require.ErrorIs(t, s.AttachVolume("vol-1", "node-1"), ErrUpgradeRequested)
	require.NoError(t, s.AttachVolume("vol-v1", "node-1"), "v1 volumes do not use the v2 engine")
	require.NoError(t, s.SetNodeUpgradeRequested(ctx, "node-1", false))
	require.NoError(t, s.AttachVolume("vol-1", "node-1"))
	v := vol(t, s, "vol-1")
	require.Equal(t, "node-1", v.AttachedNode)
	require.Equal(t, "node-1", v.TargetNode)
	require.NoError(t, s.DetachVolume("vol-1"))
	v = vol(t, s, "vol-1")
	require.False(t, v.Attached())
	require.Empty(t, v.TargetNode)
}

func TestFailReplica_DegradesThenRebuildsInPlace(t *testing.T) {
	s, fc := cluster3(t, Config{RebuildLatency: time.Minute}, VolumeSpec{Name: "vol-1", ReplicasOn: three, AttachedTo: "node-1"})
	require.NoError(t, s.FailReplica(ctx, "vol-1", "vol-1-r-2"))
	v := vol(t, s, "vol-1")
	require.Equal(t, dataplane.RobustnessDegraded, v.Robustness)
	require.Equal(t, 2, v.HealthyReplicas())
	// No upgrade flag: Longhorn reuses the failed replica on its own node.
	require.Equal(t, dataplane.ReplicaRebuilding, replicaOnNode(t, v, "node-2").State)
	fc.Advance(59 * time.Second)
	require.Equal(t, dataplane.RobustnessDegraded, vol(t, s, "vol-1").Robustness)
	fc.Advance(time.Second)
	v = vol(t, s, "vol-1")
	require.Equal(t, dataplane.RobustnessHealthy, v.Robustness)
	require.Equal(t, "vol-1-r-2", replicaOnNode(t, v, "node-2").Name)
	require.Zero(t, s.IOStats().Failed)
}

func TestDeleteReplica_RemovesItAndRebuildsANewOne(t *testing.T) {
	s, _ := cluster3(t, Config{}, VolumeSpec{Name: "vol-1", ReplicasOn: three, AttachedTo: "node-1"})
	require.NoError(t, s.FailReplica(ctx, "vol-1", "vol-1-r-3"))
	require.NoError(t, s.DeleteReplica(ctx, "vol-1", "vol-1-r-3"))
	require.NoError(t, s.FailReplica(ctx, "vol-1", "vol-1-r-3"), "a deleted replica is failed already")
	v := vol(t, s, "vol-1")
	require.Equal(t, dataplane.RobustnessHealthy, v.Robustness)
	require.Equal(t, "vol-1-r-4", replicaOnNode(t, v, "node-3").Name)
}

func TestSetTargetNode_MovesAfterTheLatencyAndOnlyToAReadyNodeWithARunningIM(t *testing.T) {
	const latency = 10 * time.Second
	for _, tc := range []struct {
		name   string
		break_ func(t *testing.T, s *Sim) // makes node-2 unable to host a target
		fix    func(t *testing.T, s *Sim)
	}{
		{"healthy destination", nil, nil},
		{"destination NotReady",
			func(t *testing.T, s *Sim) { require.NoError(t, s.InjectNodeNotReady("node-2")) },
			func(t *testing.T, s *Sim) { require.NoError(t, s.HealNodeNotReady("node-2")) }},
		{"destination IM failed to start",
			func(t *testing.T, s *Sim) {
				require.NoError(t, s.InjectIMStartFailure("node-2"))
				require.NoError(t, s.DeleteInstanceManager(ctx, "im-node-2-1"))
			},
			func(t *testing.T, s *Sim) { require.NoError(t, s.HealIMStartFailure("node-2")) }},
		{"destination IM still starting",
			func(t *testing.T, s *Sim) {
				s.cfg.IMStartLatency = 3 * time.Hour
				require.NoError(t, s.DeleteInstanceManager(ctx, "im-node-2-1"))
			},
			func(t *testing.T, s *Sim) { s.Advance(2 * time.Hour) }},
		{"target move fault",
			func(t *testing.T, s *Sim) { require.NoError(t, s.InjectTargetMoveFailure("vol-1")) },
			func(t *testing.T, s *Sim) { require.NoError(t, s.HealTargetMoveFailure("vol-1")) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, fc := cluster3(t, Config{TargetMoveLatency: latency},
				VolumeSpec{Name: "vol-1", ReplicasOn: three, AttachedTo: "node-1"})
			if tc.break_ != nil {
				tc.break_(t, s)
			}
			require.NoError(t, s.SetTargetNode(ctx, "vol-1", "node-2"))
			v := vol(t, s, "vol-1")
			require.Equal(t, "node-2", v.DesiredTargetNode)
			require.Equal(t, "node-1", v.TargetNode, "a move takes its latency")

			fc.Advance(latency / 2)
			require.NoError(t, s.SetTargetNode(ctx, "vol-1", "node-2"), "repeating keeps the move's timing")
			fc.Advance(latency / 2)
			if tc.break_ == nil {
				require.Equal(t, "node-2", vol(t, s, "vol-1").TargetNode)
				return
			}
			s.Advance(time.Hour)
			require.Equal(t, "node-1", vol(t, s, "vol-1").TargetNode, "stuck: the move must not complete")
			require.Equal(t, "node-2", vol(t, s, "vol-1").DesiredTargetNode)
			require.Zero(t, s.IOStats().FailedByActions(), "the old target keeps serving while stuck")

			tc.fix(t, s)
			s.Settle()
			require.Equal(t, "node-2", vol(t, s, "vol-1").TargetNode, "the move completes once fixed")
		})
	}
}

func TestSetTargetNode_ClearingReturnsToTheAttachedNode(t *testing.T) {
	s, _ := cluster3(t, Config{}, VolumeSpec{Name: "vol-1", ReplicasOn: three, AttachedTo: "node-1"},
		VolumeSpec{Name: "vol-d", ReplicasOn: three}, VolumeSpec{Name: "vol-v1", Engine: EngineV1, ReplicasOn: three, AttachedTo: "node-1"})
	require.NoError(t, s.SetTargetNode(ctx, "vol-1", "node-3"))
	require.Equal(t, "node-3", vol(t, s, "vol-1").TargetNode)
	require.NoError(t, s.SetTargetNode(ctx, "vol-1", ""))
	v := vol(t, s, "vol-1")
	require.Equal(t, "node-1", v.TargetNode)
	require.Empty(t, v.DesiredTargetNode)

	require.NoError(t, s.SetTargetNode(ctx, "vol-d", "node-2"), "a detached volume records the override")
	require.Empty(t, vol(t, s, "vol-d").TargetNode)
	require.ErrorIs(t, s.SetTargetNode(ctx, "vol-v1", "node-2"), ErrWrongEngine)
}

func TestDeleteInstanceManager_ReplacesItWithTheDefaultImage(t *testing.T) {
	const latency = 30 * time.Second
	s, fc := cluster3(t, Config{IMStartLatency: latency},
		VolumeSpec{Name: "vol-1", ReplicasOn: three, AttachedTo: "node-2"},
		VolumeSpec{Name: "vol-v1", Engine: EngineV1, ReplicasOn: three, AttachedTo: "node-2"})
	require.NoError(t, s.DeleteInstanceManager(ctx, "im-node-1-1"))

	ims, err := s.InstanceManagers(ctx, "node-1")
	require.NoError(t, err)
	require.Equal(t, []dataplane.InstanceManager{
		{Name: "im-node-1-1", Node: "node-1", Image: OldIMImage, DataEngine: "v2", State: dataplane.IMStopped},
		{Name: "im-node-1-2", Node: "node-1", Image: NewIMImage, DataEngine: "v2", State: dataplane.IMStarting},
	}, ims)
	require.Equal(t, dataplane.ReplicaError, replicaOnNode(t, vol(t, s, "vol-1"), "node-1").State, "v2 replicas lose their IM")
	require.Equal(t, dataplane.ReplicaRunning, replicaOnNode(t, vol(t, s, "vol-v1"), "node-1").State, "v1 replicas do not")
	require.NoError(t, s.DeleteInstanceManager(ctx, "im-node-1-1"), "deleting a stopped IM is a no-op")

	fc.Advance(latency)
	ims, err = s.InstanceManagers(ctx, "node-1")
	require.NoError(t, err)
	require.Equal(t, []dataplane.InstanceManager{
		{Name: "im-node-1-2", Node: "node-1", Image: NewIMImage, DataEngine: "v2", State: dataplane.IMRunning},
	}, ims)
	require.NoError(t, s.DeleteInstanceManager(ctx, "im-node-1-1"), "deleting a removed IM is a no-op")
	require.Equal(t, dataplane.RobustnessHealthy, vol(t, s, "vol-1").Robustness, "the replica came back")

	all, err := s.InstanceManagers(ctx, "")
	require.NoError(t, err)
	require.Len(t, all, 3)
	require.Zero(t, s.IOStats().Failed, "no target lived on node-1")
}

func TestSetVolumeImage_OnlyDetachedV2Volumes(t *testing.T) {
	s, _ := cluster3(t, Config{},
		VolumeSpec{Name: "vol-a", ReplicasOn: three, AttachedTo: "node-1"},
		VolumeSpec{Name: "vol-d", ReplicasOn: three},
		VolumeSpec{Name: "vol-v1", Engine: EngineV1, ReplicasOn: three})
	require.ErrorIs(t, s.SetVolumeImage(ctx, "vol-a", NewIMImage), ErrVolumeAttached)
	require.ErrorIs(t, s.SetVolumeImage(ctx, "vol-v1", NewIMImage), ErrWrongEngine)
	require.NoError(t, s.SetVolumeImage(ctx, "vol-d", NewIMImage))
	require.Equal(t, NewIMImage, vol(t, s, "vol-d").Image)
	require.Equal(t, OldIMImage, vol(t, s, "vol-a").Image)
	log, _ := s.ActionLog()
	require.True(t, errors.Is(s.SetVolumeImage(ctx, "vol-a", NewIMImage), ErrVolumeAttached))
	require.Equal(t, "SetVolumeImage", log[0].Action)
	require.NotEmpty(t, log[0].Err)
}

func TestReads_CopyValuesOut(t *testing.T) {
	s, _ := cluster3(t, Config{}, VolumeSpec{Name: "vol-1", ReplicasOn: three, AttachedTo: "node-1"})
	v := vol(t, s, "vol-1")
	v.Replicas[0].State = dataplane.ReplicaError
	n := nodeOf(t, s, "node-1")
	n.Images[0] = "mutated"
	require.Equal(t, dataplane.ReplicaRunning, vol(t, s, "vol-1").Replicas[0].State)
	require.Equal(t, []string{OldIMImage, NewIMImage}, nodeOf(t, s, "node-1").Images)
}
