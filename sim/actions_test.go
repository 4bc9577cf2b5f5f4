package sim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/dataplane"
)

var three = []string{"node-1", "node-2", "node-3"}

var inPlace = Config{Profile: dataplane.ProfileInPlace}

func TestActions_UnknownObjectsAreNotFound(t *testing.T) {
	s, _ := cluster3(t, inPlace, VolumeSpec{Name: "vol-1", ReplicasOn: three, AttachedTo: "node-1"})
	for _, tc := range []struct {
		name, object string
		call         func() error
	}{
		{"Node", "node-9", func() error { _, err := s.Node(ctx, "node-9"); return err }},
		{"Volume", "vol-9", func() error { _, err := s.Volume(ctx, "vol-9"); return err }},
		{"InstanceManagers", "node-9", func() error { _, err := s.InstanceManagers(ctx, "node-9"); return err }},
		{"SetReplicaScheduling", "node-9", func() error { return s.SetReplicaScheduling(ctx, "node-9", false) }},
		{"CreateSnapshot", "vol-9", func() error { return s.CreateSnapshot(ctx, "vol-9", "snap") }},
		{"DeleteSnapshot", "vol-9", func() error { return s.DeleteSnapshot(ctx, "vol-9", "snap") }},
		{"FailReplica volume", "vol-9", func() error { return s.FailReplica(ctx, "vol-9", "vol-1-r-1") }},
		{"FailReplica replica", "vol-1-r-9", func() error { return s.FailReplica(ctx, "vol-1", "vol-1-r-9") }},
		{"DeleteReplica", "vol-1-r-9", func() error { return s.DeleteReplica(ctx, "vol-1", "vol-1-r-9") }},
		{"SetEngineNode volume", "vol-9", func() error { return s.SetEngineNode(ctx, "vol-9", "node-2") }},
		{"SetEngineNode node", "node-9", func() error { return s.SetEngineNode(ctx, "vol-1", "node-9") }},
		{"DeleteInstanceManager", "im-node-9-1", func() error { return s.DeleteInstanceManager(ctx, "im-node-9-1") }},
		{"SetInstanceManagerImage", "im-node-9-1", func() error { return s.SetInstanceManagerImage(ctx, "im-node-9-1", NewIMImage) }},
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
	require.ErrorIs(t, s.SetReplicaScheduling(cctx, "node-1", false), errCanceled)
	_, err := s.Nodes(cctx)
	require.ErrorIs(t, err, errCanceled)
	require.True(t, nodeOf(t, s, "node-1").AllowScheduling)
}

// Every action, called twice, changes the cluster once: the second call is a
// no-op and is logged as one.
func TestActions_Idempotent(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cfg   Config
		call  func(s *Sim) error
		check func(t *testing.T, s *Sim)
	}{
		{"SetReplicaScheduling", Config{}, func(s *Sim) error { return s.SetReplicaScheduling(ctx, "node-2", false) },
			func(t *testing.T, s *Sim) { require.False(t, nodeOf(t, s, "node-2").AllowScheduling) }},
		{"CreateSnapshot", Config{}, func(s *Sim) error { return s.CreateSnapshot(ctx, "vol-1", "pre-upgrade") },
			func(t *testing.T, s *Sim) {
				snaps, err := s.SnapshotNames("vol-1")
				require.NoError(t, err)
				require.Equal(t, []string{"old", "pre-upgrade"}, snaps)
			}},
		{"DeleteSnapshot", Config{}, func(s *Sim) error { return s.DeleteSnapshot(ctx, "vol-1", "old") },
			func(t *testing.T, s *Sim) {
				snaps, err := s.SnapshotNames("vol-1")
				require.NoError(t, err)
				require.Empty(t, snaps)
			}},
		{"FailReplica", Config{}, func(s *Sim) error { return s.FailReplica(ctx, "vol-1", "vol-1-r-1") },
			func(t *testing.T, s *Sim) {
				require.Equal(t, dataplane.ReplicaStopped, replicaOnNode(t, vol(t, s, "vol-1"), "node-1").State)
			}},
		{"SetEngineNode", Config{}, func(s *Sim) error { return s.SetEngineNode(ctx, "vol-1", "node-2") },
			func(t *testing.T, s *Sim) { require.Equal(t, "node-2", vol(t, s, "vol-1").TargetNode) }},
		{"DeleteInstanceManager", inPlace, func(s *Sim) error { return s.DeleteInstanceManager(ctx, "im-node-3-1") },
			func(t *testing.T, s *Sim) { require.Equal(t, "im-node-3-2", currentIM(t, s, "node-3").Name) }},
		{"SetInstanceManagerImage", inPlace, func(s *Sim) error { return s.SetInstanceManagerImage(ctx, "im-node-3-1", NewIMImage) },
			func(t *testing.T, s *Sim) {
				require.Equal(t, dataplane.InstanceManager{Name: "im-node-3-1", Node: "node-3", Image: NewIMImage,
					DataEngine: "v2", State: dataplane.IMRunning}, currentIM(t, s, "node-3"))
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// node-3 runs nothing (a detached volume's replica runs no
			// instance): its IM may be deleted.
			s, _ := cluster3(t, tc.cfg,
				VolumeSpec{Name: "vol-1", ReplicasOn: []string{"node-1", "node-2"}, AttachedTo: "node-1"},
				VolumeSpec{Name: "vol-2", ReplicasOn: three})
			require.NoError(t, s.CreateSnapshot(ctx, "vol-1", "old"))
			// Scheduling is off on node-1 so that a failed replica stays failed.
			require.NoError(t, s.SetReplicaScheduling(ctx, "node-1", false))
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
			require.Zero(t, s.IOStats().FailedByActions(), s.IOStats())
		})
	}
}

