package events

import (
	"errors"
	"fmt"
)

// Sentinel kinds of DecodeError; test with errors.Is.
var (
	// ErrBadHeader: a CloudEvents header is missing or malformed.
	ErrBadHeader = errors.New("bad CloudEvents header")
	// ErrUnknownType: the "type" attribute is not in the catalogue.
	ErrUnknownType = errors.New("unknown event type")
	// ErrBadData: the JSON body does not decode into the type's schema or fails its validation.
	ErrBadData = errors.New("bad event data")
	// ErrWrongSubject: the NATS subject does not match the event's own identity.
	ErrWrongSubject = errors.New("event on wrong subject")
	// ErrTooLarge: the body exceeds MaxDataBytes.
	ErrTooLarge = errors.New("event data too large")
)

// DecodeError is returned for any message that cannot become an Envelope. It
// carries where the message came from, so a consumer can park and report it.
type DecodeError struct {
	Kind     error // one of the Err* sentinels above
	Subject  string
	Sequence uint64
	Type     string
	Err      error
}

// Error implements error.
func (e *DecodeError) Error() string {
	msg := fmt.Sprintf("decode event on %q", e.Subject)
	if e.Sequence != 0 {
		msg += fmt.Sprintf(" (seq %d)", e.Sequence)
	}
	if e.Type != "" {
		msg += fmt.Sprintf(" type %q", e.Type)
	}
	msg += ": " + e.Kind.Error()
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap exposes both the kind and the cause to errors.Is/As.
func (e *DecodeError) Unwrap() []error {
	if e.Err == nil {
		return []error{e.Kind}
	}
	return []error{e.Kind, e.Err}
}
