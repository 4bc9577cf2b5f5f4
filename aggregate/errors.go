package aggregate

import (
	"errors"
	"fmt"

	"github.com/switchback-dev/switchback/events"
)

// Sentinels for errors.Is. TransitionError and CommandError unwrap to them so
// callers can branch on the kind without knowing which machine answered.
var (
	// ErrIllegalTransition: an event cannot be applied to the current state.
	ErrIllegalTransition = errors.New("illegal transition")
	// ErrIllegalCommand: a command makes no sense in the current state.
	ErrIllegalCommand = errors.New("illegal command")
	// ErrConflict: a command repeats an earlier one with different content
	// (e.g. a changed spec for an already requested upgrade). Retrying it
	// cannot succeed; a CommandError with this kind also matches
	// ErrIllegalCommand.
	ErrConflict = errors.New("conflicts with recorded history")
	// ErrNotFound: the command needs an aggregate whose history is empty.
	ErrNotFound = errors.New("aggregate does not exist")
)

// Absent is the state name errors report for an aggregate with no history.
const Absent = "absent"

// TransitionError reports an event that Evolve refused. The state it was
// offered to is returned unchanged alongside it.
type TransitionError struct {
	// Machine names the state machine ("manager" or "node upgrade").
	Machine string
	// Aggregate is the aggregate the event was addressed to.
	Aggregate events.AggregateID
	// State is the aggregate's state when the event arrived (Absent if none).
	State string
	// Event is the refused event's type; EventID its id.
	Event   events.Type
	EventID string
	// Reason says which rule the event breaks.
	Reason string
}

// Error implements error.
func (e *TransitionError) Error() string {
	return fmt.Sprintf("%s %s: %s: event %s (id %s) in state %q: %s",
		e.Machine, e.Aggregate, ErrIllegalTransition, e.Event, e.EventID, e.State, e.Reason)
}

// Unwrap makes errors.Is(err, ErrIllegalTransition) hold.
func (e *TransitionError) Unwrap() error { return ErrIllegalTransition }

// CommandError reports a command that Decide refused; no event was produced.
type CommandError struct {
	// Machine names the state machine ("manager" or "node upgrade").
	Machine string
	// Aggregate names the aggregate (namespace/name[/nodes/node]); it may be
	// empty when the aggregate does not exist and the command does not name it.
	Aggregate string
	// State is the aggregate's state when the command arrived (Absent if none).
	State string
	// Command is the command's type name; CommandID its id.
	Command   string
	CommandID string
	// Reason says why the command was refused.
	Reason string
	// Err is an optional cause or finer kind (ErrConflict, ErrNotFound, or a
	// payload validation error); it is exposed to errors.Is/As.
	Err error
}

// Error implements error.
func (e *CommandError) Error() string {
	agg := e.Aggregate
	if agg == "" {
		agg = "(unnamed)"
	}
	msg := fmt.Sprintf("%s %s: %s %s (id %q) in state %q: %s",
		e.Machine, agg, ErrIllegalCommand, e.Command, e.CommandID, e.State, e.Reason)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap exposes ErrIllegalCommand and the cause, if any.
func (e *CommandError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrIllegalCommand}
	}
	return []error{ErrIllegalCommand, e.Err}
}
