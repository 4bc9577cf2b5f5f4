package events

import (
	"encoding/json"
	"strings"

	"github.com/cloudevents/sdk-go/v2/types"
	"github.com/nats-io/nats.go"
)

// encodeFast writes the message of a plainly valid envelope without building
// a CloudEvent: the SDK's event (a URL parse of the source, an extension map,
// a generic data codec, a validation pass) was most of an append's client
// cost. It applies the same checks, and gives up (ok=false) on anything the
// SDK would normalise or refuse, so that encodeGeneral decides those; where
// it succeeds the bytes are encodeGeneral's (TestEncodeFastAgrees).
func encodeFast(e Envelope) (*nats.Msg, bool) {
	if e.Data == nil || e.Aggregate.Validate() != nil || e.Time.IsZero() {
		return nil, false
	}
	t := string(e.Type())
	if !strings.HasPrefix(t, aggregateKind(e.Aggregate)) || t != strings.TrimSpace(t) {
		return nil, false
	}
	if e.ID == "" || e.ID != strings.TrimSpace(e.ID) || !plainSource(e.Source) {
		return nil, false
	}
	subject := e.Aggregate.String()
	if subject != strings.TrimSpace(subject) {
		return nil, false
	}
	if Validate(e.Data) != nil {
		return nil, false
	}
	data, err := json.Marshal(e.Data)
	if err != nil || len(data) > MaxDataBytes {
		return nil, false
	}
	msg := &nats.Msg{Subject: e.Aggregate.Subject(), Header: make(nats.Header, 10), Data: data}
	h := msg.Header
	h[HeaderPrefix+"specversion"] = []string{"1.0"}
	h[HeaderPrefix+"id"] = []string{e.ID}
	h[HeaderPrefix+"source"] = []string{e.Source}
	h[HeaderPrefix+"type"] = []string{t}
	h[HeaderPrefix+"subject"] = []string{subject}
	h[HeaderPrefix+"time"] = []string{types.FormatTime(e.Time)}
	h[HeaderPrefix+ExtCausation] = []string{e.CausationID}
	h[HeaderPrefix+ExtCorrelation] = []string{e.Aggregate.Manager.UID}
	h[HeaderContentType] = []string{ContentType}
	h[MsgIDHeader] = []string{e.ID}
	return msg, true
}
