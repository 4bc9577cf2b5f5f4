package events

import (
	"fmt"
	"strings"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/cloudevents/sdk-go/v2/types"
	"github.com/nats-io/nats.go"
)

// Wire format: CloudEvents binary content mode on NATS. Every context attribute
// and extension is a lower-case "ce-" header, datacontenttype is the
// "content-type" header, and the body is the JSON data, so `nats stream view`
// shows readable events.

// HeaderPrefix prefixes every CloudEvents attribute header.
const HeaderPrefix = "ce-"

// HeaderContentType carries the datacontenttype attribute.
const HeaderContentType = "content-type"

// MsgIDHeader is JetStream's deduplication header; it carries the event id.
const MsgIDHeader = "Nats-Msg-Id"

// MaxDataBytes bounds an event body. Real payloads are well under a kilobyte;
// anything near the NATS payload limit is garbage or an attack and is parked.
const MaxDataBytes = 64 << 10

// Encode returns the NATS message for e on its aggregate's subject, with
// Nats-Msg-Id set to the event id. It goes through the CloudEvents model and
// alone decides what is refused; package fastcodec writes the same bytes
// faster for the envelopes a stream is mostly made of.
func Encode(e Envelope) (*nats.Msg, error) {
	ce, err := e.ToCloudEvent()
	if err != nil {
		return nil, err
	}
	if len(ce.Data()) > MaxDataBytes {
		return nil, fmt.Errorf("event %s %s: data is %d bytes, limit %d: %w", e.ID, e.Type(), len(ce.Data()), MaxDataBytes, ErrTooLarge)
	}
	// Headers are written straight from the validated event rather than
	// through binding.Write: same bytes, a third of the allocations.
	msg := &nats.Msg{Subject: e.Aggregate.Subject(), Header: make(nats.Header, 10), Data: ce.Data()}
	h := msg.Header
	h[HeaderPrefix+"specversion"] = []string{ce.SpecVersion()}
	h[HeaderPrefix+"id"] = []string{ce.ID()}
	h[HeaderPrefix+"source"] = []string{ce.Source()}
	h[HeaderPrefix+"type"] = []string{ce.Type()}
	h[HeaderPrefix+"subject"] = []string{ce.Subject()}
	h[HeaderPrefix+"time"] = []string{types.FormatTime(ce.Time())}
	h[HeaderPrefix+ExtCausation] = []string{e.CausationID}
	h[HeaderPrefix+ExtCorrelation] = []string{e.Aggregate.Manager.UID}
	h[HeaderContentType] = []string{ContentType}
	msg.Header.Set(MsgIDHeader, e.ID)
	return msg, nil
}

// Decode turns a stored message back into an Envelope. Every failure is a
// *DecodeError; Decode never panics on any input.
func Decode(subject string, hdr nats.Header, data []byte, seq uint64) (Envelope, error) {
	return DecodeChecked(subject, hdr, data, seq, nil)
}

// DecodeChecked is Decode that first shows foreign every header that is not
// the event's own (see EventHeader); an error foreign returns is the answer,
// before anything else is judged. A consumer vetting what the transport
// added (eventstore refuses a stored copy's reserved headers) does it in the
// pass that decodes instead of a second walk of the headers. Like Encode it
// is the reference: package fastcodec's Decoder answers the same, faster.
func DecodeChecked(subject string, hdr nats.Header, data []byte, seq uint64, foreign func(key string) error) (env Envelope, err error) {
	defer func() {
		// Belt and braces: the CloudEvents SDK is not ours; a panic in it on
		// hostile input must park the message, not kill the consumer.
		if r := recover(); r != nil {
			err = &DecodeError{Kind: ErrBadHeader, Subject: subject, Sequence: seq, Err: fmt.Errorf("panic while decoding: %v", r)}
		}
		if de, ok := err.(*DecodeError); ok {
			de.Sequence = seq
		}
	}()
	if foreign != nil {
		for k := range hdr {
			if EventHeader(k) {
				continue
			}
			if err := foreign(k); err != nil {
				return Envelope{}, err
			}
		}
	}
	if len(data) > MaxDataBytes {
		return Envelope{}, &DecodeError{Kind: ErrTooLarge, Subject: subject, Err: fmt.Errorf("%d bytes, limit %d", len(data), MaxDataBytes)}
	}
	env, err = decodeGeneral(subject, hdr, data)
	if err != nil {
		return Envelope{}, err
	}
	env.Sequence = seq
	return env, nil
}