// Longhorn reuses a failed replica on its own node at once when that node
// allows scheduling, and not while it does not: then a spare node gets a new
// replica, or the volume waits.
func TestReplicaScheduling(t *testing.T) {
	for _, tc := range []struct {
		name   string
		allow  bool
		spare  bool
		before map[string]dataplane.ReplicaState
	}{
		{"allowed: reused in place", true, false,
			map[string]dataplane.ReplicaState{"node-1": "rebuilding", "node-2": "running", "node-3": "running"}},
		{"not allowed, no spare node: waits", false, false,
			map[string]dataplane.ReplicaState{"node-1": "stopped", "node-2": "running", "node-3": "running"}},
		{"not allowed, spare node: rebuilt there", false, true,
			map[string]dataplane.ReplicaState{"node-1": "stopped", "node-2": "running", "node-3": "running", "node-4": "rebuilding"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, fc := cluster3(t, Config{RebuildLatency: time.Minute}, VolumeSpec{Name: "vol-1", ReplicasOn: three, AttachedTo: "node-2"})
			if tc.spare {
				require.NoError(t, s.AddNode("node-4"))
			}
			require.NoError(t, s.SetReplicaScheduling(ctx, "node-1", tc.allow))
			require.NoError(t, s.FailReplica(ctx, "vol-1", "vol-1-r-1"))
			require.Equal(t, tc.before, replicaNodes(vol(t, s, "vol-1")))
			require.Equal(t, dataplane.RobustnessDegraded, vol(t, s, "vol-1").Robustness)
			fc.Advance(time.Hour)
			if !tc.allow && !tc.spare {
				require.Equal(t, dataplane.ReplicaStopped, replicaOnNode(t, vol(t, s, "vol-1"), "node-1").State)
				require.NoError(t, s.SetReplicaScheduling(ctx, "node-1", true))
				require.Equal(t, dataplane.ReplicaRebuilding, replicaOnNode(t, vol(t, s, "vol-1"), "node-1").State,
					"allowed again: reused in place")
				s.Advance(time.Minute)
			}
			require.Equal(t, dataplane.RobustnessHealthy, vol(t, s, "vol-1").Robustness)
			require.Zero(t, s.IOStats().Failed)
		})
	}
}

func TestDeleteReplica_RemovesItAndRebuildsANewOne(t *testing.T) {
	s, _ := cluster3(t, Config{}, VolumeSpec{Name: "vol-1", ReplicasOn: three, AttachedTo: "node-1"})
	require.NoError(t, s.FailReplica(ctx, "vol-1", "vol-1-r-3"))
	require.NoError(t, s.DeleteReplica(ctx, "vol-1", "vol-1-r-3"))
	require.NoError(t, s.FailReplica(ctx, "vol-1", "vol-1-r-3"), "a deleted replica is failed already")
	s.Settle()
	v := vol(t, s, "vol-1")
	require.Equal(t, dataplane.RobustnessHealthy, v.Robustness)
	require.Equal(t, "vol-1-r-4", replicaOnNode(t, v, "node-3").Name)
}

