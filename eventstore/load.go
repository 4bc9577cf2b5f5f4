package eventstore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/events/fastcodec"
)

// History is an aggregate's events as read from the stream.
type History struct {
	Events []events.Envelope
	// Version is the sequence of the last message on the aggregate's subject,
	// undecodable ones included: it is what the next Append must expect.
	Version uint64
	// Parked lists messages on the subject that did not decode (hand-published
	// garbage, a type from a newer release, a copy of a stored message that
	// carries JetStream's own headers). They are skipped, never fatal.
	Parked []*events.DecodeError
}

// Headers JetStream adds to a message it serves by direct get, and the one
// it adds to a message it sources into another stream. A message stored
// with any of them is a copy of a served or sourced message (`nats stream
// get` then `nats pub`, a stream source with a subject transform), never an
// event or a command Switchback wrote.
const (
	hdrStreamSource = "Nats-Stream-Source"
	hdrStream       = "Nats-Stream"
	hdrSequence     = "Nats-Sequence"
	hdrSubject      = "Nats-Subject"
	hdrTimeStamp    = "Nats-Time-Stamp"
	hdrNumPending   = "Nats-Num-Pending"
	hdrLastSeq      = "Nats-Last-Sequence"
	hdrStatus       = "Status"
	hdrDescription  = "Description"
)

// reservedHeaders are JetStream's provenance headers: the first
// servedHeaders of them a direct batch get appends to each message, once
// each; the rest it never serves, so a message carries them only as a copy.
var reservedHeaders = []string{hdrStream, hdrSubject, hdrSequence, hdrTimeStamp, hdrNumPending, hdrLastSeq, hdrStreamSource}

// servedHeaders counts the reservedHeaders a direct batch get appends.
const servedHeaders = 6

// allowedTimes is how often a message served with added copies of the
// served headers may carry reservedHeaders[i].
func allowedTimes(i, added int) int {
	if i < servedHeaders {
		return added
	}
	return 0
}

// ownReservedHeaders names the reserved headers that h carries more often
// than added times (the server's own copies): those the stored message
// brought itself. Header names are matched without regard to case, as a copy
// may have been re-keyed by a tool.
func ownReservedHeaders(h nats.Header, added int) []string {
	var own []string
	for i, r := range reservedHeaders {
		n := 0
		for k, vs := range h {
			if strings.EqualFold(k, r) {
				n += len(vs)
			}
		}
		if n > allowedTimes(i, added) {
			own = append(own, r)
		}
	}
	return own
}

// CheckDeliveredHeaders returns a *events.DecodeError (kind
// events.ErrBadHeader) when a message delivered by a consumer, whose headers
// are the stored ones only, carries any of the headers JetStream adds when it
// serves a message by direct get (Nats-Sequence, Nats-Subject, Nats-Stream,
// Nats-Time-Stamp, ...): it is a copy of a served message, not an event, and
// must be parked like an undecodable one. Nil otherwise. Scan uses it;
// consumers that decode events themselves call it before decoding.
func CheckDeliveredHeaders(subject string, seq uint64, h nats.Header) *events.DecodeError {
	if carriesOwnReserved(h, 0) {
		return reservedHeaderError(subject, seq, h, ownReservedHeaders(h, 0))
	}
	return nil
}

// DecodeDelivered decodes an event a consumer delivered, refusing it first
// as CheckDeliveredHeaders does. Every consumer of the event stream decodes
// through it, so a copied message is parked everywhere alike. The check rides
// on the decoder's own pass over the headers (fastcodec.Decoder).
func DecodeDelivered(subject string, seq uint64, h nats.Header, data []byte) (events.Envelope, error) {
	return decodeDelivered(nil, subject, seq, h, data)
}