// EventHeader reports whether k, in any case, names a CloudEvents attribute
// or the content type: the event's own headers, every other one being
// foreign (see DecodeChecked).
func EventHeader(k string) bool {
	return strings.EqualFold(k, HeaderContentType) || (len(k) >= len(HeaderPrefix) && strings.EqualFold(k[:len(HeaderPrefix)], HeaderPrefix))
}

// decodeGeneral is Decode for any header shape, through the CloudEvents
// model; it alone decides what is refused.
func decodeGeneral(subject string, hdr nats.Header, data []byte) (Envelope, error) {
	ce, err := cloudEventFromHeaders(hdr, data)
	if err != nil {
		return Envelope{}, &DecodeError{Kind: ErrBadHeader, Subject: subject, Type: ce.Type(), Err: err}
	}
	return FromCloudEvent(subject, ce)
}

// cloudEventFromHeaders reads a binary-mode CloudEvent straight from the
// headers (names matched case-insensitively, each at most once). It skips
// the SDK's generic message visitor, which cost more than the rest of a
// replay's fold; TestDecodeMatchesSDKBinaryMode pins it to the SDK's model.
func cloudEventFromHeaders(hdr nats.Header, data []byte) (cloudevents.Event, error) {
	ce := cloudevents.New(cloudevents.CloudEventsVersionV1)
	seen := make(map[string]bool, 12)
	specversion := ""
	for k, vs := range hdr {
		lk := k
		if !isLower(k) {
			lk = strings.ToLower(k)
		}
		ctype := lk == HeaderContentType
		name, isCE := strings.CutPrefix(lk, HeaderPrefix)
		if !isCE && !ctype {
			continue
		}
		if len(vs) != 1 {
			return ce, fmt.Errorf("header %s has %d values, want 1", k, len(vs))
		}
		if seen[lk] {
			return ce, fmt.Errorf("header %s repeated with different case", k)
		}
		seen[lk] = true
		v := vs[0]
		var err error
		switch {
		case ctype:
			err = ce.Context.SetDataContentType(v)
		case name == "specversion":
			specversion = v
		case name == "id":
			err = ce.Context.SetID(v)
		case name == "source":
			err = ce.Context.SetSource(v)
		case name == "type":
			err = ce.Context.SetType(v)
		case name == "subject":
			err = ce.Context.SetSubject(v)
		case name == "time":
			var t time.Time
			if t, err = types.ParseTime(v); err == nil {
				err = ce.Context.SetTime(t)
			}
		case name == "dataschema":
			err = ce.Context.SetDataSchema(v)
		case name == "datacontenttype":
			err = ce.Context.SetDataContentType(v)
		default:
			err = ce.Context.SetExtension(name, v)
		}
		if err != nil {
			return ce, fmt.Errorf("header %s: %w", k, err)
		}
	}
	switch specversion {
	case "":
		return ce, fmt.Errorf("missing %sspecversion header", HeaderPrefix)
	case cloudevents.CloudEventsVersionV1:
	default:
		return ce, fmt.Errorf("unsupported CloudEvents specversion %q", specversion)
	}
	if len(data) > 0 {
		ce.DataEncoded = data
	}
	return ce, nil
}

// CloudEventFromMessage reads the CloudEvent of a binary-mode NATS message
// without checking it against a subject (Decode does both).
func CloudEventFromMessage(hdr nats.Header, data []byte) (cloudevents.Event, error) {
	return cloudEventFromHeaders(hdr, data)
}

func isLower(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 'A' && c <= 'Z' {
			return false
		}
	}
	return true
}