// A switch-over: preparing (a second engine on the destination) for half
// the latency, switching-over (the initiator's preparing and switching
// phases) for the other half, then the target runs there and the initiator
// stays on the attached node.
func TestSetEngineNode_SwitchesTheTargetOver(t *testing.T) {
	const latency = 10 * time.Second
	s, fc := cluster3(t, Config{TargetMoveLatency: latency},
		VolumeSpec{Name: "vol-1", ReplicasOn: three, AttachedTo: "node-1"})
	require.True(t, vol(t, s, "vol-1").TargetReady)
	require.NoError(t, s.SetEngineNode(ctx, "vol-1", "node-2"))
	v := vol(t, s, "vol-1")
	assert.Equal(t, "node-2", v.EngineNode)
	assert.Equal(t, "node-1", v.TargetNode, "a switch-over takes its latency")
	assert.Equal(t, dataplane.SwitchoverPreparing, v.Switchover)
	assert.False(t, v.TargetReady)
	assert.Equal(t, 1, currentIM(t, s, "node-2").Engines, "the new engine runs in node-2's IM")

	fc.Advance(latency / 2)
	require.NoError(t, s.SetEngineNode(ctx, "vol-1", "node-2"), "repeating keeps the switch-over's timing")
	assert.Equal(t, dataplane.SwitchoverSwitchingOver, vol(t, s, "vol-1").Switchover)
	fc.Advance(latency / 2)
	v = vol(t, s, "vol-1")
	assert.Equal(t, "node-2", v.TargetNode)
	assert.Equal(t, "node-1", v.AttachedNode)
	assert.Equal(t, dataplane.SwitchoverNone, v.Switchover)
	assert.True(t, v.TargetReady)
	im1 := currentIM(t, s, "node-1")
	assert.Equal(t, []int{0, 1, 1}, []int{im1.Engines, im1.Frontends, im1.Replicas}, "node-1 keeps the initiator and its replica")
	require.Zero(t, s.IOStats().Failed)
	require.Equal(t, []Unsafe{{Kind: UnsafeEngineMoved, Volume: "vol-1", Node: "node-2",
		Detail: `spec.engineNodeID "node-2", set by its user to "" (upgrade in flight on "")`}}, s.Unsafe(""))
	require.Empty(t, s.Unsafe("node-1"), "node-1 is the engine's home")

	require.NoError(t, s.SetEngineNode(ctx, "vol-1", ""))
	s.Settle()
	v = vol(t, s, "vol-1")
	assert.Equal(t, "node-1", v.TargetNode, `"" follows the attached node`)
	assert.Empty(t, s.Unsafe(""))
}

// Longhorn waits, with no timeout, while the destination cannot host an
// engine; the old engine keeps serving.
func TestSetEngineNode_WaitsForADestinationThatCanHostIt(t *testing.T) {
	for _, tc := range []struct {
		name   string
		break_ func(t *testing.T, s *Sim)
		fix    func(t *testing.T, s *Sim)
	}{
		{"destination NotReady",
			func(t *testing.T, s *Sim) { require.NoError(t, s.InjectNodeNotReady("node-2")) },
			func(t *testing.T, s *Sim) { require.NoError(t, s.HealNodeNotReady("node-2")) }},
		{"destination IM failed to start",
			func(t *testing.T, s *Sim) {
				require.NoError(t, s.InjectIMStartFailure("node-2"))
				require.NoError(t, s.DeleteInstanceManager(ctx, currentIM(t, s, "node-2").Name))
			},
			func(t *testing.T, s *Sim) { require.NoError(t, s.HealIMStartFailure("node-2")) }},
		{"destination IM still starting",
			func(t *testing.T, s *Sim) {
				s.cfg.IMStartLatency = 3 * time.Hour
				require.NoError(t, s.DeleteInstanceManager(ctx, currentIM(t, s, "node-2").Name))
			},
			func(t *testing.T, s *Sim) { s.Advance(2 * time.Hour) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := cluster3(t, Config{TargetMoveLatency: 10 * time.Second},
				VolumeSpec{Name: "vol-1", ReplicasOn: []string{"node-1", "node-3"}, AttachedTo: "node-1"})
			tc.break_(t, s)
			require.NoError(t, s.SetEngineNode(ctx, "vol-1", "node-2"))
			s.Advance(time.Hour)
			v := vol(t, s, "vol-1")
			require.Equal(t, "node-1", v.TargetNode, "stuck: the switch-over must not complete")
			require.Equal(t, dataplane.SwitchoverPreparing, v.Switchover)
			require.Zero(t, s.IOStats().FailedByActions(), "the old engine keeps serving while stuck")

			tc.fix(t, s)
			s.Settle()
			require.Equal(t, "node-2", vol(t, s, "vol-1").TargetNode, "the switch-over completes once fixed")
		})
	}
}

