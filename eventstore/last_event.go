package eventstore

import (
	"context"
	"fmt"

	"github.com/switchback-dev/switchback/events"
)

// LastEvent returns agg's last stored event as the stream leader has it;
// ok is false when agg has none. A last message that does not decode is an
// error (a *events.DecodeError when the decoder refused it).
func (s *Store) LastEvent(ctx context.Context, agg events.AggregateID) (env events.Envelope, ok bool, err error) {
	last, err := s.leaderLast(ctx, agg.Subject())
	switch {
	case err != nil:
		return events.Envelope{}, false, err
	case last.Sequence == 0:
		return events.Envelope{}, false, nil
	case last.Msg == nil:
		return events.Envelope{}, false, fmt.Errorf("eventstore: last message on %s (seq %d): its headers do not decode", agg.Subject(), last.Sequence)
	}
	env, err = DecodeDelivered(last.Msg.Subject, last.Sequence, last.Msg.Header, last.Msg.Data)
	if err != nil {
		return events.Envelope{}, false, err
	}
	return env, true, nil
}
