package events

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
)

// CloudEvents extension attributes carried by every Switchback event.
const (
	// ExtCausation is the id of the command that caused the event.
	ExtCausation = "causationid"
	// ExtCorrelation is the manager's UID: every event of one upgrade shares it.
	ExtCorrelation = "correlationid"
)

// ContentType is the only data content type Switchback writes and reads.
const ContentType = "application/json"

// Sources of events, the CloudEvents "source" attribute. A worker appends its
// node's name: "switchback/worker/<node>".
const (
	SourceIntake     = "switchback/intake"
	SourceController = "switchback/controller"
	SourceWorker     = "switchback/worker"
)

// Envelope is one domain event with its CloudEvents context.
type Envelope struct {
	// ID is derived from the causing command (see DeriveID), so a retried
	// command produces the same id and JetStream deduplicates it.
	ID        string
	Source    string
	Aggregate AggregateID
	Time      time.Time
	// CausationID is the id of the command that produced the event.
	CausationID string
	Data        Event
	// Sequence is the stream sequence; set only on envelopes read from a stream.
	Sequence uint64
}

// Type returns the CloudEvents type of the payload.
func (e Envelope) Type() Type { return e.Data.EventType() }

// DeriveID returns the deterministic event id for the index-th event that
// command causationID produced on aggregate agg.
func DeriveID(agg AggregateID, causationID string, index int) string {
	h := sha256.New()
	h.Write([]byte(agg.Subject()))
	h.Write([]byte{0})
	h.Write([]byte(causationID))
	h.Write([]byte{0})
	h.Write([]byte(strconv.Itoa(index)))
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// New builds the envelopes for the events one command produced, in order, with
// ids derived from the command id. Time comes in: the caller owns the clock.
func New(agg AggregateID, source, causationID string, at time.Time, data ...Event) []Envelope {
	out := make([]Envelope, len(data))
	for i, d := range data {
		out[i] = Envelope{
			ID:          DeriveID(agg, causationID, i),
			Source:      source,
			Aggregate:   agg,
			Time:        at.UTC(),
			CausationID: causationID,
			Data:        d,
		}
	}
	return out
}

// TypePrefix is the catalogue namespace every type of agg's events belongs
// to: a node's or a manager's.
func (agg AggregateID) TypePrefix() string {
	if agg.IsNode() {
		return "io.switchback.node."
	}
	return "io.switchback.manager."
}

// ToCloudEvent builds and validates the CloudEvent for e.
func (e Envelope) ToCloudEvent() (cloudevents.Event, error) {
	if e.Data == nil {
		return cloudevents.Event{}, fmt.Errorf("event %s on %s: no data", e.ID, e.Aggregate)
	}
	if err := e.Aggregate.Validate(); err != nil {
		return cloudevents.Event{}, fmt.Errorf("event %s: %w", e.ID, err)
	}
	t := e.Type()
	if !strings.HasPrefix(string(t), e.Aggregate.TypePrefix()) {
		return cloudevents.Event{}, fmt.Errorf("event %s: type %s does not belong on aggregate %s", e.ID, t, e.Aggregate)
	}
	if err := Validate(e.Data); err != nil {
		return cloudevents.Event{}, fmt.Errorf("event %s %s on %s: %w", e.ID, t, e.Aggregate, err)
	}
	ce := cloudevents.New(cloudevents.CloudEventsVersionV1)
	ce.SetID(e.ID)
	ce.SetSource(e.Source)
	ce.SetType(string(t))
	ce.SetSubject(e.Aggregate.String())
	ce.SetTime(e.Time)
	ce.SetExtension(ExtCausation, e.CausationID)
	ce.SetExtension(ExtCorrelation, e.Aggregate.Manager.UID)
	if err := ce.SetData(ContentType, e.Data); err != nil {
		return cloudevents.Event{}, fmt.Errorf("event %s %s: encode data: %w", e.ID, t, err)
	}
	if err := ce.Validate(); err != nil {
		return cloudevents.Event{}, fmt.Errorf("event %s %s: %w", e.ID, t, err)
	}
	return ce, nil
}

// FromCloudEvent checks a CloudEvent read from natsSubject against the
// aggregate that subject names and decodes its data.
func FromCloudEvent(natsSubject string, ce cloudevents.Event) (Envelope, error) {
	fail := func(kind error, err error) (Envelope, error) {
		return Envelope{}, &DecodeError{Kind: kind, Subject: natsSubject, Type: ce.Type(), Err: err}
	}
	if err := ce.Validate(); err != nil {
		return fail(ErrBadHeader, err)
	}
	if ct := ce.DataContentType(); ct != ContentType {
		return fail(ErrBadHeader, fmt.Errorf("datacontenttype %q, want %q", ct, ContentType))
	}
	agg, err := ParseSubject(natsSubject)
	if err != nil {
		return fail(ErrWrongSubject, err)
	}
	if ce.Subject() != agg.String() {
		return fail(ErrWrongSubject, fmt.Errorf("ce-subject %q does not match aggregate %q", ce.Subject(), agg))
	}
	ext := ce.Extensions()
	corr, _ := ext[ExtCorrelation].(string)
	if corr != agg.Manager.UID {
		return fail(ErrWrongSubject, fmt.Errorf("ce-%s %q does not match manager uid %q", ExtCorrelation, corr, agg.Manager.UID))
	}
	causation, _ := ext[ExtCausation].(string)
	if causation == "" {
		return fail(ErrBadHeader, fmt.Errorf("ce-%s is required", ExtCausation))
	}
	t := Type(ce.Type())
	data, err := DecodeData(t, ce.Data())
	if err != nil {
		var de *DecodeError
		if errors.As(err, &de) {
			de.Subject = natsSubject
			return Envelope{}, de
		}
		return fail(ErrBadData, err)
	}
	if !strings.HasPrefix(string(data.EventType()), agg.TypePrefix()) {
		return fail(ErrWrongSubject, fmt.Errorf("type %s does not belong on aggregate %s", t, agg))
	}
	return Envelope{
		ID:          ce.ID(),
		Source:      ce.Source(),
		Aggregate:   agg,
		Time:        ce.Time().UTC(),
		CausationID: causation,
		Data:        data,
	}, nil
}
