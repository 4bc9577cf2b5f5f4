package fastcodec

import (
	"encoding/json"
	"strings"

	"github.com/cloudevents/sdk-go/v2/types"
	"github.com/nats-io/nats.go"

	"github.com/switchback-dev/switchback/events"
)

// Encode returns what events.Encode returns for e. A plainly valid envelope
// is written without building a CloudEvent (a URL parse of the source, an
// extension map, a generic data codec, a validation pass were most of an
// append's client cost); anything the SDK would normalise or refuse is
// events.Encode's to write or refuse.
func Encode(e events.Envelope) (*nats.Msg, error) {
	if msg, ok := encodeFast(e); ok {
		return msg, nil
	}
	return events.Encode(e)
}

// encodeFast applies events.Encode's checks and gives up (ok=false) on
// anything they would not pass unchanged.
func encodeFast(e events.Envelope) (*nats.Msg, bool) {
	if e.Data == nil || e.Aggregate.Validate() != nil || e.Time.IsZero() {
		return nil, false
	}
	t := string(e.Type())
	if !strings.HasPrefix(t, e.Aggregate.TypePrefix()) || t != strings.TrimSpace(t) {
		return nil, false
	}
	if e.ID == "" || e.ID != strings.TrimSpace(e.ID) || !plainSource(e.Source) {
		return nil, false
	}
	subject := e.Aggregate.String()
	if subject != strings.TrimSpace(subject) {
		return nil, false
	}
	if events.Validate(e.Data) != nil {
		return nil, false
	}
	data, err := json.Marshal(e.Data)
	if err != nil || len(data) > events.MaxDataBytes {
		return nil, false
	}
	msg := &nats.Msg{Subject: e.Aggregate.Subject(), Header: make(nats.Header, 10), Data: data}
	// One array backs the ten one-value slices (one allocation, not ten);
	// each is capped at its value, so an append to one copies it first.
	vals := [...]string{"1.0", e.ID, e.Source, t, subject, types.FormatTime(e.Time), e.CausationID, e.Aggregate.Manager.UID, events.ContentType, e.ID}
	backing := vals[:]
	one := func(i int) []string { return backing[i : i+1 : i+1] }
	h := msg.Header
	for i, k := range wireHeaderNames {
		h[k] = one(i)
	}
	h[events.MsgIDHeader] = one(nHeaders)
	return msg, true
}
