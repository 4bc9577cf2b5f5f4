package sim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/dataplane"
)

// Each rule of sim/RULES.md, played with the rule on and off: what Longhorn
// v1.12.1 does, and what the simulator would let pass without it.

// switchedBack is vol-1 attached to node-1, its engine placed on node-2
// (so a switch-over from node-2 home to node-1 can be asked), a replica on
// every node.
func switchedBack(t *testing.T, cfg Config) (*Sim, *FakeClock) {
	t.Helper()
	return cluster3(t, cfg, VolumeSpec{Name: "vol-1", ReplicasOn: three, AttachedTo: "node-1", EngineOn: "node-2"})
}

// A replica joining the engine while the initiator is switching paths
// reverts the switch-over (RuleRevertWhileSwitchingOver), and the revert
// leaves the old path inaccessible (RuleRevertLeavesPathDown): I/O queues
// until a later switch-over connects a new path, after the rebuild.
func TestRule_RevertWhileSwitchingOverLeavesThePathDown(t *testing.T) {
	for _, tc := range []struct {
		name     string
		disable  []Rule
		stall    bool
		reverted bool
	}{
		{name: "rules on", stall: true, reverted: true},
		{name: "no revert in switching-over", disable: []Rule{RuleRevertWhileSwitchingOver}},
		{name: "a clean revert", disable: []Rule{RuleRevertLeavesPathDown}, reverted: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, fc := switchedBack(t, Config{TargetMoveLatency: 4 * time.Second, RebuildLatency: 20 * time.Second,
				ReplicaStartLatency: 3500 * time.Millisecond, Disable: tc.disable})
			require.NoError(t, s.SetReplicaScheduling(ctx, "node-3", false))
			retire(t, s, "vol-1", "vol-1-r-3")
			// Scheduling back on: the pass that sees the new engine node
			// reuses the replica (one engine yet), then starts the move.
			require.NoError(t, s.SetReplicaScheduling(ctx, "node-3", true))
			require.NoError(t, s.SetEngineNode(ctx, "vol-1", "node-1"))
			fc.Advance(3 * time.Second)
			require.True(t, vol(t, s, "vol-1").PathsSwitching, "the initiator switches paths when the replica joins")
			fc.Advance(time.Second)
			v := vol(t, s, "vol-1")
			assert.Equal(t, tc.reverted, v.Switchover == dataplane.SwitchoverReverting, "%s", v.Switchover)
			s.Settle()
			v = vol(t, s, "vol-1")
			assert.Equal(t, "node-1", v.TargetNode, "the switch-over ends after the rebuild")
			st := s.IOStats()
			require.Zero(t, st.Failed, "the stall is shorter than the initiator's patience: %s", st)
			if !tc.stall {
				assert.Empty(t, st.Stalls)
				return
			}
			require.Len(t, st.Stalls, 1)
			assert.Greater(t, st.Stalls[0].Duration(st.At), 20*time.Second, "from the revert to the rebuild's end and a new preparation")
			assert.Contains(t, st.Stalls[0].Cause, "Longhorn leaves it so")
		})
	}
}

// Longhorn adds no replica while a volume has two engines
// (RuleReplenishWithOneEngine) or a replica rebuilding
// (RuleOneRebuildPerVolume).
func TestRule_ReplenishOneAtATimeWithOneEngine(t *testing.T) {
	t.Run("two engines", func(t *testing.T) {
		for _, on := range []bool{true, false} {
			var off []Rule
			if !on {
				off = []Rule{RuleReplenishWithOneEngine}
			}
			s, fc := cluster3(t, Config{TargetMoveLatency: time.Hour, RebuildLatency: time.Hour, Disable: off},
				VolumeSpec{Name: "vol-1", ReplicasOn: three, AttachedTo: "node-1"})
			require.NoError(t, s.InjectNodeNotReady("node-3"))
			require.NoError(t, s.SetEngineNode(ctx, "vol-1", "node-2")) // preparing for half an hour
			require.NoError(t, s.SetReplicaScheduling(ctx, "node-3", true))
			require.NoError(t, s.HealNodeNotReady("node-3"))
			fc.Advance(time.Minute)
			assert.Equal(t, !on, vol(t, s, "vol-1").Rebuilding(), "rule on %t: a rebuild during the switch-over", on)
		}
	})
	t.Run("one rebuild at a time", func(t *testing.T) {
		for _, on := range []bool{true, false} {
			var off []Rule
			if !on {
				off = []Rule{RuleOneRebuildPerVolume}
			}
			s, _ := cluster3(t, Config{RebuildLatency: time.Hour, Disable: off},
				VolumeSpec{Name: "vol-1", ReplicasOn: three, AttachedTo: "node-1"})
			require.NoError(t, s.InjectNodeNotReady("node-2"))
			require.NoError(t, s.InjectNodeNotReady("node-3"))
			require.NoError(t, s.HealNodeNotReady("node-2"))
			require.NoError(t, s.HealNodeNotReady("node-3"))
			s.Advance(ReplicaIOTimeout)
			n := 0
			for _, r := range vol(t, s, "vol-1").Replicas {
				if r.State == dataplane.ReplicaRebuilding {
					n++
				}
			}
			want := 1
			if !on {
				want = 2
			}
			assert.Equal(t, want, n, "rule on %t", on)
		}
	})
}

