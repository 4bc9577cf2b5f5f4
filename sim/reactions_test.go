package sim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/dataplane"
)

// The upgrade's failing-replicas step on a 3-node cluster: a replica failed
// on a node that does not allow scheduling is not reused in the old IM, and
// comes back on the same node once scheduling is allowed again.
func TestRebuild_ReturnsToItsNodeOnceSchedulingIsAllowed(t *testing.T) {
	const imStart, rebuild = 20 * time.Second, time.Minute
	s, fc := cluster3(t, Config{IMStartLatency: imStart, RebuildLatency: rebuild},
		VolumeSpec{Name: "vol-1", ReplicasOn: three, AttachedTo: "node-2", EngineOn: "node-3"})
	require.NoError(t, s.SetReplicaScheduling(ctx, "node-1", false))
	retire(t, s, "vol-1", "vol-1-r-1")
	s.Advance(time.Hour)
	requireDegraded(t, s, "vol-1", "node-1", dataplane.ReplicaStopped, "no reuse in the IM about to be replaced, no spare node")
	im := currentIM(t, s, "node-1")
	require.Equal(t, NewIMImage, im.Image, "node-1 ran nothing else: Longhorn replaced its IM")

	require.NoError(t, s.SetReplicaScheduling(ctx, "node-1", true))
	require.Equal(t, dataplane.ReplicaRebuilding, replicaOnNode(t, vol(t, s, "vol-1"), "node-1").State)
	fc.Advance(rebuild)
	v := vol(t, s, "vol-1")
	require.Equal(t, dataplane.RobustnessHealthy, v.Robustness)
	require.Equal(t, "vol-1-r-1", replicaOnNode(t, v, "node-1").Name)
	require.Zero(t, s.IOStats().Failed)
}

// Advance applies chained latencies at their own due times.
func TestAdvance_ChainsLatencies(t *testing.T) {
	s, _ := cluster3(t, Config{IMStartLatency: 10 * time.Second, RebuildLatency: 10 * time.Second},
		VolumeSpec{Name: "vol-1", ReplicasOn: three, AttachedTo: "node-2"})
	require.NoError(t, s.CutInstanceManager("im-node-1-1"))
	s.Advance(20 * time.Second)
	require.Equal(t, dataplane.RobustnessHealthy, vol(t, s, "vol-1").Robustness)
	due, ok := s.NextDue()
	require.False(t, ok, "nothing pending, got %v", due)
}

func TestRebuild_Placement(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cfg    Config
		setup  func(t *testing.T, s *Sim)
		before map[string]dataplane.ReplicaState // after failing node-1's replica
		after  map[string]dataplane.ReplicaState // after advancing an hour
	}{
		{
			name:   "spare node takes the replica at once",
			before: map[string]dataplane.ReplicaState{"node-1": "stopped", "node-2": "running", "node-3": "running", "node-4": "running"},
		},
		{
			name:   "replenish wait keeps the slot for its node first",
			cfg:    Config{ReplicaReplenishWait: 10 * time.Minute},
			before: map[string]dataplane.ReplicaState{"node-1": "stopped", "node-2": "running", "node-3": "running"},
			after:  map[string]dataplane.ReplicaState{"node-1": "stopped", "node-2": "running", "node-3": "running", "node-4": "running"},
		},
		{
			name:   "spare node without scheduling is not used",
			setup:  func(t *testing.T, s *Sim) { require.NoError(t, s.SetReplicaScheduling(ctx, "node-4", false)) },
			before: map[string]dataplane.ReplicaState{"node-1": "stopped", "node-2": "running", "node-3": "running"},
			after:  map[string]dataplane.ReplicaState{"node-1": "stopped", "node-2": "running", "node-3": "running"},
		},
		{
			name:   "NotReady spare node is not used",
			setup:  func(t *testing.T, s *Sim) { require.NoError(t, s.InjectNodeNotReady("node-4")) },
			before: map[string]dataplane.ReplicaState{"node-1": "stopped", "node-2": "running", "node-3": "running"},
			after:  map[string]dataplane.ReplicaState{"node-1": "stopped", "node-2": "running", "node-3": "running"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := cluster3(t, tc.cfg, VolumeSpec{Name: "vol-1", ReplicasOn: three, AttachedTo: "node-2"})
			require.NoError(t, s.AddNode("node-4"))
			if tc.setup != nil {
				tc.setup(t, s)
			}
			require.NoError(t, s.SetReplicaScheduling(ctx, "node-1", false))
			require.NoError(t, s.FailReplica(ctx, "vol-1", "vol-1-r-1"))
			require.Equal(t, tc.before, replicaNodes(vol(t, s, "vol-1")))
			if tc.after != nil {
				s.Advance(time.Hour)
				require.Equal(t, tc.after, replicaNodes(vol(t, s, "vol-1")))
			}
		})
	}
}

// A rebuild needs a healthy source; a replica that only lost its IM keeps
// its data and is salvaged when the IM returns.
func TestRebuild_SalvagesASingleReplicaAfterItsIMReturns(t *testing.T) {
	s, _ := cluster3(t, Config{IMStartLatency: time.Minute},
		VolumeSpec{Name: "vol-1", ReplicasOn: []string{"node-1"}, AttachedTo: "node-2"})
	require.NoError(t, s.CutInstanceManager("im-node-1-1"))
	v := vol(t, s, "vol-1")
	require.Equal(t, dataplane.RobustnessFaulted, v.Robustness)
	require.Len(t, v.Replicas, 1, "no source: nothing is rebuilt elsewhere")
	s.Settle()
	require.Equal(t, dataplane.RobustnessHealthy, vol(t, s, "vol-1").Robustness)
	st := s.IOStats()
	require.NotZero(t, st.FailedByActions())
	require.Contains(t, st.Failures[0].Reason, "no healthy replica reachable (vol-1-r-1@node-1)")
}

func TestRebuild_DeletedSingleReplicaIsLost(t *testing.T) {
	s, _ := cluster3(t, Config{}, VolumeSpec{Name: "vol-1", ReplicasOn: []string{"node-1"}, AttachedTo: "node-2"})
	require.NoError(t, s.FailReplica(ctx, "vol-1", "vol-1-r-1"))
	require.NoError(t, s.DeleteReplica(ctx, "vol-1", "vol-1-r-1"))
	s.Settle()
	v := vol(t, s, "vol-1")
	require.Equal(t, dataplane.RobustnessFaulted, v.Robustness)
	require.Empty(t, v.Replicas)
}

func TestRobustness(t *testing.T) {
	s, _ := cluster3(t, Config{},
		VolumeSpec{Name: "healthy", ReplicasOn: three},
		VolumeSpec{Name: "degraded", ReplicasOn: []string{"node-1"}, NumberOfReplicas: 4},
		VolumeSpec{Name: "v1", Engine: EngineV1, ReplicasOn: three})
	require.Equal(t, dataplane.RobustnessHealthy, vol(t, s, "healthy").Robustness)
	v := vol(t, s, "degraded")
	require.Equal(t, dataplane.RobustnessDegraded, v.Robustness)
	require.Len(t, v.Replicas, 1, "a detached volume is not replenished")
	require.NoError(t, s.AttachVolume("degraded", "node-2"))
	require.Len(t, vol(t, s, "degraded").Replicas, 3, "attached: 3 nodes cannot hold 4 replicas")
	require.Equal(t, dataplane.RobustnessHealthy, vol(t, s, "v1").Robustness)
}