// Longhorn reverts a switch-over while a replica rebuilds, and tries again.
func TestSetEngineNode_RevertsWhileAReplicaRebuilds(t *testing.T) {
	s, fc := cluster3(t, Config{RebuildLatency: time.Minute},
		VolumeSpec{Name: "vol-1", ReplicasOn: three, AttachedTo: "node-1"})
	require.NoError(t, s.FailReplica(ctx, "vol-1", "vol-1-r-3")) // reused at once: rebuilding
	require.NoError(t, s.SetEngineNode(ctx, "vol-1", "node-2"))
	v := vol(t, s, "vol-1")
	require.Equal(t, dataplane.SwitchoverReverting, v.Switchover)
	require.Empty(t, v.SwitchoverError, "a revert of the volume controller reports no event")
	fc.Advance(time.Minute)
	v = vol(t, s, "vol-1")
	require.Equal(t, "node-2", v.TargetNode)
	require.Zero(t, s.IOStats().Failed)
}

// An injected failure makes the initiator's phase call fail, retried the
// way Longhorn reports it; the old engine serves until the fault is healed.
func TestSetEngineNode_FailingSwitchoverLoopsUntilHealed(t *testing.T) {
	s := failingSwitchover(t)
	s.Settle()
	v := vol(t, s, "vol-1")
	require.Equal(t, dataplane.SwitchoverSwitchingOver, v.Switchover)
	require.Equal(t, "node-1", v.TargetNode)
	require.Equal(t, "Failed to switch over target to node-2:20001: injected fault: switch-over refused", v.SwitchoverError)
	require.NoError(t, s.HealTargetMoveFailure("vol-1"))
	s.Settle()
	v = vol(t, s, "vol-1")
	require.Equal(t, "node-2", v.TargetNode)
	require.Empty(t, v.SwitchoverError)
	require.Zero(t, s.IOStats().Failed)
}

// A failing switch-over given up (the engine node set back) reports no
// error any more: the error is that of the switch-over under way. Its
// initiator never left its first phase, so the old path serves.
func TestSetEngineNode_GivingUpAFailingSwitchoverClearsItsError(t *testing.T) {
	s := failingSwitchover(t)
	s.Settle()
	v := vol(t, s, "vol-1")
	require.NotEmpty(t, v.SwitchoverError)
	require.False(t, v.PathsSwitching)
	require.NoError(t, s.SetEngineNode(ctx, "vol-1", ""))
	s.Settle()
	v = vol(t, s, "vol-1")
	assert.Empty(t, v.Switchover)
	assert.Empty(t, v.SwitchoverError)
	assert.True(t, v.TargetReady)
	assert.Zero(t, s.IOStats().Failed)
	assert.Empty(t, s.Unsafe(""))
}

// Changing the engine node while preparing is clean; once the initiator's
// switching phase made the old path inaccessible, it leaves the volume with
// no usable path (the hazard the steps avoid): its I/O queues, and fails
// after the initiator's ctrl-loss-tmo.
func TestSetEngineNode_ChangedMidSwitchover(t *testing.T) {
	const latency = 10 * time.Second
	t.Run("preparing: clean", func(t *testing.T) {
		s, fc := cluster3(t, Config{TargetMoveLatency: latency}, VolumeSpec{Name: "vol-1", ReplicasOn: three, AttachedTo: "node-1"})
		require.NoError(t, s.SetEngineNode(ctx, "vol-1", "node-2"))
		require.NoError(t, s.SetEngineNode(ctx, "vol-1", ""))
		fc.Advance(time.Hour)
		v := vol(t, s, "vol-1")
		require.Equal(t, "node-1", v.TargetNode)
		require.Equal(t, dataplane.SwitchoverNone, v.Switchover)
		require.Zero(t, s.IOStats().Failed)
	})
	t.Run("switching-over: the data plane refuses; a raw write breaks the path", func(t *testing.T) {
		s, fc := cluster3(t, Config{TargetMoveLatency: latency}, VolumeSpec{Name: "vol-1", ReplicasOn: three, AttachedTo: "node-1"})
		require.NoError(t, s.SetEngineNode(ctx, "vol-1", "node-2"))
		fc.Advance(latency/2 + latency/4)
		require.Equal(t, dataplane.SwitchoverSwitchingOver, vol(t, s, "vol-1").Switchover)
		require.ErrorIs(t, s.SetEngineNode(ctx, "vol-1", ""), dataplane.ErrSwitchingPaths, "as the Longhorn data plane, on the state at the write")
		assert.Empty(t, s.Unsafe("node-1"))
		// What Longhorn does with the write a user makes anyway.
		require.NoError(t, s.PlaceEngine("vol-1", ""))
		require.Zero(t, s.IOStats().Failed, "I/O queues first")
		require.Equal(t, UnsafePathBroken, s.Unsafe("node-1")[0].Kind)
		fc.Advance(QueueTimeout)
		st := s.IOStats()
		require.NotZero(t, st.FailedByActions())
		require.Contains(t, st.Failures[0].Reason, "Longhorn leaves it so")
		require.Len(t, st.Stalls, 1)
		assert.Equal(t, QueueTimeout, st.Stalls[0].Duration(st.At))
	})
}

