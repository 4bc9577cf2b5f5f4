package events

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	"github.com/cloudevents/sdk-go/v2/binding"
	"github.com/cloudevents/sdk-go/v2/binding/spec"
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

var ceVersions = spec.WithPrefix(HeaderPrefix)

// Encode returns the NATS message for e on its aggregate's subject, with
// Nats-Msg-Id set to the event id.
func Encode(e Envelope) (*nats.Msg, error) {
	ce, err := e.ToCloudEvent()
	if err != nil {
		return nil, err
	}
	if len(ce.Data()) > MaxDataBytes {
		return nil, fmt.Errorf("event %s %s: data is %d bytes, limit %d: %w", e.ID, e.Type(), len(ce.Data()), MaxDataBytes, ErrTooLarge)
	}
	// Headers are written straight from the validated event rather than
	// through binding.Write: same bytes, a third of the allocations, and
	// Append sits on every step's hot path.
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
func Decode(subject string, hdr nats.Header, data []byte, seq uint64) (env Envelope, err error) {
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
	if len(data) > MaxDataBytes {
		return Envelope{}, &DecodeError{Kind: ErrTooLarge, Subject: subject, Err: fmt.Errorf("%d bytes, limit %d", len(data), MaxDataBytes)}
	}
	m, err := newHeaderMessage(hdr, data)
	if err != nil {
		return Envelope{}, &DecodeError{Kind: ErrBadHeader, Subject: subject, Err: err}
	}
	ce, err := binding.ToEvent(context.Background(), m)
	if err != nil {
		return Envelope{}, &DecodeError{Kind: ErrBadHeader, Subject: subject, Type: hdr.Get(HeaderPrefix + "type"), Err: err}
	}
	env, err = FromCloudEvent(subject, *ce)
	if err != nil {
		return Envelope{}, err
	}
	env.Sequence = seq
	return env, nil
}

// headerMessage is a binding.Message over a NATS message in binary mode.
// Header names are matched case-insensitively, as in HTTP-like bindings.
type headerMessage struct {
	version spec.Version
	attrs   map[string]string // lower-cased "ce-*" header -> value
	ctype   string
	data    []byte
}

func newHeaderMessage(hdr nats.Header, data []byte) (*headerMessage, error) {
	m := &headerMessage{attrs: map[string]string{}, data: data}
	for k, vs := range hdr {
		lk := strings.ToLower(k)
		if len(vs) != 1 && (strings.HasPrefix(lk, HeaderPrefix) || lk == HeaderContentType) {
			return nil, fmt.Errorf("header %s has %d values, want 1", k, len(vs))
		}
		switch {
		case lk == HeaderContentType:
			m.ctype = vs[0]
		case strings.HasPrefix(lk, HeaderPrefix):
			if _, dup := m.attrs[lk]; dup {
				return nil, fmt.Errorf("header %s repeated with different case", k)
			}
			m.attrs[lk] = vs[0]
		}
	}
	sv, ok := m.attrs[ceVersions.PrefixedSpecVersionName()]
	if !ok {
		return nil, fmt.Errorf("missing %s header", ceVersions.PrefixedSpecVersionName())
	}
	m.version = ceVersions.Version(sv)
	if m.version == nil {
		return nil, fmt.Errorf("unsupported CloudEvents specversion %q", sv)
	}
	return m, nil
}

func (m *headerMessage) ReadEncoding() binding.Encoding { return binding.EncodingBinary }

func (m *headerMessage) ReadStructured(context.Context, binding.StructuredWriter) error {
	return binding.ErrNotStructured
}

func (m *headerMessage) ReadBinary(_ context.Context, w binding.BinaryWriter) error {
	// specversion first: the SDK picks the context version from it.
	svName := ceVersions.PrefixedSpecVersionName()
	if err := w.SetAttribute(m.version.AttributeFromKind(spec.SpecVersion), m.attrs[svName]); err != nil {
		return err
	}
	for k, v := range m.attrs {
		if k == svName {
			continue
		}
		if attr := m.version.Attribute(k); attr != nil {
			if err := w.SetAttribute(attr, v); err != nil {
				return fmt.Errorf("header %s: %w", k, err)
			}
			continue
		}
		name := strings.TrimPrefix(k, HeaderPrefix)
		if err := w.SetExtension(name, v); err != nil {
			return fmt.Errorf("header %s: %w", k, err)
		}
	}
	if m.ctype != "" {
		if err := w.SetAttribute(m.version.AttributeFromKind(spec.DataContentType), m.ctype); err != nil {
			return fmt.Errorf("header %s: %w", HeaderContentType, err)
		}
	}
	if len(m.data) > 0 {
		return w.SetData(bytes.NewReader(m.data))
	}
	return nil
}

func (m *headerMessage) GetAttribute(k spec.Kind) (spec.Attribute, interface{}) {
	attr := m.version.AttributeFromKind(k)
	if attr == nil {
		return nil, nil
	}
	if k == spec.DataContentType {
		if m.ctype == "" {
			return attr, nil
		}
		return attr, m.ctype
	}
	if v, ok := m.attrs[attr.PrefixedName()]; ok {
		return attr, v
	}
	return attr, nil
}

func (m *headerMessage) GetExtension(name string) interface{} {
	if v, ok := m.attrs[HeaderPrefix+strings.ToLower(name)]; ok {
		return v
	}
	return nil
}

func (m *headerMessage) Finish(error) error { return nil }
