package aggregate

import (
	"fmt"
	"slices"

	"github.com/switchback-dev/switchback/events"
)

// Subject is the state an event is offered to, as the checks every event
// passes before a machine's own rules need it, and as a TransitionError
// reports it.
type Subject struct {
	// Machine names the state machine ("manager" or "node upgrade").
	Machine string
	// Exists and Terminal say whether the aggregate has a history and
	// whether that history has ended.
	Exists, Terminal bool
	// State is the state the history reached (ignored if it does not
	// exist).
	State string
	// Opener is the one event type that opens an aggregate with no history.
	Opener events.Type
	// AfterEnd are the event types a terminal state still admits: records
	// of cleanup made once the history ended.
	AfterEnd []events.Type
}

// Name is the state's name in errors: Absent for an aggregate with no
// history.
func (s Subject) Name() string {
	if !s.Exists {
		return Absent
	}
	return s.State
}

// Illegal returns the *TransitionError refusing e, for the formatted reason.
func (s Subject) Illegal(e events.Envelope, format string, args ...any) error {
	var t events.Type
	if e.Data != nil {
		t = e.Type()
	}
	return &TransitionError{
		Machine:   s.Machine,
		Aggregate: e.Aggregate,
		State:     s.Name(),
		Event:     t,
		EventID:   e.ID,
		Reason:    fmt.Sprintf(format, args...),
	}
}

// Admit runs, in this order, the checks every event passes before a
// machine's own rules: it has data; it is addressed to this aggregate
// (foreign says why not, "" when it is: what addresses an aggregate differs
// between the machines); its payload is valid; and it may be applied at all,
// since only Opener opens an aggregate with no history and nothing follows a
// terminal state. It returns the *TransitionError of the first check e fails.
func (s Subject) Admit(e events.Envelope, foreign string) error {
	if e.Data == nil {
		return s.Illegal(e, "event has no data")
	}
	if foreign != "" {
		return s.Illegal(e, "%s", foreign)
	}
	// History is validated when decoded, but Evolve must hold its invariants
	// for any input (fuzzing, hand-built envelopes, a buggy writer).
	if err := events.Validate(e.Data); err != nil {
		return s.Illegal(e, "invalid payload: %v", err)
	}
	switch {
	case !s.Exists && e.Type() != s.Opener:
		return s.Illegal(e, "the %s has no history; only %s can open it", s.Machine, s.Opener)
	case s.Terminal && !slices.Contains(s.AfterEnd, e.Type()):
		return s.Illegal(e, "state %s is terminal", s.State)
	}
	return nil
}

// Offer is a command offered to a state, as the checks every command passes
// before a machine's own rules need it, and as a CommandError reports it.
type Offer struct {
	// Machine names the state machine ("manager" or "node upgrade").
	Machine string
	// Aggregate names the aggregate as CommandError.Aggregate does.
	Aggregate string
	// State is the aggregate's state (Absent if it has no history).
	State string
	// Command is the command's type name, empty for no command at all;
	// CommandID its id.
	Command, CommandID string
}

// Offer returns the command named command with id offered to this subject,
// whose aggregate is called aggregate in errors (see CommandError.Aggregate).
// Both names are empty for no command at all.
func (s Subject) Offer(aggregate, command, id string) Offer {
	return Offer{Machine: s.Machine, Aggregate: aggregate, State: s.Name(), Command: command, CommandID: id}
}

// Refuse returns the *CommandError refusing the command, for the formatted
// reason and an optional cause (see CommandError.Err).
func (o Offer) Refuse(cause error, format string, args ...any) error {
	return &CommandError{
		Machine:   o.Machine,
		Aggregate: o.Aggregate,
		State:     o.State,
		Command:   o.Command,
		CommandID: o.CommandID,
		Reason:    fmt.Sprintf(format, args...),
		Err:       cause,
	}
}

// Screen runs the checks every command passes before a machine's own rules:
// there is one (a refusal of none names the command "<nil>"), it has an id,
// since the ids of its events derive from it, and it addresses
// an aggregate that exists unless it is the command that opens one (found);
// notFound says what is missing otherwise.
func (o Offer) Screen(found bool, notFound string) error {
	if o.Command == "" {
		o.Command = "<nil>"
		return o.Refuse(nil, "no command")
	}
	if o.CommandID == "" {
		return o.Refuse(nil, "command id is required: event ids derive from it")
	}
	if !found {
		return o.Refuse(ErrNotFound, "%s", notFound)
	}
	return nil
}

// Accept returns a decision's events once the catalogue's payload validation
// passes on them, so Decide never hands out an event the store would refuse
// to encode; a decision that failed (err) is returned as it is.
func (o Offer) Accept(evs []events.Event, err error) ([]events.Event, error) {
	if err != nil {
		return nil, err
	}
	if err := ValidatePayloads(evs); err != nil {
		return nil, o.Refuse(err, "the command would produce an invalid event")
	}
	return evs, nil
}

// CancelRequestedMessage is the status message of an aggregate whose cancel
// was requested for reason (which may be empty); both machines record a
// cancel request the same way.
func CancelRequestedMessage(reason string) string {
	if reason == "" {
		return "cancel requested"
	}
	return "cancel requested: " + reason
}
