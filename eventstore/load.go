package eventstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/synadia-io/orbit.go/jetstreamext"

	"github.com/switchback-dev/switchback/events"
)

// History is an aggregate's events as read from the stream.
type History struct {
	Events []events.Envelope
	// Version is the sequence of the last message on the aggregate's subject,
	// undecodable ones included: it is what the next Append must expect.
	Version uint64
	// Parked lists messages on the subject that did not decode (hand-published
	// garbage, a type from a newer release). They are skipped, never fatal.
	Parked []*events.DecodeError
}

// Load reads every event of agg.
func (s *Store) Load(ctx context.Context, agg events.AggregateID) (History, error) {
	return s.LoadAfter(ctx, agg, 0)
}

// LoadAfter reads the events of agg with a stream sequence above afterSeq
// (the tail after a snapshot). Version is afterSeq when nothing newer exists.
//
// It uses direct batch gets, which any replica may answer; on R3 a follower
// can lag behind the leader, but a stale load only costs a ConflictError on
// the next Append, never a wrong decision.
func (s *Store) LoadAfter(ctx context.Context, agg events.AggregateID, afterSeq uint64) (History, error) {
	subject := agg.Subject()
	h := History{Version: afterSeq}
	next := afterSeq + 1
	for {
		it, err := jetstreamext.GetBatch(ctx, s.js, s.cfg.Stream, s.cfg.LoadBatch,
			jetstreamext.GetBatchSeq(next), jetstreamext.GetBatchSubject(subject))
		if err != nil {
			return History{}, fmt.Errorf("eventstore: load %s: %w", agg, err)
		}
		pending := uint64(0)
		n := 0
		for m, err := range it {
			if errors.Is(err, jetstreamext.ErrNoMessages) {
				break
			}
			if err != nil {
				return History{}, fmt.Errorf("eventstore: load %s after seq %d: %w", agg, next-1, err)
			}
			n++
			h.Version = m.Sequence
			next = m.Sequence + 1
			pending, _ = strconv.ParseUint(m.Header.Get("Nats-Num-Pending"), 10, 64)
			env, err := events.Decode(m.Subject, m.Header, m.Data, m.Sequence)
			if err != nil {
				var de *events.DecodeError
				if errors.As(err, &de) {
					h.Parked = append(h.Parked, de)
					continue
				}
				return History{}, fmt.Errorf("eventstore: load %s: %w", agg, err)
			}
			h.Events = append(h.Events, env)
		}
		if n == 0 || pending == 0 {
			return h, nil
		}
	}
}
