// Package deadletter parks what Switchback could not handle, commands and
// events alike, on topology.DeadLetterStream: a copy of the message with
// headers saying why and where it came from (topology.HeaderDead*),
// published idempotently (a deterministic Nats-Msg-Id, which no other
// message can take to hide it: package dedup).
package deadletter

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchback-dev/switchback/dedup"
	"github.com/switchback-dev/switchback/metrics"
	"github.com/switchback-dev/switchback/topology"
)

// Letter is one message to park.
type Letter struct {
	// Subject is where it is parked: topology.DeadCommandSubject or
	// topology.DeadEventSubject.
	Subject string
	// Data and Header are the original message's. JetStream's own headers
	// (Nats-*) are not copied as such, since the dead-letter stream would
	// act on them; the original Nats-Msg-Id is kept as
	// topology.HeaderDeadMsgID.
	Data   []byte
	Header nats.Header
	// Reason says why (one line, HeaderSafe); Kind, for events, what kind
	// of decode failure.
	Reason, Kind string
	// Stream, Sequence, OriginalSubject and Consumer say where it came
	// from; Deliveries, for commands, how often it was delivered.
	Stream          string
	Sequence        uint64
	OriginalSubject string
	Consumer        string
	Deliveries      int
	// ID is the dead letter's Nats-Msg-Id, deterministic so that a retried
	// park stores one record: "dead-<stream>-<seq>" for commands,
	// "dead-evt-<seq>" for events.
	ID string
	// What labels the metric: "command" or "event".
	What string
}

// Message is the dead letter for l.
func (l Letter) Message() *nats.Msg {
	out := nats.NewMsg(l.Subject)
	out.Data = l.Data
	for k, vs := range l.Header {
		if strings.HasPrefix(strings.ToLower(k), "nats-") {
			continue
		}
		out.Header[k] = vs
	}
	if id := l.Header.Get(jetstream.MsgIDHeader); id != "" {
		out.Header.Set(topology.HeaderDeadMsgID, id)
	}
	out.Header.Set(topology.HeaderDeadReason, HeaderSafe(l.Reason))
	if l.Kind != "" {
		out.Header.Set(topology.HeaderDeadKind, l.Kind)
	}
	out.Header.Set(topology.HeaderDeadStream, l.Stream)
	out.Header.Set(topology.HeaderDeadSequence, strconv.FormatUint(l.Sequence, 10))
	out.Header.Set(topology.HeaderDeadSubject, l.OriginalSubject)
	out.Header.Set(topology.HeaderDeadConsumer, l.Consumer)
	if l.Deliveries > 0 {
		out.Header.Set(topology.HeaderDeadDelivered, strconv.Itoa(l.Deliveries))
	}
	out.Header.Set(jetstream.MsgIDHeader, l.ID)
	return out
}

// Park publishes l's dead letter; a retry stores nothing twice. duplicate
// reports that it was already parked.
func Park(ctx context.Context, js jetstream.JetStream, l Letter) (duplicate bool, err error) {
	r, err := dedup.Publish(ctx, js, topology.DeadLetterStream, l.Message())
	if err != nil {
		return false, fmt.Errorf("deadletter: park %s seq %d: %w", l.Stream, l.Sequence, err)
	}
	if !r.Duplicate {
		metrics.DeadLetters.WithLabelValues(l.What).Inc()
	}
	return r.Duplicate, nil
}

// HeaderSafe makes s fit a dead-letter header value (and a terminate
// reason): one line, at most 2048 bytes, cut on a rune boundary.
func HeaderSafe(s string) string {
	s = strings.NewReplacer("\r", " ", "\n", " ").Replace(s)
	const limit = 2048
	if len(s) <= limit {
		return s
	}
	cut := limit
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut]
}