// A new replica elsewhere waits replica-replenishment-wait-interval from
// the moment the volume degraded, while a failed replica could be reused
// (RuleReplenishmentWait), whatever its node's scheduling.
func TestRule_ReplenishmentWait(t *testing.T) {
	for _, on := range []bool{true, false} {
		var off []Rule
		if !on {
			off = []Rule{RuleReplenishmentWait}
		}
		s, _ := cluster3(t, Config{ReplicaReplenishWait: 10 * time.Minute, Disable: off},
			VolumeSpec{Name: "vol-1", ReplicasOn: three, AttachedTo: "node-1"})
		require.NoError(t, s.AddNode("node-4"))
		require.NoError(t, s.SetReplicaScheduling(ctx, "node-3", false))
		retire(t, s, "vol-1", "vol-1-r-3")
		v := vol(t, s, "vol-1")
		at := v.ReplenishAt
		s.Advance(9 * time.Minute)
		_, onNode4 := replicaNodes(vol(t, s, "vol-1"))["node-4"]
		assert.Equal(t, !on, onNode4, "rule on %t: a new replica before the wait is over", on)
		if on {
			assert.Equal(t, DefaultStart.Add(10*time.Minute), at, "ReplenishAt says when")
			s.Advance(time.Minute)
			assert.Contains(t, replicaNodes(vol(t, s, "vol-1")), "node-4", "after the wait")
		}
	}
}

// With fast-replica-rebuild-enabled false for v2 (Config.NoFastReplicaRebuild)
// a failed v2 replica is not waited for: Longhorn builds a new one
// elsewhere at once, where it would otherwise wait
// replica-replenishment-wait-interval for the failed one's node; the
// volume says it will not reuse.
func TestNoReuseWithoutFastRebuild(t *testing.T) {
	for _, fast := range []bool{true, false} {
		s, _ := cluster3(t, Config{ReplicaReplenishWait: 10 * time.Minute, NoFastReplicaRebuild: !fast},
			VolumeSpec{Name: "vol-1", ReplicasOn: three, AttachedTo: "node-1"})
		require.NoError(t, s.AddNode("node-4"))
		assert.Equal(t, !fast, vol(t, s, "vol-1").NoReplicaReuse)
		require.NoError(t, s.SetReplicaScheduling(ctx, "node-3", false))
		retire(t, s, "vol-1", "vol-1-r-3")
		s.Advance(time.Minute)
		_, onNode4 := replicaNodes(vol(t, s, "vol-1"))["node-4"]
		assert.Equal(t, !fast, onNode4, "fast rebuild %t: a new replica elsewhere at once", fast)
	}
}