// decodeDelivered is DecodeDelivered with d, for a reader of a stream in
// order (nil: one message).
func decodeDelivered(d *fastcodec.Decoder, subject string, seq uint64, h nats.Header, data []byte) (events.Envelope, error) {
	var env events.Envelope
	var err error
	if d != nil {
		env, err = d.Decode(subject, h, data, seq, refuseReserved)
	} else {
		env, err = fastcodec.Decode(subject, h, data, seq, refuseReserved)
	}
	if errors.Is(err, errReservedHeader) {
		return events.Envelope{}, reservedHeaderError(subject, seq, h, ownReservedHeaders(h, 0))
	}
	return env, err
}

// errReservedHeader is refuseReserved's answer, which decodeDelivered words.
var errReservedHeader = errors.New("reserved header")

// refuseReserved refuses JetStream's reserved headers (see DecodeDelivered).
func refuseReserved(key string) error {
	if reservedIndex(key) >= 0 {
		return errReservedHeader
	}
	return nil
}

// reservedHeaderError is the parked form of a message carrying reserved
// headers of its own.
func reservedHeaderError(subject string, seq uint64, h nats.Header, own []string) *events.DecodeError {
	return &events.DecodeError{
		Kind: events.ErrBadHeader, Subject: subject, Sequence: seq, Type: h.Get(events.HeaderPrefix + "type"),
		Err: fmt.Errorf("carries JetStream's reserved header(s) %s of its own: a copy of a stored message, not an event", strings.Join(own, ", ")),
	}
}

// last returns the last value of the header key (exact name): the one the
// server appended after whatever the stored message carried.
func last(h nats.Header, key string) string {
	vs := h[key]
	if len(vs) == 0 {
		return ""
	}
	return vs[len(vs)-1]
}

// Load reads every event of agg.
func (s *Store) Load(ctx context.Context, agg events.AggregateID) (History, error) {
	return s.LoadAfter(ctx, agg, 0)
}

// LoadAfter reads the events of agg with a stream sequence above afterSeq
// (the tail after a snapshot). Version is afterSeq when nothing newer exists.
//
// It uses direct batch gets, which any replica may answer; on R3 a follower
// can lag behind the leader. A stale load costs a decision that appends
// only a ConflictError on the next Append; one that only reads must check
// that Version reached what it reacts to (the orchestrator's readFresh).
//
// The server appends its Nats-Sequence, Nats-Subject and pending count after
// the stored headers, so only the last value of each is trusted: a stored
// message may carry copies of its own (it is then parked, and still counts
// toward the version).
func (s *Store) LoadAfter(ctx context.Context, agg events.AggregateID, afterSeq uint64) (History, error) {
	h := History{Version: afterSeq}
	// A batch cut short by a cluster with nobody to answer (see patience)
	// is asked again from the last message it delivered.
	var p patience
	for {
		n, pending, err := s.loadBatch(ctx, agg, &h)
		if err != nil {
			if err = p.pause(ctx, err); err != nil {
				return History{}, err
			}
			continue
		}
		p.reset()
		if n == 0 || pending == 0 {
			return h, nil
		}
	}
}

// loadBatch runs one direct batch get of agg's messages after h.Version and
// adds them to h. It returns how many messages came and how many more the
// server says are pending on the subject.
func (s *Store) loadBatch(ctx context.Context, agg events.AggregateID, h *History) (int, uint64, error) {
	subject := agg.Subject()
	after := h.Version
	var d fastcodec.Decoder
	n, pending, err := s.directBatch(ctx, subject, after+1, s.cfg.LoadBatch, func(m directMsg) error {
		if m.subject != subject {
			return fmt.Errorf("direct get returned seq %d on subject %q, asked for %q", m.seq, m.subject, subject)
		}
		h.Version = m.seq
		env, err := decodeServed(&d, m)
		if err != nil {
			var de *events.DecodeError
			if errors.As(err, &de) {
				h.Parked = append(h.Parked, de)
				return nil
			}
			return err
		}
		h.Events = append(h.Events, env)
		return nil
	})
	if err != nil {
		return 0, 0, fmt.Errorf("eventstore: load %s after seq %d: %w", agg, after, err)
	}
	return n, pending, nil
}
