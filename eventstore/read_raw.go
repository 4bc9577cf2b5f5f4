package eventstore

import (
	"context"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchback-dev/switchback/topology"
)

// apiPrefix is the JetStream API prefix of the store's connection.
func (s *Store) apiPrefix() string { return topology.APIPrefix(s.js.Options().APIPrefix) }

// rawInbox is a subscription to a fresh inbox whose messages reach the
// reader exactly as the server sent them. A synchronous subscription's
// NextMsg turns any message with an empty body and "Status: 503" into
// nats.ErrNoResponders and drops it, a stored message of that shape
// included; a channel subscription does not look at what it delivers.
type rawInbox struct {
	subject string
	sub     *nats.Subscription
	ch      chan *nats.Msg
}

// subscribeRaw subscribes to a new inbox. capacity must hold every message
// one request brings: a full channel drops messages (slow consumer).
func subscribeRaw(nc *nats.Conn, capacity int) (*rawInbox, error) {
	r := &rawInbox{subject: nc.NewInbox(), ch: make(chan *nats.Msg, capacity)}
	var err error
	if r.sub, err = nc.ChanSubscribe(r.subject, r.ch); err != nil {
		return nil, err
	}
	return r, nil
}

// next returns the next message, or ctx's error.
func (r *rawInbox) next(ctx context.Context) (*nats.Msg, error) {
	select {
	case m := <-r.ch:
		return m, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// nextWithin is next that gives up after d with context.DeadlineExceeded. A
// message already waiting is taken without starting a timer: a replay finds
// one waiting nearly every time, and a timer per message cost as much as
// decoding the event.
func (r *rawInbox) nextWithin(ctx context.Context, d time.Duration) (*nats.Msg, error) {
	select {
	case m := <-r.ch:
		return m, nil
	default:
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case m := <-r.ch:
		return m, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-t.C:
		return nil, context.DeadlineExceeded
	}
}

// close unsubscribes.
func (r *rawInbox) close() { _ = r.sub.Unsubscribe() }

// carriesOwnReserved reports, in one pass over h, what
// len(ownReservedHeaders(h, added)) > 0 does: whether a reserved header
// comes more often than added times. Scan asks it of every message, where
// ownReservedHeaders' walk of the whole map per reserved name costs as much
// as decoding the event.
func carriesOwnReserved(h nats.Header, added int) bool {
	var counts [8]int
	if len(reservedHeaders) > len(counts) {
		return len(ownReservedHeaders(h, added)) > 0
	}
	for k, vs := range h {
		if i := reservedIndex(k); i >= 0 {
			counts[i] += len(vs)
			if counts[i] > allowedTimes(i, added) {
				return true
			}
		}
	}
	return false
}

// reservedIndex is the position of k in reservedHeaders, matched without
// regard to case, or -1.
func reservedIndex(k string) int {
	// Every reserved name is "Nats-" and more, in any case.
	if len(k) < 10 || (k[0] != 'N' && k[0] != 'n') {
		return -1
	}
	for i, r := range reservedHeaders {
		if len(k) == len(r) && strings.EqualFold(k, r) {
			return i
		}
	}
	return -1
}
