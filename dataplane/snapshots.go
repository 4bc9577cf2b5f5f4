package dataplane

import (
	"context"
	"time"
)

// Snapshot is one snapshot of a volume as Longhorn reports it (its
// Snapshot object): what a rebuild of one of the volume's replicas may
// skip, and what it copies.
type Snapshot struct {
	Name string
	// Parent is the snapshot below it in the chain, "" for the first.
	Parent string
	// UserCreated: taken on request (a user's, or the upgrade's), not by
	// Longhorn itself (a rebuild's system snapshot). Only user snapshots
	// are hashed, and the purge before a rebuild removes system ones.
	UserCreated bool
	// Created is its creation time.
	Created time.Time
	// Size is its actual size: the bytes written while it was the head.
	Size int64
	// Checksum is its content's checksum once hashed, "" before.
	Checksum string
}

// SnapshotHashing is what a volume says of its snapshots' hashing: whether
// it can hash them at all, and its on-demand request.
type SnapshotHashing struct {
	// Disabled reports snapshot data integrity disabled for the volume
	// (its spec.snapshotDataIntegrity, or, when that is ignored, the
	// setting snapshot-data-integrity for its data engine): Longhorn then
	// ignores an on-demand request, which never completes.
	Disabled bool
	// RequestedAt is spec.snapshotHashingRequestedAt and CompletedAt
	// status.lastOnDemandSnapshotHashingCompleteAt (RFC 3339, "" when
	// unset): a request hashes every user snapshot taken before it, and is
	// complete once CompletedAt equals it.
	RequestedAt, CompletedAt string
}

// InProgress reports a request not yet complete. Longhorn refuses a new
// request meanwhile (its volume webhook).
func (h SnapshotHashing) InProgress() bool {
	return h.RequestedAt != "" && h.RequestedAt != h.CompletedAt
}

// CompletedSince reports whether a request made at at or later has
// completed: every user snapshot taken before at is hashed. An unreadable
// time is not.
func (h SnapshotHashing) CompletedSince(at time.Time) bool {
	done, err := time.Parse(time.RFC3339, h.CompletedAt)
	return err == nil && !done.Before(at)
}

// HashRequestTime is the time a request made at now carries: whole
// seconds, as RFC 3339 without a fraction writes them, rounded up, and a
// second later still, so that a snapshot taken before now on a clock a
// little ahead (the apiserver's) is taken before the request too.
func HashRequestTime(now time.Time) time.Time {
	return now.Truncate(time.Second).Add(2 * time.Second).UTC()
}

// SnapshotHasher requests the on-demand hashing of a volume's snapshots.
// Only the controller writes the request: it hashes data on every node
// holding a replica of the volume, which a node's worker must not start
// for a volume of another node's.
type SnapshotHasher interface {
	// RequestSnapshotHashing sets the volume's request to at (RFC 3339).
	// Asking for what the volume has is a no-op; a volume gone is an error
	// matching ErrNotFound; a request in progress is refused (ErrRefused),
	// as Longhorn refuses it.
	RequestSnapshotHashing(ctx context.Context, volume string, at time.Time) error
}
