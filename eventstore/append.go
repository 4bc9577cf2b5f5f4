package eventstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/synadia-io/orbit.go/jetstreamext"

	"github.com/switchback-dev/switchback/dedup"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/events/fastcodec"
	"github.com/switchback-dev/switchback/metrics"
)

// Append stores evs on agg's subject if the aggregate is still at version
// expected (the stream sequence of its last event; 0 = no event yet) and
// returns the new version.
//
// Several events are committed as one atomic batch on replicated streams. On
// a single-replica file stream JetStream stages every atomic batch in a file
// store of its own, which costs milliseconds of file system work per
// decision, so there a small decision's events are published each with its
// own concurrency check against the previous one: nothing can interleave,
// but a crash may store a prefix of the decision. The deciders are written
// for that: deciding the same command again on the prefix produces exactly
// the rest. From batchFrom events (a node's volume states: hundreds of
// events) one round trip per event costs more than the staging, and the
// batch is used there too.
//
// Retrying an Append that succeeded (e.g. after a timeout) succeeds again
// without storing anything twice: Nats-Msg-Id deduplicates, and a concurrency
// rejection whose last stored message is our last event (the same message,
// not only its id) is recognised as our own earlier success. Deduplication never loses an event: a duplicate
// answer counts only when the stream holds this very event, on this subject
// (see package dedup); an id another message took is replaced.
func (s *Store) Append(ctx context.Context, agg events.AggregateID, expected uint64, evs ...events.Envelope) (uint64, error) {
	if len(evs) == 0 {
		return expected, nil
	}
	msgs := make([]*nats.Msg, len(evs))
	for i, e := range evs {
		if e.Aggregate != agg {
			return 0, fmt.Errorf("eventstore: append to %s: event %s belongs to %s", agg, e.ID, e.Aggregate)
		}
		m, err := fastcodec.Encode(e)
		if err != nil {
			return 0, fmt.Errorf("eventstore: append to %s: %w", agg, err)
		}
		msgs[i] = m
	}
	var (
		seq uint64
		err error
	)
	if len(msgs) == 1 {
		seq, err = s.publishOne(ctx, expectLast(msgs[0], expected))
	} else if s.cfg.Replicas > 1 || (len(msgs) >= batchFrom && len(msgs) <= batchUpTo) {
		seq, err = s.publishBatch(ctx, msgs, expected)
		if isBatchDuplicate(err) && !s.lastIs(ctx, agg, expected, msgs[len(msgs)-1]) {
			// One of the ids is held by a message that is not ours (a batch
			// is refused whole, without saying which): the batch again
			// under fresh ids, still checked against expected.
			dedup.Reissue(msgs[0], s.cfg.Stream, 0, 0)
			for _, m := range msgs[1:] {
				dedup.Rename(m, 0)
			}
			seq, err = s.publishBatch(ctx, msgs, expected)
		}
	} else {
		seq, err = s.publishChain(ctx, msgs, expected)
	}
	if err == nil {
		for _, e := range evs {
			metrics.EventsAppended.WithLabelValues(string(e.Type())).Inc()
		}
		return seq, nil
	}
	return s.appendFailed(ctx, agg, expected, evs, msgs[len(msgs)-1], err)
}

// appendFailed turns a refused append of evs, the last of them sent as
// lastMsg, into its outcome: the aggregate's version when the refusal is the
// echo of our own earlier success (a retry: the subject's last message is
// lastMsg itself), a *ConflictError when another writer moved the aggregate,
// else the error itself.
func (s *Store) appendFailed(ctx context.Context, agg events.AggregateID, expected uint64, evs []events.Envelope, lastMsg *nats.Msg, err error) (uint64, error) {
	if !isWrongLastSequence(err) && !isBatchDuplicate(err) {
		return 0, fmt.Errorf("eventstore: append %d event(s) to %s: %w", len(evs), agg, err)
	}
	last, lerr := s.settledLast(ctx, agg.Subject(), expected)
	if lerr != nil {
		return 0, fmt.Errorf("eventstore: append to %s: conflict, then reading last message: %w", agg, errors.Join(err, lerr))
	}
	if last.is(lastMsg) {
		return last.Sequence, nil
	}
	actual := last.Sequence
	kind := "manager"
	if agg.IsNode() {
		kind = "node"
	}
	metrics.Conflicts.WithLabelValues(kind).Inc()
	return 0, &ConflictError{Aggregate: agg, Expected: expected, Actual: actual, Err: err}
}