// A replica stopped while its engine still holds it makes the volume's
// I/O queue for the replica link's timeout (RuleReplicaLinkTimeout); one
// failed first and stopped once out of the engine does not.
func TestRule_ReplicaLinkTimeout(t *testing.T) {
	for _, tc := range []struct {
		name    string
		disable []Rule
		stop    func(t *testing.T, s *Sim)
		stall   time.Duration
	}{
		{name: "failed, then stopped once out of the engine",
			stop: func(t *testing.T, s *Sim) {
				require.NoError(t, s.FailReplica(ctx, "vol-1", "vol-1-r-3"))
				require.ErrorIs(t, s.StopReplica(ctx, "vol-1", "vol-1-r-3"), dataplane.ErrReplicaInEngine, "the engine holds it yet")
				s.Advance(5 * time.Second)
				require.False(t, replicaNamed(t, vol(t, s, "vol-1"), "vol-1-r-3").InEngine)
				require.NoError(t, s.StopReplica(ctx, "vol-1", "vol-1-r-3"))
			}},
		{name: "failed and stopped in one write", stall: ReplicaIOTimeout,
			stop: func(t *testing.T, s *Sim) { require.NoError(t, s.ForceStopReplica("vol-1", "vol-1-r-3")) }},
		{name: "failed and stopped in one write, no link timeout", disable: []Rule{RuleReplicaLinkTimeout},
			stop: func(t *testing.T, s *Sim) { require.NoError(t, s.ForceStopReplica("vol-1", "vol-1-r-3")) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := cluster3(t, Config{ReplicaRemoveLatency: 5 * time.Second, Disable: tc.disable},
				VolumeSpec{Name: "vol-1", ReplicasOn: three, AttachedTo: "node-1"})
			require.NoError(t, s.SetReplicaScheduling(ctx, "node-3", false))
			tc.stop(t, s)
			s.Settle()
			st := s.IOStats()
			require.Zero(t, st.Failed)
			if tc.stall == 0 {
				assert.Empty(t, st.Stalls)
				return
			}
			require.Len(t, st.Stalls, 1)
			assert.Equal(t, tc.stall, st.Stalls[0].Duration(st.At))
			assert.Contains(t, st.Stalls[0].Cause, "the engine's RAID waits on replica vol-1-r-3")
		})
	}
}

// Longhorn deletes an IM in the foreground: its object stays, deleting,
// until its pod is gone, and the node's next IM starts only then
// (RuleIMPodLingers). Deleted in the background, the object goes at once
// and the next IM starts beside the lingering pod, refused for want of
// hugepages until it is gone (RuleIMOverlapFails).
func TestRule_IMPodLingers(t *testing.T) {
	const linger = 30 * time.Second
	for _, tc := range []struct {
		name       string
		foreground bool
		disable    []Rule
		overlap    bool
		errorState bool
	}{
		{name: "foreground", foreground: true},
		{name: "background", overlap: true, errorState: true},
		{name: "background, two SPDK targets admitted", disable: []Rule{RuleIMOverlapFails}, overlap: true},
		{name: "background, no lingering pod", disable: []Rule{RuleIMPodLingers}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, fc := cluster3(t, Config{PodTerminationLatency: linger, Disable: tc.disable},
				VolumeSpec{Name: "vol-1", ReplicasOn: []string{"node-2", "node-3"}, AttachedTo: "node-2"})
			s.Settle()
			ims, err := s.InstanceManagers(ctx, "node-1")
			require.NoError(t, err)
			require.Len(t, ims, 1, "node-1 runs nothing: Longhorn replaced its IM at build, the new one runs")
			require.NoError(t, s.DeleteInstanceManagerObject(ims[0].Name, tc.foreground))
			after, err := s.InstanceManagers(ctx, "node-1")
			require.NoError(t, err)
			if tc.foreground {
				require.Len(t, after, 2)
				assert.True(t, after[1].Deleting, "the deleted IM stays, deleting")
				assert.Equal(t, dataplane.IMStopped, after[0].State, "the next waits for it")
				fc.Advance(linger)
				assert.Equal(t, dataplane.IMRunning, currentIM(t, s, "node-1").State, "its pod gone, the next starts")
			} else if tc.errorState {
				assert.Equal(t, dataplane.IMError, currentIM(t, s, "node-1").State, "OutOfhugepages beside the lingering pod")
			}
			s.Settle()
			assert.Equal(t, dataplane.IMRunning, currentIM(t, s, "node-1").State)
			overlaps := 0
			for _, u := range s.Unsafe("node-2") {
				if u.Kind == UnsafeIMOverlap {
					overlaps++
				}
			}
			assert.Equal(t, tc.overlap, overlaps > 0)
		})
	}
}