// Only an NVMe/TCP frontend can switch: a ublk volume stays switching-over.
func TestSetEngineNode_NoSwitchoverPathWithoutNVMeTCP(t *testing.T) {
	for _, frontend := range []string{dataplane.FrontendUblk, NoFrontend} {
		t.Run(frontend, func(t *testing.T) {
			s, _ := cluster3(t, Config{}, VolumeSpec{Name: "vol-1", ReplicasOn: three, AttachedTo: "node-1", Frontend: frontend})
			require.NoError(t, s.SetEngineNode(ctx, "vol-1", "node-2"))
			s.Settle()
			v := vol(t, s, "vol-1")
			require.Equal(t, dataplane.SwitchoverSwitchingOver, v.Switchover)
			require.Equal(t, "node-1", v.TargetNode)
			require.False(t, v.CanSwitchTarget())
		})
	}
}

func TestSetEngineNode_DetachedAndV1Volumes(t *testing.T) {
	s, _ := cluster3(t, Config{}, VolumeSpec{Name: "vol-d", ReplicasOn: three},
		VolumeSpec{Name: "vol-v1", Engine: EngineV1, ReplicasOn: three, AttachedTo: "node-1"})
	require.NoError(t, s.SetEngineNode(ctx, "vol-d", "node-2"), "a detached volume records the engine node")
	v := vol(t, s, "vol-d")
	require.Equal(t, "node-2", v.EngineNode)
	require.Empty(t, v.TargetNode)
	require.NoError(t, s.AttachVolume("vol-d", "node-1"))
	v = vol(t, s, "vol-d")
	require.Equal(t, "node-2", v.TargetNode, "the engine starts on spec.engineNodeID")
	require.True(t, v.TargetReady)
	require.ErrorIs(t, s.SetEngineNode(ctx, "vol-v1", "node-2"), ErrWrongEngine)
}

func TestSetInstanceManagerImage_OnlyInPlace(t *testing.T) {
	s, _ := cluster3(t, Config{})
	require.ErrorIs(t, s.SetInstanceManagerImage(ctx, "im-node-1-1", NewIMImage), dataplane.ErrRefused)
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

// An IM that runs an instance is refused, as dataplane.Actions asks and the
// Longhorn adapter does; CutInstanceManager (not an upgrade action) deletes
// it all the same, and its initiator is lost.
func TestDeleteInstanceManager_RefusesABusyOne(t *testing.T) {
	s, _ := cluster3(t, Config{}, VolumeSpec{Name: "vol-1", ReplicasOn: []string{"node-2", "node-3"}, AttachedTo: "node-1", EngineOn: "node-2"})
	err := s.DeleteInstanceManager(ctx, "im-node-1-1")
	require.ErrorIs(t, err, dataplane.ErrRefused)
	assert.EqualError(t, err, `delete instance manager "im-node-1-1": refused: it runs 0 engine(s), 1 engine frontend(s), 0 replica(s), 0 shard(s)`)
	assert.Equal(t, "im-node-1-1", currentIM(t, s, "node-1").Name)
	assert.Zero(t, s.IOStats().Failed)

	require.NoError(t, s.CutInstanceManager("im-node-1-1"))
	assert.NotZero(t, s.IOStats().FailedByActions())
}
