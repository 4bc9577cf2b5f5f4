package eventstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/switchback-dev/switchback/events"
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
// consumers that decode events themselves call it before events.Decode.
func CheckDeliveredHeaders(subject string, seq uint64, h nats.Header) *events.DecodeError {
	if carriesOwnReserved(h, 0) {
		return reservedHeaderError(subject, seq, h, ownReservedHeaders(h, 0))
	}
	return nil
}

// DecodeDelivered decodes an event a consumer delivered, refusing it first
// as CheckDeliveredHeaders does. Every consumer of the event stream decodes
// through it, so a copied message is parked everywhere alike. The check rides
// on the decoder's own pass over the headers (events.DecodeChecked).
func DecodeDelivered(subject string, seq uint64, h nats.Header, data []byte) (events.Envelope, error) {
	var d events.StreamDecoder
	return decodeDelivered(&d, subject, seq, h, data)
}

// decodeDelivered is DecodeDelivered with d, for a reader of a stream in
// order.
func decodeDelivered(d *events.StreamDecoder, subject string, seq uint64, h nats.Header, data []byte) (events.Envelope, error) {
	env, err := d.Decode(subject, h, data, seq, refuseReserved)
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

// batchRequest is the body of a direct batch get.
type batchRequest struct {
	Seq     uint64 `json:"seq"`
	NextFor string `json:"next_by_subj"`
	Batch   int    `json:"batch"`
}

// loadBatch runs one direct batch get of agg's messages after h.Version and
// adds them to h. It returns how many messages came and how many more the
// server says are pending on the subject.
//
// It reads the responses itself rather than through jetstreamext.GetBatch,
// which takes the first value of each header (so a stored copy of the
// server's headers fakes the sequence, and a bad stored timestamp fails the
// whole load) and ends a timed-out batch without an error (a silently short
// history).
func (s *Store) loadBatch(ctx context.Context, agg events.AggregateID, h *History) (int, uint64, error) {
	subject := agg.Subject()
	after := h.Version
	fail := func(err error) (int, uint64, error) {
		return 0, 0, fmt.Errorf("eventstore: load %s after seq %d: %w", agg, after, err)
	}
	nc := s.js.Conn()
	sub, err := subscribeRaw(nc, s.cfg.LoadBatch+1)
	if err != nil {
		return fail(err)
	}
	defer sub.close()
	req, err := json.Marshal(batchRequest{Seq: after + 1, NextFor: subject, Batch: s.cfg.LoadBatch})
	if err != nil {
		return fail(err)
	}
	prefix := s.apiPrefix()
	if err := nc.PublishRequest(prefix+"DIRECT.GET."+s.cfg.Stream, sub.subject, req); err != nil {
		return fail(err)
	}
	caller := ctx
	if _, ok := ctx.Deadline(); !ok {
		timeout := s.js.Options().DefaultTimeout
		if timeout <= 0 {
			timeout = nc.Opts.Timeout
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	n := 0
	var pending uint64
	for {
		m, err := sub.next(ctx)
		if err != nil {
			if caller.Err() == nil {
				err = nats.ErrTimeout // the batch's own timeout, not the caller's
			}
			return fail(err)
		}
		seqs := m.Header.Values(hdrSequence)
		if len(seqs) == 0 {
			// A status, not a message: every stored message comes with the
			// server's Nats-Sequence, so a stored "Status: 204" header
			// cannot end the batch early.
			switch status := m.Header.Get(hdrStatus); status {
			case "204": // end of batch
				if p := last(m.Header, hdrNumPending); p != "" {
					if pending, err = strconv.ParseUint(p, 10, 64); err != nil {
						return fail(fmt.Errorf("end of batch: bad %s %q: %w", hdrNumPending, p, err))
					}
				}
				return n, pending, nil
			case "404": // nothing after `after`
				return n, 0, nil
			case "503":
				return fail(fmt.Errorf("stream %s: %w", s.cfg.Stream, nats.ErrNoResponders))
			default:
				return fail(fmt.Errorf("stream %s: direct get answered status %q %q", s.cfg.Stream, status, m.Header.Get(hdrDescription)))
			}
		}
		seq, err := strconv.ParseUint(seqs[len(seqs)-1], 10, 64)
		if err != nil {
			return fail(fmt.Errorf("bad %s %q: %w", hdrSequence, seqs[len(seqs)-1], err))
		}
		if got := last(m.Header, hdrSubject); got != subject {
			return fail(fmt.Errorf("direct get returned seq %d on subject %q, asked for %q", seq, got, subject))
		}
		if seq <= h.Version {
			return fail(fmt.Errorf("direct get returned seq %d after seq %d: sequences must increase", seq, h.Version))
		}
		if p := last(m.Header, hdrNumPending); p != "" {
			if pending, err = strconv.ParseUint(p, 10, 64); err != nil {
				return fail(fmt.Errorf("seq %d: bad %s %q: %w", seq, hdrNumPending, p, err))
			}
		}
		n++
		h.Version = seq
		if carriesOwnReserved(m.Header, 1) {
			h.Parked = append(h.Parked, reservedHeaderError(subject, seq, m.Header, ownReservedHeaders(m.Header, 1)))
			continue
		}
		env, err := events.Decode(subject, m.Header, m.Data, seq)
		if err != nil {
			var de *events.DecodeError
			if errors.As(err, &de) {
				h.Parked = append(h.Parked, de)
				continue
			}
			return 0, 0, fmt.Errorf("eventstore: load %s: %w", agg, err)
		}
		h.Events = append(h.Events, env)
	}
}
