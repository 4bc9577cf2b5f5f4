package fastcodec

import (
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchback-dev/switchback/events"
)

// A Decoder decodes stored messages as events.DecodeChecked does, for a
// reader of a stream in order. Replay and every load decode whole
// histories, and the reference path (a CloudEvent built attribute by
// attribute, its source parsed as a URL, an extension map, a validation
// pass) cost several times the rest of a fold; nearly every stored message
// is exactly what events.Encode writes, so that one shape is read straight
// into an Envelope and anything else (upper-case or unknown headers,
// surrounding blanks, an unusual source, a subject mismatch...) goes to
// events.DecodeChecked, which alone decides what is refused and why.
//
// It keeps the aggregate of the last subject it parsed, as such a read
// delivers runs of one aggregate's events (a node's volume states), and
// shares the names and messages its payloads repeat. The zero Decoder is
// ready; it is not safe for concurrent use.
type Decoder struct {
	subject string
	agg     events.AggregateID
	names   names
}

// Decode is events.DecodeChecked: every failure is a *events.DecodeError
// or foreign's error, and it never panics on any input.
func (d *Decoder) Decode(subject string, hdr nats.Header, data []byte, seq uint64, foreign func(key string) error) (events.Envelope, error) {
	return d.decode(subject, hdr, data, seq, foreign, &d.names)
}

// Decode is events.DecodeChecked for one message, read as a Decoder reads
// it. It shares no names: for one message a table would cost more than it
// saves.
func Decode(subject string, hdr nats.Header, data []byte, seq uint64, foreign func(key string) error) (events.Envelope, error) {
	var d Decoder
	return d.decode(subject, hdr, data, seq, foreign, nil)
}

// decode is Decode sharing the payloads' names through ns (nil: none).
func (d *Decoder) decode(subject string, hdr nats.Header, data []byte, seq uint64, foreign func(key string) error, ns *names) (events.Envelope, error) {
	if len(data) <= events.MaxDataBytes {
		env, ok, err := d.fastDecode(subject, hdr, data, foreign, ns)
		switch {
		case err != nil:
			if de, isDecode := err.(*events.DecodeError); isDecode {
				de.Sequence = seq
			}
			return events.Envelope{}, err
		case ok:
			env.Sequence = seq
			return env, nil
		}
	}
	// The fast path may have stopped before showing foreign every header:
	// the reference shows it all of them again.
	return events.DecodeChecked(subject, hdr, data, seq, foreign)
}

// fastDecode decodes a message with exactly events.Encode's header shape, or
// reports ok=false; it never returns an error of its own (a refusal is the
// reference's to word), only foreign's, which it calls for every header that
// is not the event's own (see events.DecodeChecked).
func (d *Decoder) fastDecode(subject string, hdr nats.Header, data []byte, foreign func(key string) error, ns *names) (env events.Envelope, ok bool, err error) {
	if len(data) == 0 {
		return events.Envelope{}, false, nil
	}
	vals, ok, err := readHeaders(hdr, foreign)
	if !ok || err != nil {
		return events.Envelope{}, false, err
	}
	if vals[hSpec] != "1.0" || vals[hContentType] != events.ContentType {
		return events.Envelope{}, false, nil
	}
	for _, i := range [...]int{hID, hType, hSubject, hCausation} {
		if v := vals[i]; v == "" || v != strings.TrimSpace(v) {
			return events.Envelope{}, false, nil
		}
	}
	if !plainSource(vals[hSource]) {
		return events.Envelope{}, false, nil
	}
	t, ok := parseUTC(vals[hTime])
	if !ok {
		var err error
		if t, err = time.Parse(time.RFC3339Nano, vals[hTime]); err != nil {
			return events.Envelope{}, false, nil
		}
	}
	if t.IsZero() {
		return events.Envelope{}, false, nil
	}
	agg, err := d.parseSubject(subject)
	if err != nil || !isAggregateString(vals[hSubject], agg) || vals[hCorrelation] != agg.Manager.UID {
		return events.Envelope{}, false, nil
	}
	typ := events.Type(vals[hType])
	if !strings.HasPrefix(string(typ), agg.TypePrefix()) {
		return events.Envelope{}, false, nil
	}
	payload, err := decodeData(typ, data, ns)
	if err != nil || !strings.HasPrefix(string(payload.EventType()), agg.TypePrefix()) {
		return events.Envelope{}, false, nil
	}
	return events.Envelope{
		ID:          vals[hID],
		Source:      vals[hSource],
		Aggregate:   agg,
		Time:        t.UTC(),
		CausationID: vals[hCausation],
		Data:        payload,
	}, true, nil
}

// parseSubject is events.ParseSubject, answered from the last subject parsed when
// it is the same.
func (d *Decoder) parseSubject(subject string) (events.AggregateID, error) {
	if subject != "" && subject == d.subject {
		return d.agg, nil
	}
	agg, err := events.ParseSubject(subject)
	if err == nil {
		d.subject, d.agg = subject, agg
	}
	return agg, err
}

// isAggregateString reports s == agg.String() without building the string.
func isAggregateString(s string, agg events.AggregateID) bool {
	rest, ok := cutPrefixSlash(s, agg.Manager.Namespace)
	if !ok {
		return false
	}
	if !agg.IsNode() {
		return rest == agg.Manager.Name
	}
	if rest, ok = cutPrefixSlash(rest, agg.Manager.Name); !ok {
		return false
	}
	rest, ok = strings.CutPrefix(rest, "nodes/")
	return ok && rest == agg.Node
}

// cutPrefixSlash returns what follows prefix and a slash in s.
func cutPrefixSlash(s, prefix string) (string, bool) {
	if len(s) <= len(prefix) || s[len(prefix)] != '/' || s[:len(prefix)] != prefix {
		return "", false
	}
	return s[len(prefix)+1:], true
}
