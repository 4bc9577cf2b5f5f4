package eventstore

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchback-dev/switchback/dedup"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/events/fastcodec"
	"github.com/switchback-dev/switchback/metrics"
)

// PendingAppend is an asynchronous append in flight; Wait gives its outcome.
type PendingAppend struct {
	s        *Store
	agg      events.AggregateID
	expected uint64
	ev       events.Envelope
	msg      *nats.Msg
	fut      jetstream.PubAckFuture
	err      error // set when the publish could not even be sent
}

// AppendAsync starts appending one event to agg, expected at version
// expected, without waiting for the stream's answer: a caller writing to many
// aggregates (a controller issuing decisions for many nodes) keeps one round
// trip in flight per aggregate instead of one for all. The checks are
// Append's, done by the server on the same headers (expected last sequence of
// the subject, Nats-Msg-Id deduplication); Wait maps the answer the way
// Append does, so a conflict is a *ConflictError and a retried success is a
// success.
//
// Appends to one aggregate must not overlap: the second would be checked
// against a version the first is about to change. Several events for one
// aggregate are Append's job (they need each other's sequence).
func (s *Store) AppendAsync(agg events.AggregateID, expected uint64, e events.Envelope) *PendingAppend {
	p := &PendingAppend{s: s, agg: agg, expected: expected, ev: e}
	if e.Aggregate != agg {
		p.err = fmt.Errorf("eventstore: append to %s: event %s belongs to %s", agg, e.ID, e.Aggregate)
		return p
	}
	m, err := fastcodec.Encode(e)
	if err != nil {
		p.err = fmt.Errorf("eventstore: append to %s: %w", agg, err)
		return p
	}
	p.msg = expectLast(m, expected)
	p.fut, err = s.js.PublishMsgAsync(p.msg)
	if err != nil {
		p.err = fmt.Errorf("eventstore: append 1 event to %s: %w", agg, err)
	}
	return p
}

// Wait returns the aggregate's new version once the stream answered, or the
// append's error (a *ConflictError when another writer moved the aggregate).
func (p *PendingAppend) Wait(ctx context.Context) (uint64, error) {
	if p.err != nil {
		return 0, p.err
	}
	var err error
	select {
	case ack := <-p.fut.Ok():
		seq := ack.Sequence
		if ack.Duplicate {
			if seq, err = p.settleDuplicate(ctx, seq); err != nil {
				return p.s.appendFailed(ctx, p.agg, p.expected, []events.Envelope{p.ev}, p.msg, err)
			}
		}
		metrics.EventsAppended.WithLabelValues(string(p.ev.Type())).Inc()
		return seq, nil
	case err = <-p.fut.Err():
	case <-ctx.Done():
		return 0, fmt.Errorf("eventstore: append to %s: %w", p.agg, ctx.Err())
	}
	return p.s.appendFailed(ctx, p.agg, p.expected, []events.Envelope{p.ev}, p.msg, err)
}

// settleDuplicate turns a duplicate answer for the event at seq into the
// event's sequence: seq when the stream holds this event there, else the
// sequence of the event published again under a fresh id (see package dedup).
func (p *PendingAppend) settleDuplicate(ctx context.Context, seq uint64) (uint64, error) {
	same, err := dedup.Holds(ctx, p.s.js, p.s.cfg.Stream, seq, p.msg)
	if err != nil {
		return 0, fmt.Errorf("eventstore: append to %s: check the duplicate at sequence %d: %w", p.agg, seq, err)
	}
	if same {
		return seq, nil
	}
	dedup.Reissue(p.msg, p.s.cfg.Stream, seq, 0)
	return p.s.publishOne(ctx, p.msg)
}

// AppendRequest is one aggregate's part of an AppendBatch.
type AppendRequest struct {
	Aggregate events.AggregateID
	// Expected is the aggregate's version the events were decided on.
	Expected uint64
	Events   []events.Envelope
}

// AppendResult is the outcome of one AppendRequest: the new version, or why
// it was not stored.
type AppendResult struct {
	Version uint64
	Err     error
}

// AppendBatch appends to distinct aggregates at once and returns one result
// per request, in order. Single-event requests are published asynchronously
// (see AppendAsync) and their answers collected together; a request of
// several events goes through Append meanwhile. Requests are independent:
// one conflict does not undo the others. Two requests for the same aggregate
// would check against each other's version and are refused.
func (s *Store) AppendBatch(ctx context.Context, reqs []AppendRequest) []AppendResult {
	out := make([]AppendResult, len(reqs))
	pending := make([]*PendingAppend, len(reqs))
	seen := make(map[events.AggregateID]struct{}, len(reqs))
	for i, r := range reqs {
		if _, dup := seen[r.Aggregate]; dup {
			out[i].Err = fmt.Errorf("eventstore: append batch: %s appears twice", r.Aggregate)
			continue
		}
		seen[r.Aggregate] = struct{}{}
		if len(r.Events) == 1 {
			pending[i] = s.AppendAsync(r.Aggregate, r.Expected, r.Events[0])
		}
	}
	for i, r := range reqs {
		if out[i].Err == nil && len(r.Events) != 1 {
			out[i].Version, out[i].Err = s.Append(ctx, r.Aggregate, r.Expected, r.Events...)
		}
	}
	for i, p := range pending {
		if p != nil {
			out[i].Version, out[i].Err = p.Wait(ctx)
		}
	}
	return out
}
