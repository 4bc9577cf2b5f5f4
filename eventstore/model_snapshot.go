package eventstore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// ModelSnapshotKeyPrefix is the prefix of read-model snapshot keys
// ("model.<token>"): state folded across many aggregates (the orchestrator's
// upgrades in progress), as opposed to one aggregate's (SnapshotKey).
const ModelSnapshotKeyPrefix = "model."

// ModelSnapshotKey is the key of read model name's snapshot.
func ModelSnapshotKey(name string) string { return ModelSnapshotKeyPrefix + kvToken(name) }

// modelSnapshot is a snapshot that also names the stream incarnation it was
// folded from: a read model's sequence covers every aggregate, so one taken
// from a stream since deleted and created again under the same name would
// otherwise be taken for the new stream's state at that sequence.
type modelSnapshot struct {
	snapshot
	Stream  string    `json:"stream"`
	Created time.Time `json:"created"`
}

// SaveModelSnapshot stores state as read model name's state after folding
// every event of its subjects up to stream sequence seq. schema is as for
// SaveSnapshot. Like SaveSnapshot, it does nothing on a store opened with
// Config.ReadOnlySnapshots.
func (s *Store) SaveModelSnapshot(ctx context.Context, name, schema string, seq uint64, state any) error {
	if s.cfg.ReadOnlySnapshots {
		return nil
	}
	raw, err := json.Marshal(state)
	if err != nil {
		return fmt.Errorf("eventstore: snapshot of %s: %w", name, err)
	}
	b, err := json.Marshal(modelSnapshot{
		snapshot: snapshot{Format: snapshotFormat, Schema: schema, Sequence: seq, State: raw},
		Stream:   s.cfg.Stream, Created: s.stream.CachedInfo().Created,
	})
	if err != nil {
		return fmt.Errorf("eventstore: snapshot of %s: %w", name, err)
	}
	if _, err := s.snaps.Put(ctx, ModelSnapshotKey(name), b); err != nil {
		return fmt.Errorf("eventstore: snapshot of %s: %w", name, err)
	}
	return nil
}

// LoadModelSnapshot decodes read model name's snapshot into into and returns
// the sequence it was folded to; ok is false when there is none usable: none
// stored, another format or schema, a value that does not decode, or one
// taken from another stream (name or incarnation) or past this stream's last
// sequence. When ok is false, into may have been partly written and is to be
// discarded.
//
// A usable snapshot is still only the state up to its sequence: the caller
// folds the stream's events after it before trusting the model, since the
// history, not the snapshot, is the truth.
func (s *Store) LoadModelSnapshot(ctx context.Context, name, schema string, into any) (seq uint64, ok bool, err error) {
	var snap modelSnapshot
	found, err := s.readSnapshot(ctx, ModelSnapshotKey(name), &snap)
	if err != nil {
		return 0, false, fmt.Errorf("eventstore: snapshot of %s: %w", name, err)
	}
	if !found || !snap.is(schema) || snap.Stream != s.cfg.Stream {
		return 0, false, nil
	}
	info, err := s.stream.Info(ctx)
	if err != nil {
		return 0, false, fmt.Errorf("eventstore: snapshot of %s: stream %s info: %w", name, s.cfg.Stream, err)
	}
	if !snap.Created.Equal(info.Created) || snap.Sequence > info.State.LastSeq {
		return 0, false, nil
	}
	if json.Unmarshal(snap.State, into) != nil {
		return 0, false, nil
	}
	return snap.Sequence, true, nil
}
