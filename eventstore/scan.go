package eventstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchback-dev/switchback/events"
)

// ScanOptions bound a read of the stream.
type ScanOptions struct {
	// FromSeq is the first sequence to read; 0 or 1 = the beginning.
	FromSeq uint64
	// UntilSeq is the last sequence to read; 0 = the stream's last sequence
	// when the scan starts (a scan is a snapshot read, it does not follow).
	UntilSeq uint64
	// UntilTime stops before the first event stored after it; zero = no limit.
	UntilTime time.Time
	// Subjects filters the scan (e.g. events.ManagerSubjectPrefix(m)+".>"); empty = all.
	Subjects []string
}

// Scan calls fn for every decodable event in the range, in stream order, and
// onParked (if non-nil) for every message that does not decode or carries
// JetStream's reserved headers of its own (a copy of a served message). An
// error from fn stops the scan and is returned.
func (s *Store) Scan(ctx context.Context, opts ScanOptions, fn func(events.Envelope) error, onParked func(*events.DecodeError)) error {
	until := opts.UntilSeq
	if until == 0 {
		last, err := s.LastSequence(ctx)
		if err != nil {
			return err
		}
		until = last
	}
	from := max(opts.FromSeq, 1)
	if until < from {
		return nil
	}
	cfg := jetstream.OrderedConsumerConfig{
		FilterSubjects: opts.Subjects,
		DeliverPolicy:  jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:    from,
	}
	cons, err := s.stream.OrderedConsumer(ctx, cfg)
	if err != nil {
		return fmt.Errorf("eventstore: scan %s from %d: %w", s.cfg.Stream, from, err)
	}
	if info := cons.CachedInfo(); info != nil && info.NumPending == 0 {
		return nil
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(1024))
	if err != nil {
		return fmt.Errorf("eventstore: scan %s: %w", s.cfg.Stream, err)
	}
	defer it.Stop()
	for {
		msg, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			return fmt.Errorf("eventstore: scan %s: %w", s.cfg.Stream, err)
		}
		meta, err := msg.Metadata()
		if err != nil {
			return fmt.Errorf("eventstore: scan %s: metadata: %w", s.cfg.Stream, err)
		}
		seq := meta.Sequence.Stream
		if seq > until || (!opts.UntilTime.IsZero() && meta.Timestamp.After(opts.UntilTime)) {
			return nil
		}
		// A consumer delivers the stored headers only: any reserved one
		// came with the message (see LoadAfter), which is parked.
		env, err := DecodeDelivered(msg.Subject(), seq, msg.Headers(), msg.Data())
		if err != nil {
			var de *events.DecodeError
			if !errors.As(err, &de) {
				return err
			}
			if onParked != nil {
				onParked(de)
			}
		} else if err := fn(env); err != nil {
			return err
		}
		if seq >= until || meta.NumPending == 0 {
			return nil
		}
	}
}
