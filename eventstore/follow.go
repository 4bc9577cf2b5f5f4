package eventstore

import (
	"context"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/events/fastcodec"
)

// Follow calls fn for every event on subjects (empty = every subject) from
// sequence from (0 = the beginning), in stream order and as they are
// appended, until fn returns true or ctx ends; it then returns nil. pending
// is how many more messages on subjects were stored when the event was
// delivered. Messages that do not decode go to onParked (if non-nil), as in
// Scan: a stored message that looks like a NATS status included, at which
// the nats.go ordered consumer would stall for good.
func (s *Store) Follow(ctx context.Context, subjects []string, from uint64,
	fn func(e events.Envelope, pending uint64) (stop bool), onParked func(*events.DecodeError)) error {
	if s.cfg.DirectScans {
		return s.directFollow(ctx, subjects, from, fn, onParked)
	}
	var d fastcodec.Decoder
	err := s.orderedRead(ctx, subjects, from, 0, true, func(seq, pending uint64, subject string, h nats.Header, data []byte, _ time.Time) (bool, error) {
		stop := false
		err := decodeTo(&d, subject, seq, h, data, func(e events.Envelope) error {
			stop = fn(e, pending)
			return nil
		}, onParked)
		return stop, err
	})
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// followPoll is how often a store with Config.DirectScans looks for new
// events while it follows: its reader has no consumer to be told by.
var followPoll = time.Second

// directFollow is Follow by direct batch gets: a scan up to the stream's
// last sequence, then again from where it ended every followPoll.
func (s *Store) directFollow(ctx context.Context, subjects []string, from uint64,
	fn func(e events.Envelope, pending uint64) (stop bool), onParked func(*events.DecodeError)) error {
	next := max(from, 1)
	var d fastcodec.Decoder
	for {
		last, err := s.LastSequence(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
		stopped := false
		if last >= next {
			err = s.directScan(ctx, subjects, next, last, func(m directMsg) (bool, error) {
				env, err := decodeServed(&d, m)
				err = parkOr(env, err, func(e events.Envelope) error {
					stopped = fn(e, m.pending)
					return nil
				}, onParked)
				return stopped, err
			})
			if ctx.Err() != nil {
				return nil
			}
			if err != nil || stopped {
				return err
			}
			next = last + 1
		}
		t := time.NewTimer(followPoll)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}
