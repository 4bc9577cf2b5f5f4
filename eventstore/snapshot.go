package eventstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/switchback-dev/switchback/events"
)

// Snapshots are a cache, never the truth: a missing, stale, corrupt or
// foreign-schema snapshot only means a longer fold from the stream.

type snapshot struct {
	// Format is snapshotFormat; a value without it (or with another) was
	// written under another key layout and is ignored.
	Format   int             `json:"format"`
	Schema   string          `json:"schema"`
	Sequence uint64          `json:"seq"`
	State    json.RawMessage `json:"state"`
}

// snapshotFormat is the layout of snapshot keys and values. 2: keys per node
// (node.<token>.<hash>) and per manager (mgr.<hash>), so that NATS
// permissions can confine a worker's writes to its own node's keys. Format 1
// keys (agg.<hash>) are never read again.
const snapshotFormat = 2

// kvToken encodes s as one KV key token: events.EncodeToken, whose escape
// character '~' KV keys do not allow, with '=' (never in its output) in its
// place. Only [-_=a-zA-Z0-9] remain, and the encoding stays reversible.
func kvToken(s string) string {
	return strings.ReplaceAll(events.EncodeToken(s), "~", "=")
}

// NodeSnapshotKeyPrefix is the prefix of the snapshot keys of node's
// aggregates under every manager ("node.<token>."): natsauth lets node's
// worker write the keys under it and no others.
func NodeSnapshotKeyPrefix(node string) string {
	return "node." + kvToken(node) + "."
}

// ManagerSnapshotKeyPrefix is the prefix of every manager's snapshot key.
const ManagerSnapshotKeyPrefix = "mgr."

// SnapshotKey is agg's key in the snapshot bucket: its kind (and node) in
// clear, then a hash of its subject (subjects can be longer than a key
// should be).
func SnapshotKey(agg events.AggregateID) string {
	sum := sha256.Sum256([]byte(agg.Subject()))
	h := hex.EncodeToString(sum[:16])
	if agg.IsNode() {
		return NodeSnapshotKeyPrefix(agg.Node) + h
	}
	return ManagerSnapshotKeyPrefix + h
}

// SaveSnapshot stores state as agg's state at stream sequence seq. schema names
// the state's Go shape (e.g. "manager/v1"); change it whenever the shape
// changes so old snapshots are ignored rather than misread.
//
// On a node worker's store (Config.ReadOnlySnapshots) it does nothing: its
// NATS user may not write the bucket, and a denied write would only time
// out. Snapshots are the controller's to refresh.
func (s *Store) SaveSnapshot(ctx context.Context, agg events.AggregateID, schema string, seq uint64, state any) error {
	if s.cfg.ReadOnlySnapshots {
		return nil
	}
	raw, err := json.Marshal(state)
	if err != nil {
		return fmt.Errorf("eventstore: snapshot %s: %w", agg, err)
	}
	b, err := json.Marshal(snapshot{Format: snapshotFormat, Schema: schema, Sequence: seq, State: raw})
	if err != nil {
		return fmt.Errorf("eventstore: snapshot %s: %w", agg, err)
	}
	if _, err := s.snaps.Put(ctx, SnapshotKey(agg), b); err != nil {
		return fmt.Errorf("eventstore: snapshot %s: %w", agg, err)
	}
	return nil
}

// loadSnapshot decodes agg's snapshot into into; ok is false when there is no
// usable one.
//
// A snapshot is a plain KV put, without headers. One that carries any is a
// message JetStream published on the key for someone else (the answer to a
// request whose reply subject named the key: NATS checks no permission on
// reply subjects) and is ignored, so no client can plant a state that way.
func (s *Store) loadSnapshot(ctx context.Context, agg events.AggregateID, schema string, into any) (seq uint64, ok bool, err error) {
	var snap snapshot
	found, err := s.readSnapshot(ctx, SnapshotKey(agg), &snap)
	if err != nil {
		return 0, false, fmt.Errorf("eventstore: snapshot %s: %w", agg, err)
	}
	if !found || !snap.is(schema) || json.Unmarshal(snap.State, into) != nil {
		return 0, false, nil
	}
	return snap.Sequence, true, nil
}

