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
	// One array backs the ten one-value slices (one allocation, not ten);
	// each is capped at its value, so an append to one copies it first.
	vals := [...]string{"1.0", e.ID, e.Source, t, subject, types.FormatTime(e.Time), e.CausationID, e.Aggregate.Manager.UID, ContentType, e.ID}
	backing := vals[:]
	one := func(i int) []string { return backing[i : i+1 : i+1] }
	h := msg.Header
	h[HeaderPrefix+"specversion"] = one(0)
	h[HeaderPrefix+"id"] = one(1)
	h[HeaderPrefix+"source"] = one(2)
	h[HeaderPrefix+"type"] = one(3)
	h[HeaderPrefix+"subject"] = one(4)
	h[HeaderPrefix+"time"] = one(5)
	h[HeaderPrefix+ExtCausation] = one(6)
	h[HeaderPrefix+ExtCorrelation] = one(7)
	h[HeaderContentType] = one(8)
	h[MsgIDHeader] = one(9)
	return msg, true
}
