package sim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/dataplane"
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

// Failures are episodes: one log entry per volume and reason, with the
// number of failed I/Os, and a new episode when the reason changes.
func TestIO_FailureEpisodes(t *testing.T) {
	s, fc := cluster3(t, Config{Profile: dataplane.ProfileInPlace, IMStartLatency: time.Minute},
		VolumeSpec{Name: "vol-1", ReplicasOn: []string{"node-2", "node-3"}, AttachedTo: "node-1"})
	require.NoError(t, s.SetInstanceManagerImage(ctx, "im-node-1-1", NewIMImage))
	start := fc.Now()
	fc.Advance(time.Second)
	require.Equal(t, 1, s.CheckIO())
	s.Advance(time.Minute)
	// The engine died with its IM's process: only attaching again helps.
	require.NoError(t, s.DetachVolume("vol-1"))
	require.NoError(t, s.AttachVolume("vol-1", "node-1"))
	require.Zero(t, s.CheckIO())

	st := s.IOStats()
	require.Len(t, st.Failures, 1)
	f := st.Failures[0]
	require.Equal(t, IOFailure{
		Volume: "vol-1", Node: "node-1", InstanceManager: "im-node-1-1",
		Reason: "target on node-1 lost: instance manager im-node-1-1 was stopped",
		First:  start, Last: start.Add(time.Minute), Count: 3,
	}, f)
	require.Equal(t, uint64(3), st.Failed)
	require.Equal(t, uint64(3), st.FailedByActions())
	require.Contains(t, st.String(), "vol-1: target on node-1 lost")

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
	s, fc := cluster3(t, Config{IMStartLatency: time.Minute, TargetMoveLatency: time.Minute},
		VolumeSpec{Name: "vol-away", ReplicasOn: three, AttachedTo: "node-1", EngineOn: "node-2"},
		VolumeSpec{Name: "vol-moved", ReplicasOn: []string{"node-2", "node-3"}, AttachedTo: "node-3"},
		VolumeSpec{Name: "vol-down", ReplicasOn: []string{"node-2", "node-3"}, AttachedTo: "node-2", EngineOn: "node-1"},
		VolumeSpec{Name: "vol-lost", ReplicasOn: []string{"node-3"}, AttachedTo: "node-2"},
		VolumeSpec{Name: "vol-ok", ReplicasOn: three, AttachedTo: "node-2"})
	require.NoError(t, s.SetEngineNode(ctx, "vol-moved", "node-2"))
	fc.Advance(time.Second)
	require.NoError(t, s.CutInstanceManager("im-node-1-1"))
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
		"vol-away":  {UnsafeInitiatorDown},
		"vol-moved": {UnsafeSwitchover, UnsafeEngineMoved},
		"vol-down":  {UnsafeTargetDown},
		"vol-lost":  {UnsafeNoHealthyReplica},
	}, kinds(s.Unsafe("")))
	// With node-3 in flight its volume's engine may be moved.
	require.Equal(t, map[string][]UnsafeKind{
		"vol-away": {UnsafeInitiatorDown},
		"vol-down": {UnsafeTargetDown},
		"vol-lost": {UnsafeNoHealthyReplica},
	}, kinds(s.Unsafe("node-3")))

	// Injected causes are flagged so a property test can tell them apart.
	s2, _ := cluster3(t, Config{}, VolumeSpec{Name: "vol-1", ReplicasOn: three, AttachedTo: "node-2", EngineOn: "node-1"})
	require.NoError(t, s2.InjectNodeNotReady("node-1"))
	us := s2.Unsafe("node-2")
	require.Len(t, us, 1)
	require.Equal(t, UnsafeTargetDown, us[0].Kind)
	require.True(t, us[0].Injected)
}
