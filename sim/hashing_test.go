package sim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/dataplane"
)

// On-demand hashing as Longhorn v1.12.1 plays it: a request completes
// once every user snapshot of the serving replicas is hashed, taking what
// it reads at the hash bandwidth; it is refused while another is in
// progress, ignored with data integrity disabled, and never completes
// with a single serving replica.
func TestOnDemandHashing(t *testing.T) {
	at := func(s *Sim) time.Time { return s.now().Truncate(time.Second).Add(time.Second) }
	tests := []struct {
		name     string
		spec     VolumeSpec
		cfg      Config
		advance  time.Duration
		complete bool
		read     int64
	}{
		{name: "two serving replicas: hashed, every user snapshot read on each",
			spec: VolumeSpec{ReplicasOn: []string{"node-1", "node-2"}}, complete: true, read: 2 * gib},
		{name: "at a hash bandwidth: not before it read the largest replica's",
			spec: VolumeSpec{ReplicasOn: []string{"node-1", "node-2"}}, cfg: Config{HashBandwidth: 100 * mib}, advance: 10 * time.Second},
		{name: "at a hash bandwidth, once read", spec: VolumeSpec{ReplicasOn: []string{"node-1", "node-2"}},
			cfg: Config{HashBandwidth: 100 * mib}, advance: 11 * time.Second, complete: true, read: 2 * gib},
		{name: "one serving replica: never completes", spec: VolumeSpec{ReplicasOn: []string{"node-1"}}, advance: time.Hour},
		{name: "data integrity disabled: ignored", spec: VolumeSpec{ReplicasOn: []string{"node-1", "node-2"}, IntegrityDisabled: true}, advance: time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := tt.spec
			spec.Name, spec.AttachedTo, spec.Allocated = "vol-1", "node-1", gib
			s, _ := cluster3(t, tt.cfg, spec)
			takeSnapshot(t, s, "safety")
			when := at(s)
			require.NoError(t, s.RequestSnapshotHashing(ctx, "vol-1", when))
			s.Advance(tt.advance)
			v := vol(t, s, "vol-1")
			assert.Equal(t, when.Format(time.RFC3339), v.Hashing.RequestedAt)
			assert.Equal(t, tt.complete, v.Hashing.CompletedSince(when), "%+v", v.Hashing)
			assert.Equal(t, tt.read, s.HashedBytes())
			snaps, err := s.Snapshots(ctx, "vol-1")
			require.NoError(t, err)
			require.Len(t, snaps, 1)
			assert.Equal(t, tt.complete, snaps[0].Checksum != "", "the snapshot's checksum")
			assert.Equal(t, gib, snaps[0].Size)
			assert.True(t, snaps[0].UserCreated)
		})
	}
}

// TestHashingOneVolumeAtATimeANode: two volumes owned by one node hash one
// after the other.
func TestHashingOneVolumeAtATimeANode(t *testing.T) {
	s, _ := cluster3(t, Config{HashBandwidth: 100 * mib},
		VolumeSpec{Name: "vol-1", ReplicasOn: []string{"node-1", "node-2"}, AttachedTo: "node-1", Allocated: gib},
		VolumeSpec{Name: "vol-2", ReplicasOn: []string{"node-1", "node-2"}, AttachedTo: "node-1", Allocated: gib})
	at := s.now().Truncate(time.Second).Add(time.Second)
	for _, v := range []string{"vol-1", "vol-2"} {
		require.NoError(t, s.CreateSnapshot(ctx, v, "safety"))
		require.NoError(t, s.RequestSnapshotHashing(ctx, v, at))
	}
	s.Advance(11 * time.Second)
	assert.True(t, vol(t, s, "vol-1").Hashing.CompletedSince(at), "the first: 1 GiB at 100 MiB/s")
	assert.False(t, vol(t, s, "vol-2").Hashing.CompletedSince(at), "the second waits for it")
	s.Advance(10 * time.Second)
	assert.True(t, vol(t, s, "vol-2").Hashing.CompletedSince(at))
}

func TestHashingRequestInProgressRefusesAnother(t *testing.T) {
	s, _ := cluster3(t, Config{}, VolumeSpec{Name: "vol-1", ReplicasOn: []string{"node-1"}, AttachedTo: "node-1", Allocated: gib})
	first := s.now().Truncate(time.Second).Add(time.Second)
	require.NoError(t, s.RequestSnapshotHashing(ctx, "vol-1", first))
	require.NoError(t, s.RequestSnapshotHashing(ctx, "vol-1", first), "the same request again is a no-op")
	err := s.RequestSnapshotHashing(ctx, "vol-1", first.Add(time.Minute))
	require.ErrorIs(t, err, dataplane.ErrRefused, "one serving replica: the first never completes, and a second is refused")
	assert.Contains(t, err.Error(), "still in progress")
}