// readSnapshot decodes the value of key (see snapshotValue) into snap;
// found is false when there is none, or it does not decode.
func (s *Store) readSnapshot(ctx context.Context, key string, snap any) (found bool, err error) {
	value, err := s.snapshotValue(ctx, key)
	if err != nil || value == nil {
		return false, err
	}
	return json.Unmarshal(value, snap) == nil, nil
}

// is reports whether the snapshot has this layout and schema.
func (s snapshot) is(schema string) bool { return s.Format == snapshotFormat && s.Schema == schema }

// Loaded is an aggregate's folded state.
type Loaded[S any] struct {
	State S
	// Version is what the next Append must expect.
	Version uint64
	// Folded counts events read from the stream (the tail after a snapshot).
	Folded int
	// SnapshotSeq is the sequence of the snapshot used, 0 if none.
	SnapshotSeq uint64
	// Problems lists parked messages and events the fold rejected; the
	// aggregate is still usable, and the caller reports them.
	Problems []error
}

// Snapshotting asks LoadState to use and refresh snapshots.
type Snapshotting struct {
	// Schema identifies the state's shape; see SaveSnapshot.
	Schema string
	// Every: refresh the snapshot when at least this many events were folded
	// from the stream; 0 never writes.
	Every int
}

// LoadState folds agg's history into a state, starting from a snapshot when
// snap is non-nil and one is usable.
func LoadState[S any](ctx context.Context, s *Store, agg events.AggregateID, zero S, fold func(S, events.Envelope) (S, error), snap *Snapshotting) (Loaded[S], error) {
	out := Loaded[S]{State: zero}
	if snap != nil {
		var st S
		seq, ok, err := s.loadSnapshot(ctx, agg, snap.Schema, &st)
		if err != nil {
			return Loaded[S]{}, err
		}
		if ok {
			out.State, out.SnapshotSeq = st, seq
		}
	}
	h, err := s.LoadAfter(ctx, agg, out.SnapshotSeq)
	if err != nil {
		return Loaded[S]{}, err
	}
	out.Version = h.Version
	out.Folded = len(h.Events)
	for _, p := range h.Parked {
		out.Problems = append(out.Problems, p)
	}
	for _, e := range h.Events {
		next, err := fold(out.State, e)
		if err != nil {
			out.Problems = append(out.Problems, fmt.Errorf("event seq %d %s: %w", e.Sequence, e.Type(), err))
			continue
		}
		out.State = next
	}
	if snap != nil && snap.Every > 0 && out.Folded >= snap.Every {
		if err := s.SaveSnapshot(ctx, agg, snap.Schema, out.Version, out.State); err != nil {
			out.Problems = append(out.Problems, err)
		}
	}
	return out, nil
}

// snapshotValue is the value of key in the snapshot bucket, by a direct get
// of its last message; nil when there is none, or when the stored message
// carries headers of its own (see loadSnapshot): the answer then holds more
// than the one copy of each header the direct get adds.
func (s *Store) snapshotValue(ctx context.Context, key string) ([]byte, error) {
	prefix := s.apiPrefix()
	bucket := s.cfg.SnapshotBucket
	msg, err := s.js.Conn().RequestWithContext(ctx, prefix+"DIRECT.GET.KV_"+bucket+".$KV."+bucket+"."+key, nil)
	if err != nil {
		return nil, err
	}
	if status := msg.Header.Get(hdrStatus); status != "" {
		if status == "404" {
			return nil, nil
		}
		return nil, fmt.Errorf("direct get of %s: status %s %s", key, status, msg.Header.Get(hdrDescription))
	}
	if msg.Header.Get("KV-Operation") != "" {
		return nil, nil // a delete or purge marker
	}
	if len(ownReservedHeaders(msg.Header, 1)) > 0 || !onlyReserved(msg.Header) {
		return nil, nil // not a snapshot Switchback wrote
	}
	return msg.Data, nil
}

// onlyReserved reports whether every header of h is one a direct get adds.
func onlyReserved(h nats.Header) bool {
	for k := range h {
		if i := reservedIndex(k); i < 0 || i >= servedHeaders {
			return false
		}
	}
	return true
}