// No IM pod starts on a cordoned node (RuleNoIMOnCordonedNode).
func TestRule_NoIMOnCordonedNode(t *testing.T) {
	for _, on := range []bool{true, false} {
		var off []Rule
		if !on {
			off = []Rule{RuleNoIMOnCordonedNode}
		}
		s, _ := cluster3(t, Config{IMStartLatency: time.Second, Disable: off})
		require.NoError(t, s.Cordon("node-1"))
		require.True(t, nodeOf(t, s, "node-1").Cordoned)
		require.NoError(t, s.DeleteInstanceManager(ctx, currentIM(t, s, "node-1").Name))
		s.Advance(time.Hour)
		assert.Equal(t, !on, currentIM(t, s, "node-1").State == dataplane.IMRunning, "rule on %t", on)
		require.NoError(t, s.Uncordon("node-1"))
		s.Settle()
		assert.Equal(t, dataplane.IMRunning, currentIM(t, s, "node-1").State, "uncordoned: it starts")
	}
}

// A switch-over of a blockdev volume attached to a node whose kernel has no
// native NVMe multipath leaves its device without a path
// (RuleNoSecondPathWithoutMultipath): I/O queues from the initiator's
// switching phase on, and the volume's path stays down after the target
// moved; an nvmf volume (its initiator is not the node's kernel) keeps its
// I/O. The reading shows on the node and on the volumes attached there.
func TestRule_NoSecondPathWithoutMultipath(t *testing.T) {
	for _, tc := range []struct {
		name     string
		frontend string
		disable  []Rule
		lost     bool
	}{
		{name: "rule on", lost: true},
		{name: "rule off", disable: []Rule{RuleNoSecondPathWithoutMultipath}},
		{name: "nvmf frontend", frontend: dataplane.FrontendNVMf},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := cluster3(t, Config{TargetMoveLatency: 4 * time.Second, Disable: tc.disable},
				VolumeSpec{Name: "vol-1", ReplicasOn: three, AttachedTo: "node-1", EngineOn: "node-2", Frontend: tc.frontend})
			require.NoError(t, s.SetMultipath("node-1", dataplane.MultipathOff))
			assert.Equal(t, dataplane.MultipathOff, nodeOf(t, s, "node-1").NVMeMultipath)
			assert.Equal(t, dataplane.MultipathOff, vol(t, s, "vol-1").InitiatorMultipath)
			require.NoError(t, s.SetEngineNode(ctx, "vol-1", "node-3"))
			s.Settle()
			v := vol(t, s, "vol-1")
			require.Equal(t, "node-3", v.TargetNode, "the target moves either way")
			st := s.IOStats()
			if !tc.lost {
				assert.Empty(t, st.Stalls)
				assert.Empty(t, s.Unsafe("node-2"))
				return
			}
			require.NotEmpty(t, st.Stalls)
			assert.Contains(t, st.Stalls[0].Cause, "nvme_core.multipath=N")
			require.NotEmpty(t, s.Unsafe("node-2"), "the path stays down after the move")
			assert.Equal(t, UnsafePathBroken, s.Unsafe("node-2")[0].Kind)
		})
	}
}

// The node controller follows the default-instance-manager-image setting
// (RuleDefaultIMFollowsSetting): a deleted default-image IM comes back; a
// changed setting gets IMs of the new image; a node whose manager runs
// another image gets none.
func TestRule_DefaultIMFollowsSetting(t *testing.T) {
	const v3 = "longhornio/longhorn-instance-manager:v1.12.2"
	t.Run("a deleted default-image IM comes back", func(t *testing.T) {
		s, _ := cluster3(t, Config{})
		first := currentIM(t, s, "node-1")
		require.Equal(t, NewIMImage, first.Image)
		require.NoError(t, s.DeleteInstanceManager(ctx, first.Name))
		s.Settle()
		again := currentIM(t, s, "node-1")
		assert.NotEqual(t, first.Name, again.Name)
		assert.Equal(t, NewIMImage, again.Image)
	})
	for _, on := range []bool{true, false} {
		t.Run(map[bool]string{true: "the setting changed", false: "the setting changed, not followed"}[on], func(t *testing.T) {
			var off []Rule
			if !on {
				off = []Rule{RuleDefaultIMFollowsSetting}
			}
			s, _ := cluster3(t, Config{Disable: off})
			require.NoError(t, s.SetDefaultIMImage(v3))
			s.Settle()
			img, err := s.DefaultInstanceManagerImage(ctx)
			require.NoError(t, err)
			assert.Equal(t, v3, img, "the setting reads the new value")
			want := NewIMImage
			if on {
				want = v3
			}
			assert.Equal(t, want, currentIM(t, s, "node-1").Image, "an idle IM of another image replaced")
		})
	}
	t.Run("no IM created by a manager on another image", func(t *testing.T) {
		s, _ := cluster3(t, Config{})
		require.NoError(t, s.SetManagerImage("node-1", OldIMImage))
		require.NoError(t, s.DeleteInstanceManager(ctx, currentIM(t, s, "node-1").Name))
		s.Settle()
		ims, err := s.InstanceManagers(ctx, "node-1")
		require.NoError(t, err)
		assert.Empty(t, ims)
		require.NoError(t, s.SetManagerImage("node-1", NewIMImage))
		s.Settle()
		assert.Equal(t, dataplane.IMRunning, currentIM(t, s, "node-1").State, "rolled out: created")
	})
}

