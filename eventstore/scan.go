package eventstore

import (
	"context"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/events/fastcodec"
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
//
// It reads with an ordered consumer of its own (see orderedRead) rather than
// nats.go's, so that a stored message that looks like a NATS status (empty
// body, Status header) is parked like any undecodable one instead of
// stalling the scan for good.
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
	var d fastcodec.Decoder
	if s.cfg.DirectScans {
		return s.directScan(ctx, opts.Subjects, from, until, func(m directMsg) (bool, error) {
			if !opts.UntilTime.IsZero() && m.at.After(opts.UntilTime) {
				return true, nil
			}
			env, err := decodeServed(&d, m)
			return false, parkOr(env, err, fn, onParked)
		})
	}
	return s.orderedRead(ctx, opts.Subjects, from, until, false, func(seq, _ uint64, subject string, h nats.Header, data []byte, ts time.Time) (bool, error) {
		if seq > until || (!opts.UntilTime.IsZero() && ts.After(opts.UntilTime)) {
			return true, nil
		}
		if err := decodeTo(&d, subject, seq, h, data, fn, onParked); err != nil {
			return true, err
		}
		return seq >= until, nil
	})
}

// decodeTo decodes a delivered message (see DecodeDelivered) and hands it to
// fn, or to onParked (if non-nil) when it does not decode.
func decodeTo(d *fastcodec.Decoder, subject string, seq uint64, h nats.Header, data []byte, fn func(events.Envelope) error, onParked func(*events.DecodeError)) error {
	env, err := decodeDelivered(d, subject, seq, h, data)
	return parkOr(env, err, fn, onParked)
}
