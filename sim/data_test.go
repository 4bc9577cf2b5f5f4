package sim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	mib = int64(1) << 20
	gib = int64(1) << 30
)

// TestRebuildCopiesWhatTheRulesCopy: what rebuilding a reused replica
// copies, in bytes, under v1.12.1's rules. The volume holds 10 GiB, its
// workload writes 1 MiB/s; a user snapshot ("safety") is taken, then
// replica r-2 is failed and reused 100 s later (its start latency).
func TestRebuildCopiesWhatTheRulesCopy(t *testing.T) {
	const window = 100 * time.Second
	written := int64(window/time.Second) * mib
	for _, tc := range []struct {
		name   string
		before func(t *testing.T, s *Sim)
		want   int64
	}{
		{"unhashed: the snapshot is copied whole, and what was written since", func(t *testing.T, s *Sim) {
			takeSnapshot(t, s, "safety")
		}, 10*gib + written},
		{"hashed on both replicas: only what was written since", func(t *testing.T, s *Sim) {
			takeSnapshot(t, s, "safety")
			hash(t, s)
		}, written},
		{"a snapshot deleted clears its child's checksum: the child is copied whole", func(t *testing.T, s *Sim) {
			takeSnapshot(t, s, "older")
			takeSnapshot(t, s, "safety")
			hash(t, s)
			require.NoError(t, s.DeleteSnapshot(ctx, "vol-1", "older"))
		}, 10*gib + written},
		{"a system snapshot below it is purged into it before the rebuild, clearing its checksum", func(t *testing.T, s *Sim) {
			rebuildOnce(t, s) // leaves its system snapshot, 10 GiB and a window's writes, at the bottom
			takeSnapshot(t, s, "safety")
			hash(t, s)
		}, 10*gib + 2*written},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := cluster3(t, Config{ReplicaStartLatency: window},
				VolumeSpec{Name: "vol-1", ReplicasOn: []string{"node-1", "node-2"}, AttachedTo: "node-1", Allocated: 10 * gib, WriteRate: mib})
			tc.before(t, s)
			rec := rebuildOnce(t, s)
			assert.Equal(t, tc.want, rec.Bytes)
			assert.Equal(t, "node-2", rec.Node, "the failed replica reused")
			held, err := s.Allocated("vol-1")
			require.NoError(t, err)
			assert.Equal(t, held["vol-1-r-1"], held["vol-1-r-2"], "both replicas hold the same data after the rebuild")
		})
	}
}

// TestRebuildTimeFollowsBytes: with a rebuild bandwidth, a rebuild lasts
// the bytes it copies over it.
func TestRebuildTimeFollowsBytes(t *testing.T) {
	s, _ := cluster3(t, Config{RebuildBandwidth: 100 * mib, RebuildLatency: time.Hour},
		VolumeSpec{Name: "vol-1", ReplicasOn: []string{"node-1", "node-2"}, AttachedTo: "node-1", Allocated: 10 * gib})
	require.NoError(t, s.FailReplica(ctx, "vol-1", "vol-1-r-2"))
	s.Advance(time.Second)
	recs := s.RebuildRecords()
	require.Len(t, recs, 1)
	assert.Equal(t, 10*gib, recs[0].Bytes, "a head never snapshotted is copied whole")
	assert.Equal(t, 10*gib, recs[0].Full)
	assert.Equal(t, 102400*time.Millisecond, recs[0].Duration, "10 GiB at 100 MiB/s")
	s.Advance(100 * time.Second)
	assert.Equal(t, "rebuilding", string(replicaNamed(t, vol(t, s, "vol-1"), "vol-1-r-2").State), "still copying")
	s.Advance(3 * time.Second)
	assert.Equal(t, "running", string(replicaNamed(t, vol(t, s, "vol-1"), "vol-1-r-2").State), "done once its bytes are copied")
}

func takeSnapshot(t *testing.T, s *Sim, name string) {
	t.Helper()
	require.NoError(t, s.CreateSnapshot(ctx, "vol-1", name))
}

// hash requests the hashing of vol-1's snapshots and waits for it.
func hash(t *testing.T, s *Sim) {
	t.Helper()
	at := s.now().Add(time.Second)
	require.NoError(t, s.RequestSnapshotHashing(ctx, "vol-1", at))
	s.Advance(0)
	require.True(t, vol(t, s, "vol-1").Hashing.CompletedSince(at.Truncate(time.Second)), "hashed")
}

// rebuildOnce fails replica r-2 and lets Longhorn reuse and rebuild it.
func rebuildOnce(t *testing.T, s *Sim) RebuildRecord {
	t.Helper()
	n := len(s.RebuildRecords())
	require.NoError(t, s.FailReplica(ctx, "vol-1", "vol-1-r-2"))
	for range 100 {
		if v := vol(t, s, "vol-1"); len(s.RebuildRecords()) > n && replicaNamed(t, v, "vol-1-r-2").State == "running" {
			break
		}
		s.Advance(10 * time.Second)
	}
	recs := s.RebuildRecords()
	require.Greater(t, len(recs), n, "rebuilt")
	return recs[len(recs)-1]
}
