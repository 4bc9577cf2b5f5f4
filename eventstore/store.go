// Package eventstore keeps Switchback's event history in one JetStream stream:
// one subject per aggregate, optimistic concurrency per subject, Nats-Msg-Id
// deduplication, fast aggregate loads (direct batch get) with optional KV
// snapshots, and ordered scans of the whole stream for projectors and replay.
package eventstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/topology"
)

// Defaults for Config.
const (
	DefaultDuplicateWindow = 2 * time.Minute
)

// Config describes the event stream.
type Config struct {
	// Stream name; default topology.EventStream.
	Stream string
	// Replicas: 1 for an embedded server, 3 for a clustered deployment.
	Replicas int
	// DuplicateWindow bounds Nats-Msg-Id deduplication; default 2 minutes.
	DuplicateWindow time.Duration
	// SnapshotBucket is the KV bucket holding aggregate snapshots; default topology.SnapshotBucket.
	SnapshotBucket string
	// LoadBatch is how many messages one direct batch get returns; default 512.
	LoadBatch int
	// ReadOnlySnapshots is set by a node's worker: LoadState reads
	// snapshots and never writes one. A writer of the bucket could roll it
	// up, purging every key, so workers may not write it (natsauth); the
	// controller refreshes every aggregate's.
	ReadOnlySnapshots bool
	// DirectScans makes Scan read by direct batch gets instead of a
	// consumer of its own: for a reader whose account imports no consumer
	// API (natsauth's reader account). Follow then reads the same way,
	// again whenever the stream's subjects carry a message (the reader's
	// account imports them) and at least every followPoll.
	DirectScans bool
}

func (c *Config) defaults() {
	if c.Stream == "" {
		c.Stream = topology.EventStream
	}
	if c.Replicas == 0 {
		c.Replicas = 1
	}
	if c.DuplicateWindow == 0 {
		c.DuplicateWindow = DefaultDuplicateWindow
	}
	if c.SnapshotBucket == "" {
		c.SnapshotBucket = topology.SnapshotBucket
	}
	if c.LoadBatch == 0 {
		c.LoadBatch = 512
	}
}

// StreamConfig is the JetStream configuration of the event stream. History is
// the system of record, so nothing may delete or purge it, and it is kept on
// disk with limits retention (no age or count limit).
func (c Config) StreamConfig() jetstream.StreamConfig {
	c.defaults()
	return topology.EventStreamConfig(c.Stream, c.Replicas, c.DuplicateWindow)
}

// Store is the event store. It is safe for concurrent use.
type Store struct {
	js     jetstream.JetStream
	cfg    Config
	stream jetstream.Stream
	snaps  jetstream.KeyValue
}

// Open creates or updates the stream and the snapshot bucket and returns a
// Store. Safe to call from every process at start-up: the configuration is
// declarative and converges.
func Open(ctx context.Context, js jetstream.JetStream, cfg Config) (*Store, error) {
	cfg.defaults()
	stream, err := js.CreateOrUpdateStream(ctx, cfg.StreamConfig())
	if err != nil {
		return nil, fmt.Errorf("eventstore: stream %s: %w", cfg.Stream, err)
	}
	snaps, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      cfg.SnapshotBucket,
		Description: "Switchback aggregate snapshots (a cache: deleting it only slows loads)",
		History:     1,
		Storage:     jetstream.FileStorage,
		Replicas:    cfg.Replicas,
	})
	if err != nil {
		return nil, fmt.Errorf("eventstore: snapshot bucket %s: %w", cfg.SnapshotBucket, err)
	}
	return &Store{js: js, cfg: cfg, stream: stream, snaps: snaps}, nil
}

// Stream returns the stream name.
func (s *Store) Stream() string { return s.cfg.Stream }

// JetStream returns the JetStream context the store uses.
func (s *Store) JetStream() jetstream.JetStream { return s.js }

// LastSequence returns the stream's last sequence (0 when empty).
func (s *Store) LastSequence(ctx context.Context) (uint64, error) {
	var p patience
	for {
		info, err := s.stream.Info(ctx)
		if err == nil {
			return info.State.LastSeq, nil
		}
		if err = p.pause(ctx, err); err != nil {
			return 0, fmt.Errorf("eventstore: stream %s info: %w", s.cfg.Stream, err)
		}
	}
}

// ErrConflict is matched (errors.Is) by every *ConflictError.
var ErrConflict = errors.New("concurrency conflict")

// ConflictError reports that an aggregate moved past the version an append
// expected. Actual is its version now; reload, decide again, retry.
type ConflictError struct {
	Aggregate events.AggregateID
	Expected  uint64
	Actual    uint64
	Err       error
}

// Error implements error.
func (e *ConflictError) Error() string {
	return fmt.Sprintf("eventstore: append to %s: expected version %d, actual %d: %v", e.Aggregate, e.Expected, e.Actual, ErrConflict)
}

// Unwrap exposes ErrConflict and the server's error.
func (e *ConflictError) Unwrap() []error { return []error{ErrConflict, e.Err} }
