package eventstore

import (
	"context"
	"fmt"
	"time"
)

// rewindWait bounds a Rewinder's rewind: a consumer that does not exist,
// or a server without the reset, leaves the request unanswered.
const rewindWait = 5 * time.Second

// Rewind has the event stream's durable consumer deliver again, at once,
// every message after its ack floor. A message the server delivered to a
// client that then lost its connection, or to a process that died, is
// otherwise delivered again only once the consumer's AckWait has passed
// (30 s for the orchestrator's): the upgrade's next step would wait that
// long after NATS came back or a new leader took over. Messages past the
// floor that were acknowledged come again too, in stream order: a reader
// of a consumer takes redeliveries in its stride anyway.
func (s *Store) Rewind(ctx context.Context, consumer string) error {
	if _, err := s.js.ResetConsumer(ctx, s.cfg.Stream, consumer); err != nil {
		return fmt.Errorf("eventstore: rewind consumer %s of %s to its ack floor: %w", consumer, s.cfg.Stream, err)
	}
	return nil
}

// Rewinder rewinds one consumer (Store.Rewind) when its reader starts and
// whenever the store's connection has reconnected since: what was in
// flight to the reader when the connection was lost comes again at once.
// The reader calls Check before each fetch; one reader per Rewinder.
type Rewinder struct {
	store    *Store
	consumer string
	started  bool
	seen     uint64
}

// Rewinder returns the Rewinder of consumer.
func (s *Store) Rewinder(consumer string) *Rewinder {
	return &Rewinder{store: s, consumer: consumer}
}

// Check rewinds the consumer on the first call and after a reconnect, and
// reports whether it did. A failed rewind is not tried again before the
// next reconnect: the messages still come, after AckWait (on a server
// without JetStream's consumer reset, every time).
func (r *Rewinder) Check(ctx context.Context) (bool, error) {
	n := r.store.js.Conn().Stats().Reconnects
	if r.started && n == r.seen {
		return false, nil
	}
	r.started, r.seen = true, n
	ctx, cancel := context.WithTimeout(ctx, rewindWait)
	defer cancel()
	if err := r.store.Rewind(ctx, r.consumer); err != nil {
		return false, err
	}
	return true, nil
}