// lastIs reports whether agg's last stored message is m (read after a
// refusal; a read error counts as no).
func (s *Store) lastIs(ctx context.Context, agg events.AggregateID, expected uint64, m *nats.Msg) bool {
	last, err := s.settledLast(ctx, agg.Subject(), expected)
	return err == nil && last.is(m)
}

// batchFrom and batchUpTo bound the decisions that are one atomic batch on
// a single-replica stream too (see Append): up to the servers' default
// max_batch_size; a smaller or a larger one is published as a chain, each
// event checked against the one before it.
const (
	batchFrom = 32
	batchUpTo = 1000
)

// expectLast makes m conditional on its subject's last sequence being seq.
// It sets the header jetstream.WithExpectLastSequencePerSubject would, without
// the options nats.go builds per publish. JetStream stores the header with
// the event, so a verbatim copy of it published later (a consumer's delivery
// sent to the event's own subject) never holds and is refused.
func expectLast(m *nats.Msg, seq uint64) *nats.Msg {
	m.Header[jetstream.ExpectedLastSubjSeqHeader] = []string{strconv.FormatUint(seq, 10)}
	return m
}

// publishChain publishes msgs one by one, each expecting the sequence the
// previous one got.
func (s *Store) publishChain(ctx context.Context, msgs []*nats.Msg, expected uint64) (uint64, error) {
	seq := expected
	for _, m := range msgs {
		var err error
		if seq, err = s.publishOne(ctx, expectLast(m, seq)); err != nil {
			return 0, err
		}
	}
	return seq, nil
}

// publishOne publishes one event and returns its sequence.
func (s *Store) publishOne(ctx context.Context, m *nats.Msg) (uint64, error) {
	r, err := dedup.Publish(ctx, s.js, s.cfg.Stream, m)
	if err != nil {
		return 0, err
	}
	return r.Ack.Sequence, nil
}

func (s *Store) publishBatch(ctx context.Context, msgs []*nats.Msg, expected uint64) (uint64, error) {
	// No ack of the first message: the commit's answer covers the whole batch,
	// and one round trip fewer matters on every multi-event decision.
	b, err := jetstreamext.NewBatchPublisher(s.js, jetstreamext.BatchFlowControl{AckFirst: false})
	if err != nil {
		return 0, err
	}
	for i, m := range msgs[:len(msgs)-1] {
		var opts []jetstreamext.BatchMsgOpt
		if i == 0 {
			opts = append(opts, jetstreamext.WithBatchExpectLastSequencePerSubject(expected))
		}
		if err := b.AddMsg(m, opts...); err != nil {
			_ = b.Discard()
			return 0, err
		}
	}
	ack, err := b.CommitMsg(ctx, msgs[len(msgs)-1])
	if err != nil {
		return 0, err
	}
	return ack.Sequence, nil
}

// isBatchDuplicate matches an atomic batch refused because one of its
// Nats-Msg-Ids is already stored: the retry of a batch that succeeded.
func isBatchDuplicate(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jetstreamext.JSErrCodeBatchPublishDuplicateMsgID
}

// isWrongLastSequence matches both codes JetStream uses for a failed
// expected-last-sequence check: 10071, and 10164 on replicated streams.
func isWrongLastSequence(err error) bool {
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) {
		return false
	}
	return apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant
}
