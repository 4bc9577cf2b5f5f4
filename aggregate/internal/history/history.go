// Package history reads and writes recorded event histories as JSON, for the
// golden replay tests of the aggregates. Each record is the NATS subject the
// event was appended on and the CloudEvent in structured JSON, so a history
// file reads like the stream and decodes through the real catalogue
// (events.FromCloudEvent), validation included.
package history

import (
	"bytes"
	"encoding/json"
	"fmt"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"

	"github.com/switchback-dev/switchback/events"
)

// Record is one stored event.
type Record struct {
	Subject string            `json:"subject"`
	Event   cloudevents.Event `json:"event"`
}

// Marshal encodes envelopes as an indented JSON array of records.
func Marshal(envs []events.Envelope) ([]byte, error) {
	recs := make([]Record, 0, len(envs))
	for i, e := range envs {
		ce, err := e.ToCloudEvent()
		if err != nil {
			return nil, fmt.Errorf("history: record %d: %w", i, err)
		}
		recs = append(recs, Record{Subject: e.Aggregate.Subject(), Event: ce})
	}
	out, err := json.MarshalIndent(recs, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	return append(out, '\n'), nil
}

// Unmarshal decodes a JSON array of records into envelopes, checking each
// against the catalogue exactly as a stream consumer would.
func Unmarshal(data []byte) ([]events.Envelope, error) {
	var recs []Record
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&recs); err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	envs := make([]events.Envelope, 0, len(recs))
	for i, r := range recs {
		e, err := events.FromCloudEvent(r.Subject, r.Event)
		if err != nil {
			return nil, fmt.Errorf("history: record %d: %w", i, err)
		}
		e.Sequence = uint64(i + 1)
		envs = append(envs, e)
	}
	return envs, nil
}
