package sim

import (
	"context"
	"fmt"
	"time"

	"github.com/switchback-dev/switchback/dataplane"
)

// On-demand snapshot hashing as Longhorn v1.12.1 plays it (sim/RULES.md,
// "The bytes a rebuild copies"): a request hashes the user snapshots of
// every serving replica, completes by copying its time into the
// completion, is refused while another is in progress, ignored when
// snapshot data integrity is disabled, and never completes on a volume
// with fewer than two serving replicas or a rebuild under way. The manager
// of the volume's node (its owner: the attached node here) hashes one
// volume at a time.

// RequestSnapshotHashing implements dataplane.SnapshotHasher: the
// volume's spec.snapshotHashingRequestedAt set to at (whole seconds).
func (s *Sim) RequestSnapshotHashing(ctx context.Context, volName string, at time.Time) error {
	at = at.Truncate(time.Second).UTC()
	return s.act(ctx, "RequestSnapshotHashing", volName, at.Format(time.RFC3339), func(now time.Time) (bool, error) {
		v, err := s.volume(volName)
		if err != nil {
			return false, fmt.Errorf("request snapshot hashing: %w", err)
		}
		if v.hashRequested.Equal(at) {
			return false, nil
		}
		if v.hashInProgress() {
			return false, fmt.Errorf("%w: volume %s: previous snapshot hashing request (%s) is still in progress",
				dataplane.ErrRefused, volName, v.hashRequested.Format(time.RFC3339))
		}
		v.hashRequested = at
		if v.integrityDisabled {
			return true, nil // ignored: it never completes
		}
		s.hashGen++
		v.hashGen = s.hashGen
		if s.hashBusy == nil {
			s.hashBusy = map[string]time.Time{}
		}
		due := now
		if busy := s.hashBusy[v.attached]; busy.After(due) {
			due = busy
		}
		due = due.Add(s.hashDuration(v))
		s.hashBusy[v.attached] = due
		s.schedule(&timer{due: due, kind: timerHash, obj: v.name, gen: v.hashGen})
		return true, nil
	})
}

// hashInProgress reports a request not yet complete.
func (v *volume) hashInProgress() bool {
	return !v.hashRequested.IsZero() && !v.hashRequested.Equal(v.hashCompleted)
}

// hashDuration is how long hashing v's user snapshots reads at
// Config.HashBandwidth: the largest replica's, the replicas being read on
// their own nodes at once.
func (s *Sim) hashDuration(v *volume) time.Duration {
	bw := s.cfg.HashBandwidth
	if bw <= 0 {
		return 0
	}
	var most int64
	for _, r := range v.replicas {
		var n int64
		for _, sn := range r.data.snaps {
			if !sn.system && sn.checksum == "" {
				n += sn.size
			}
		}
		most = max(most, n)
	}
	return time.Duration(float64(most) / float64(bw) * float64(time.Second))
}

// finishHashing ends the hashing of request gen of volName: the checksums
// are written and the request completes, or, where the volume cannot hash
// (hashSnapshots), nothing happens and it never completes.
func (s *Sim) finishHashing(volName string, gen uint64) bool {
	v := s.vols[volName]
	if v == nil || v.hashGen != gen || !v.hashInProgress() {
		return false
	}
	s.accountWrites(v, s.now())
	ok, read := s.hashSnapshots(v)
	if !ok {
		return false
	}
	s.hashRead += read
	v.hashCompleted = v.hashRequested
	s.markVolume(v.name)
	return true
}

// hashing is what the volume reports of its hashing.
func (v *volume) hashing() dataplane.SnapshotHashing {
	h := dataplane.SnapshotHashing{Disabled: v.integrityDisabled}
	if !v.hashRequested.IsZero() {
		h.RequestedAt = v.hashRequested.Format(time.RFC3339)
	}
	if !v.hashCompleted.IsZero() {
		h.CompletedAt = v.hashCompleted.Format(time.RFC3339)
	}
	return h
}

// chain is the replica whose snapshot chain the volume reports: the first
// serving one, else the first at all.
func (v *volume) chain() *replica {
	for _, r := range v.replicas {
		if writesTo(r) && r.state == dataplane.ReplicaRunning {
			return r
		}
	}
	if len(v.replicas) > 0 {
		return v.replicas[0]
	}
	return nil
}

// actualSize is status.actualSize: what the reported chain holds.
func (v *volume) actualSize() int64 {
	if r := v.chain(); r != nil {
		return r.data.allocated()
	}
	return 0
}

// Snapshots implements dataplane.Reader: the chain of the volume's first
// serving replica, as Longhorn's Snapshot objects report it.
func (s *Sim) Snapshots(ctx context.Context, volName string) ([]dataplane.Snapshot, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tick()
	v, err := s.volume(volName)
	if err != nil {
		return nil, err
	}
	s.accountWrites(v, s.now())
	r := v.chain()
	if r == nil {
		return nil, nil
	}
	out := make([]dataplane.Snapshot, len(r.data.snaps))
	for i, sn := range r.data.snaps {
		out[i] = dataplane.Snapshot{Name: sn.name, UserCreated: !sn.system, Created: sn.created, Size: sn.size, Checksum: sn.checksum}
		if i > 0 {
			out[i].Parent = r.data.snaps[i-1].name
		}
	}
	return out, nil
}

// HashedBytes is what every finished hashing request read.
func (s *Sim) HashedBytes() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hashRead
}
