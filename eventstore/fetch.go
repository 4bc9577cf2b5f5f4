package eventstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchback-dev/switchback/topology"
)

// fetchGrace is how long Fetch waits past the server's expiry of a pull
// request for its closing status before it gives up on the request.
const fetchGrace = 2 * time.Second

// Fetch pulls messages from the durable pull consumer of the event stream
// named consumer: up to batch messages available now or, when there are none
// and wait > 0, the next one to arrive within wait. It returns no messages
// and no error when nothing came.
//
// Consumers of the event stream read through Fetch rather than the nats.go
// consumer API (Consumer.Fetch, Next, Messages), which takes any delivered
// message with an empty body and a Status header for a status of its own and
// drops it unacknowledged: a stored message that looks like a status (anyone
// allowed to publish an event subject can store one) would then be
// redelivered and dropped every AckWait, forever, and a "409 Consumer
// Deleted" or "400" one stops a Messages iterator. Fetch tells them apart by
// the ack reply subject that every message the server delivers carries and
// no status does, so such a message reaches the caller, which parks it (its
// body does not decode) and acks it like any undecodable event.
func (s *Store) Fetch(ctx context.Context, consumer string, batch int, wait time.Duration) ([]jetstream.Msg, error) {
	msgs, err := s.pull(ctx, consumer, pullRequest{Batch: max(batch, 1), NoWait: true})
	if len(msgs) > 0 || err != nil || wait <= 0 {
		return msgs, err
	}
	return s.pull(ctx, consumer, pullRequest{Batch: 1, Expires: wait})
}

// pullRequest is the body of a JetStream pull request.
type pullRequest struct {
	Batch   int           `json:"batch"`
	Expires time.Duration `json:"expires,omitempty"`
	NoWait  bool          `json:"no_wait,omitempty"`
}

// pull sends one pull request and collects what it brings, until the batch
// is full or a status ends the request.
func (s *Store) pull(ctx context.Context, consumer string, req pullRequest) ([]jetstream.Msg, error) {
	fail := func(err error) ([]jetstream.Msg, error) {
		return nil, fmt.Errorf("eventstore: fetch from consumer %s of %s: %w", consumer, s.cfg.Stream, err)
	}
	nc := s.js.Conn()
	// Room for the batch, its closing status and a few heartbeats.
	sub, err := subscribeRaw(nc, req.Batch+16)
	if err != nil {
		return fail(err)
	}
	defer sub.close()
	body, err := json.Marshal(req)
	if err != nil {
		return fail(err)
	}
	if err := nc.PublishRequest(s.apiPrefix()+"CONSUMER.MSG.NEXT."+s.cfg.Stream+"."+consumer, sub.subject, body); err != nil {
		return fail(err)
	}
	timeout := req.Expires + fetchGrace
	if req.NoWait {
		if timeout = s.js.Options().DefaultTimeout; timeout <= 0 {
			timeout = nc.Opts.Timeout
		}
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var msgs []jetstream.Msg
	for len(msgs) < req.Batch {
		m, err := sub.next(rctx)
		switch {
		case err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded):
			// The request or its closing status was lost (to a reconnect,
			// say): what came is all there is.
			return msgs, nil
		case err != nil:
			return msgs, fmt.Errorf("eventstore: fetch from consumer %s of %s: %w", consumer, s.cfg.Stream, err)
		}
		if strings.HasPrefix(m.Reply, topology.AckPrefix) {
			msgs = append(msgs, &fetchedMsg{m: m})
			continue
		}
		if err := pullStatus(m); err != nil {
			return msgs, fmt.Errorf("eventstore: fetch from consumer %s of %s: %w", consumer, s.cfg.Stream, err)
		}
		if m.Header.Get(hdrStatus) != "100" {
			return msgs, nil
		}
	}
	return msgs, nil
}

// pullStatus is the error a status answering a pull request reports, nil
// for those that merely end it (no messages, expired, batch or size limit
// reached) or keep it alive (heartbeat).
func pullStatus(m *nats.Msg) error {
	status, descr := m.Header.Get(hdrStatus), m.Header.Get(hdrDescription)
	switch status {
	case "100", "404", "408":
		return nil
	case "409":
		d := strings.ToLower(descr)
		if strings.Contains(d, "batch completed") || strings.Contains(d, "exceeds maxbytes") {
			return nil
		}
	case "503":
		return nats.ErrNoResponders
	}
	return fmt.Errorf("pull request answered status %s %q", status, descr)
}

// fetchedMsg is a message Fetch delivered: the jetstream.Msg of a message
// read from a plain subscription, acknowledged through its reply subject.
type fetchedMsg struct {
	m *nats.Msg
}

var _ jetstream.Msg = (*fetchedMsg)(nil)

// Metadata parses the ack reply subject.
func (f *fetchedMsg) Metadata() (*jetstream.MsgMetadata, error) {
	md, err := f.m.Metadata()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", jetstream.ErrNotJSMessage, err)
	}
	out := &jetstream.MsgMetadata{
		NumDelivered: md.NumDelivered,
		NumPending:   md.NumPending,
		Timestamp:    md.Timestamp,
		Stream:       md.Stream,
		Consumer:     md.Consumer,
		Domain:       md.Domain,
	}
	out.Sequence.Stream, out.Sequence.Consumer = md.Sequence.Stream, md.Sequence.Consumer
	return out, nil
}

// Data is the message body.
func (f *fetchedMsg) Data() []byte { return f.m.Data }

// Headers are the stored headers.
func (f *fetchedMsg) Headers() nats.Header { return f.m.Header }

// Subject is the subject the message was stored on.
func (f *fetchedMsg) Subject() string { return f.m.Subject }

// Reply is the ack subject.
func (f *fetchedMsg) Reply() string { return f.m.Reply }

// Ack acknowledges the message.
func (f *fetchedMsg) Ack() error { return f.m.Ack() }

// DoubleAck acknowledges the message and waits for the server to confirm.
func (f *fetchedMsg) DoubleAck(ctx context.Context) error { return f.m.AckSync(nats.Context(ctx)) }

// Nak asks for redelivery now.
func (f *fetchedMsg) Nak() error { return f.m.Nak() }

// NakWithDelay asks for redelivery after delay.
func (f *fetchedMsg) NakWithDelay(delay time.Duration) error { return f.m.NakWithDelay(delay) }

// InProgress resets the ack timer.
func (f *fetchedMsg) InProgress() error { return f.m.InProgress() }

// Term stops redelivery.
func (f *fetchedMsg) Term() error { return f.m.Term() }

// TermWithReason stops redelivery, giving a reason the server reports in its
// advisory.
func (f *fetchedMsg) TermWithReason(reason string) error {
	if reason == "" {
		return f.m.Term()
	}
	if err := f.m.Respond([]byte("+TERM " + reason)); err != nil {
		return fmt.Errorf("term %s: %w", f.m.Subject, err)
	}
	return nil
}