// Longhorn's in-use check of an old-image IM counts no shard
// (RuleShardsNotCounted): emptied of everything else, it goes with its
// shards.
func TestRule_ShardsNotCounted(t *testing.T) {
	for _, on := range []bool{true, false} {
		var off []Rule
		if !on {
			off = []Rule{RuleShardsNotCounted}
		}
		s, _ := cluster3(t, Config{Disable: off}, VolumeSpec{Name: "vol-1", ReplicasOn: three, AttachedTo: "node-2"})
		require.NoError(t, s.SetShards("node-1", 2))
		assert.Equal(t, 2, currentIM(t, s, "node-1").Shards)
		require.ErrorIs(t, s.DeleteInstanceManager(ctx, currentIM(t, s, "node-1").Name), dataplane.ErrRefused, "no data plane deletes it")
		require.NoError(t, s.SetReplicaScheduling(ctx, "node-1", false))
		retire(t, s, "vol-1", "vol-1-r-1")
		s.Settle()
		lost := false
		for _, u := range s.Unsafe("node-2") {
			lost = lost || u.Kind == UnsafeShardsLost
		}
		assert.Equal(t, on, lost, "rule on %t: Longhorn removed the IM with its shards", on)
	}
}

// The I/O checker: a volume without a usable path queues I/O; each queue
// over StallThreshold is a stall, and I/O queued QueueTimeout fails.
func TestIOChecker_QueuesThenFails(t *testing.T) {
	s, fc := cluster3(t, Config{TargetMoveLatency: 4 * time.Second},
		VolumeSpec{Name: "vol-1", ReplicasOn: three, AttachedTo: "node-1"})
	s.SetPhase("node-1/test")
	require.NoError(t, s.SetEngineNode(ctx, "vol-1", "node-2"))
	fc.Advance(3 * time.Second)                    // switching: only the new path serves
	require.NoError(t, s.PlaceEngine("vol-1", "")) // withdrawn there: the old path stays down
	fc.Advance(500 * time.Millisecond)
	st := s.IOStats()
	require.Zero(t, st.Failed)
	assert.Empty(t, st.Stalls, "half a second is no stall")
	assert.NotZero(t, st.Queued)
	fc.Advance(time.Second)
	st = s.IOStats()
	require.Len(t, st.Stalls, 1, "still queued past StallThreshold: a stall, lasting")
	assert.True(t, st.Stalls[0].End.IsZero())
	assert.Equal(t, "node-1/test", st.Stalls[0].Phase)
	assert.Equal(t, st.Stalls[0], st.WorstStall())
	fc.Advance(QueueTimeout)
	st = s.IOStats()
	require.NotZero(t, st.FailedByActions(), "queued for ctrl-loss-tmo: failed")
	assert.Contains(t, st.Failures[0].Reason, "I/O queued for 30s failed (the initiator's ctrl-loss-tmo)")
}

func replicaNamed(t *testing.T, v dataplane.Volume, name string) dataplane.Replica {
	t.Helper()
	for _, r := range v.Replicas {
		if r.Name == name {
			return r
		}
	}
	require.Failf(t, "no replica", "volume %s has no replica %s", v.Name, name)
	return dataplane.Replica{}
}
