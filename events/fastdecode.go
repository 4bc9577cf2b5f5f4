package events

import (
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/synadia-io/orbit.go/jetstreamext"
)

// The fast path of Decode. Replay and every load decode whole histories, and
// the general path (a CloudEvent built attribute by attribute, its source
// parsed as a URL, an extension map, a validation pass) cost several times
// the rest of a fold. Nearly every stored message is exactly what Encode
// writes, so that one shape is read straight into an Envelope; anything else
// (upper-case or unknown headers, surrounding blanks, an unusual source, a
// subject mismatch...) returns ok=false and goes down the general path, which
// alone decides what is refused and why. The contract, pinned by
// FuzzFastDecodeAgrees: whenever the fast path succeeds, the general path
// returns the same Envelope.

// wireHeader indexes the headers Encode writes.
const (
	hSpec = iota
	hID
	hSource
	hType
	hSubject
	hTime
	hCausation
	hCorrelation
	hContentType
	nHeaders
)

// wireHeaderNames are the headers Encode writes, by index.
var wireHeaderNames = [nHeaders]string{
	hSpec:        HeaderPrefix + "specversion",
	hID:          HeaderPrefix + "id",
	hSource:      HeaderPrefix + "source",
	hType:        HeaderPrefix + "type",
	hSubject:     HeaderPrefix + "subject",
	hTime:        HeaderPrefix + "time",
	hCausation:   HeaderPrefix + ExtCausation,
	hCorrelation: HeaderPrefix + ExtCorrelation,
	hContentType: HeaderContentType,
}

// transportHeaders are the headers a stored event carries besides its own,
// which JetStream stores with it: the deduplication id, and the condition
// eventstore's Append publishes it under or the atomic batch it is part of.
var transportHeaders = [...]string{
	MsgIDHeader, jetstream.ExpectedLastSubjSeqHeader,
	jetstreamext.BatchIDHeader, jetstreamext.BatchSeqHeader, jetstreamext.BatchCommitHeader,
}

// readHeaders returns the values of Encode's headers, each present once,
// showing foreign (if non-nil) every other header; ok is false when one is
// missing or repeated, or another header spells a CloudEvents one
// differently. It looks the expected names up rather than walking the map:
// a stored event's header map is large enough that a walk cost a quarter of
// decoding it; only a message with headers beyond the expected ones is
// walked.
func readHeaders(hdr nats.Header, foreign func(key string) error) (vals [nHeaders]string, ok bool, err error) {
	for i, k := range wireHeaderNames {
		vs := hdr[k]
		if len(vs) != 1 {
			return vals, false, nil
		}
		vals[i] = vs[0]
	}
	others := len(hdr) - nHeaders
	for _, k := range transportHeaders {
		if others == 0 {
			return vals, true, nil
		}
		if _, present := hdr[k]; !present {
			continue
		}
		others--
		if foreign != nil {
			if err := foreign(k); err != nil {
				return vals, false, err
			}
		}
	}
	if others == 0 {
		return vals, true, nil
	}
	for k := range hdr {
		if isWireHeader(k) || slices.Contains(transportHeaders[:], k) {
			continue
		}
		// Any other spelling of a CloudEvents header (case, a different
		// attribute) is the general path's to judge; unrelated headers
		// are ignored by both.
		if eventHeader(k) {
			return vals, false, nil
		}
		if foreign != nil {
			if err := foreign(k); err != nil {
				return vals, false, err
			}
		}
	}
	return vals, true, nil
}

// isWireHeader reports whether k is exactly one of Encode's header names.
func isWireHeader(k string) bool { return slices.Contains(wireHeaderNames[:], k) }

// fastDecode decodes a message with exactly Encode's header shape, or reports
// ok=false; it never returns an error of its own (a refusal is the general
// path's to word), only foreign's, which it calls for every header that is
// not a CloudEvents one (see DecodeChecked).
func (d *StreamDecoder) fastDecode(subject string, hdr nats.Header, data []byte, foreign func(key string) error, ns *names) (env Envelope, ok bool, err error) {
	if len(data) == 0 {
		return Envelope{}, false, nil
	}
	vals, ok, err := readHeaders(hdr, foreign)
	if !ok || err != nil {
		return Envelope{}, false, err
	}
	if vals[hSpec] != "1.0" || vals[hContentType] != ContentType {
		return Envelope{}, false, nil
	}
	for _, i := range [...]int{hID, hType, hSubject, hCausation} {
		if v := vals[i]; v == "" || v != strings.TrimSpace(v) {
			return Envelope{}, false, nil
		}
	}
	if !plainSource(vals[hSource]) {
		return Envelope{}, false, nil
	}
	t, ok := parseUTC(vals[hTime])
	if !ok {
		var err error
		if t, err = time.Parse(time.RFC3339Nano, vals[hTime]); err != nil {
			return Envelope{}, false, nil
		}
	}
	if t.IsZero() {
		return Envelope{}, false, nil
	}
	agg, err := d.parseSubject(subject)
	if err != nil || !isAggregateString(vals[hSubject], agg) || vals[hCorrelation] != agg.Manager.UID {
		return Envelope{}, false, nil
	}
	typ := Type(vals[hType])
	if !strings.HasPrefix(string(typ), aggregateKind(agg)) {
		return Envelope{}, false, nil
	}
	payload, err := decodeData(typ, data, ns)
	if err != nil || !strings.HasPrefix(string(payload.EventType()), aggregateKind(agg)) {
		return Envelope{}, false, nil
	}
	return Envelope{
		ID:          vals[hID],
		Source:      vals[hSource],
		Aggregate:   agg,
		Time:        t.UTC(),
		CausationID: vals[hCausation],
		Data:        payload,
	}, true, nil
}

// parseSubject is ParseSubject, answered from the last subject parsed when
// it is the same.
func (d *StreamDecoder) parseSubject(subject string) (AggregateID, error) {
	if subject != "" && subject == d.subject {
		return d.agg, nil
	}
	agg, err := ParseSubject(subject)
	if err == nil {
		d.subject, d.agg = subject, agg
	}
	return agg, err
}

// eventHeader reports whether k, in any case, names a CloudEvents attribute
// or the content type: the event's own headers, every other one being
// foreign (see DecodeChecked).
func eventHeader(k string) bool {
	return strings.EqualFold(k, HeaderContentType) || (len(k) >= len(HeaderPrefix) && strings.EqualFold(k[:len(HeaderPrefix)], HeaderPrefix))
}

// plainSource reports whether the SDK would keep source exactly as written:
// a non-empty relative path of unreserved characters, which url.Parse accepts
// and URL.String gives back unchanged.
func plainSource(s string) bool {
	if s == "" || strings.HasPrefix(s, "//") {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '/', c == '-', c == '.', c == '_', c == '~':
		default:
			return false
		}
	}
	return true
}

// isAggregateString reports s == agg.String() without building the string.
func isAggregateString(s string, agg AggregateID) bool {
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

func cutPrefixSlash(s, prefix string) (string, bool) {
	if len(s) <= len(prefix) || s[len(prefix)] != '/' || s[:len(prefix)] != prefix {
		return "", false
	}
	return s[len(prefix)+1:], true
}
