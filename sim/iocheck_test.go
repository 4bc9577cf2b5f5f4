package sim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestIO_CountsOneIOPerAttachedVolumePerRound(t *testing.T) {
	s, _ := cluster3(t, Config{},
		VolumeSpec{Name: "vol-1", ReplicasOn: three, AttachedTo: "node-1"},
		VolumeSpec{Name: "vol-2", ReplicasOn: three, AttachedTo: "node-2"},
		VolumeSpec{Name: "vol-d", ReplicasOn: three})
	require.Zero(t, s.CheckIO())
	require.Zero(t, s.CheckIO())
	st := s.IOStats()
	require.Equal(t, uint64(4), st.Issued)
	require.Zero(t, st.Failed)
}

// The initiator is a kernel NVMe-oF initiator: an IM restart on its own node
// does not touch it, only a target living in that IM.
func TestIO_InitiatorSurvivesItsNodesIMRestart(t *testing.T) {
	s, _ := cluster3(t, Config{IMStartLatency: time.Minute},
		VolumeSpec{Name: "vol-1", ReplicasOn: []string{"node-2", "node-3"}, AttachedTo: "node-1", TargetOn: "node-2"})
	require.NoError(t, s.DeleteInstanceManager(ctx, "im-node-1-1"))
	require.Zero(t, s.CheckIO())
	require.Zero(t, s.IOStats().Failed)
}

// Failures are episodes: one log entry per volume and reason, with the
// number of failed I/Os, and a new episode when the reason changes.
func TestIO_FailureEpisodes(t *testing.T) {
	s, fc := cluster3(t, Config{IMStartLatency: time.Minute},
		VolumeSpec{Name: "vol-1", ReplicasOn: []string{"node-2", "node-3"}, AttachedTo: "node-1"})
	require.NoError(t, s.DeleteInstanceManager(ctx, "im-node-1-1"))
	start := fc.Now()
	fc.Advance(time.Second)
	require.Equal(t, 1, s.CheckIO())
	s.Advance(time.Minute)
	require.Zero(t, s.CheckIO())

	st := s.IOStats()
	require.Len(t, st.Failures, 1)
	f := st.Failures[0]
	require.Equal(t, IOFailure{
		Volume: "vol-1", Node: "node-1", InstanceManager: "im-node-1-1",
		Reason: "target on node-1: instance manager im-node-1-1 stopped (replacement im-node-1-2 starting)",
		First:  start, Last: start.Add(time.Second), Count: 2,
	}, f)
	require.Equal(t, uint64(2), st.Failed)
	require.Equal(t, uint64(2), st.FailedByActions())
	require.Contains(t, st.String(), "vol-1: target on node-1")

	s.ResetIOStats()
	require.Zero(t, s.IOStats().Issued)
}

func TestIO_LogIsBounded(t *testing.T) {
	s, _ := cluster3(t, Config{IOLogLimit: 1},
		VolumeSpec{Name: "vol-1", ReplicasOn: three, AttachedTo: "node-1"},
		VolumeSpec{Name: "vol-2", ReplicasOn: three, AttachedTo: "node-1"})
	require.NoError(t, s.InjectNodeNotReady("node-1"))
	st := s.IOStats()
	require.Len(t, st.Failures, 1)
	require.Equal(t, 1, st.Dropped)
	require.Equal(t, uint64(2), st.FailedInjected)
}

func TestUnsafe(t *testing.T) {
	s, _ := cluster3(t, Config{IMStartLatency: time.Minute},
		VolumeSpec{Name: "vol-away", ReplicasOn: three, AttachedTo: "node-1", TargetOn: "node-2"},
		VolumeSpec{Name: "vol-down", ReplicasOn: []string{"node-2", "node-3"}, AttachedTo: "node-3"},
		VolumeSpec{Name: "vol-lost", ReplicasOn: []string{"node-3"}, AttachedTo: "node-2"},
		VolumeSpec{Name: "vol-ok", ReplicasOn: three, AttachedTo: "node-2"})
	require.NoError(t, s.SetTargetNode(ctx, "vol-down", "node-1"))
	require.NoError(t, s.DeleteInstanceManager(ctx, "im-node-1-1"))
	require.NoError(t, s.FailReplica(ctx, "vol-lost", "vol-lost-r-1"))

	kinds := func(us []Unsafe) map[string][]UnsafeKind {
		out := map[string][]UnsafeKind{}
		for _, u := range us {
			out[u.Volume] = append(out[u.Volume], u.Kind)
			require.False(t, u.Injected, u.String())
		}
		return out
	}
	require.Equal(t, map[string][]UnsafeKind{
		"vol-away": {UnsafeTargetAway, UnsafeOverrideLeft},
		"vol-down": {UnsafeTargetDown, UnsafeTargetAway, UnsafeOverrideLeft},
		"vol-lost": {UnsafeNoHealthyReplica},
	}, kinds(s.Unsafe("")))
	// With node-1 in flight its volume may be switched over.
	require.Equal(t, map[string][]UnsafeKind{
		"vol-down": {UnsafeTargetDown, UnsafeTargetAway, UnsafeOverrideLeft},
		"vol-lost": {UnsafeNoHealthyReplica},
	}, kinds(s.Unsafe("node-1")))

	// Injected causes are flagged so a property test can tell them apart.
	s2, _ := cluster3(t, Config{}, VolumeSpec{Name: "vol-1", ReplicasOn: three, AttachedTo: "node-2", TargetOn: "node-1"})
	require.NoError(t, s2.InjectNodeNotReady("node-1"))
	us := s2.Unsafe("node-2")
	require.Len(t, us, 1)
	require.Equal(t, UnsafeTargetDown, us[0].Kind)
	require.True(t, us[0].Injected)
}
