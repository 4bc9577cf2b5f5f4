package fastcodec

import (
	"slices"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/synadia-io/orbit.go/jetstreamext"

	"github.com/switchback-dev/switchback/events"
)

// wireHeader indexes the headers events.Encode writes.
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

// wireHeaderNames are the headers events.Encode writes, by index.
var wireHeaderNames = [nHeaders]string{
	hSpec:        events.HeaderPrefix + "specversion",
	hID:          events.HeaderPrefix + "id",
	hSource:      events.HeaderPrefix + "source",
	hType:        events.HeaderPrefix + "type",
	hSubject:     events.HeaderPrefix + "subject",
	hTime:        events.HeaderPrefix + "time",
	hCausation:   events.HeaderPrefix + events.ExtCausation,
	hCorrelation: events.HeaderPrefix + events.ExtCorrelation,
	hContentType: events.HeaderContentType,
}

// transportHeaders are the headers a stored event carries besides its own,
// which JetStream stores with it: the deduplication id, and the condition
// eventstore's Append publishes it under or the atomic batch it is part of.
var transportHeaders = [...]string{
	events.MsgIDHeader, jetstream.ExpectedLastSubjSeqHeader,
	jetstreamext.BatchIDHeader, jetstreamext.BatchSeqHeader, jetstreamext.BatchCommitHeader,
}

// readHeaders returns the values of events.Encode's headers, each present once,
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
		if events.EventHeader(k) {
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

// isWireHeader reports whether k is exactly one of events.Encode's header names.
func isWireHeader(k string) bool { return slices.Contains(wireHeaderNames[:], k) }

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
