package manager

import (
	"fmt"

	"github.com/switchback-dev/switchback/aggregate"
	"github.com/switchback-dev/switchback/events"
)

// Machine is the name errors give this state machine.
const Machine = "manager"

// Reasons this package writes into UpgradeFailed.
const (
	// ReasonPrecheckFailed: at least one precheck failed.
	ReasonPrecheckFailed = "PrecheckFailed"
	// ReasonNodeUpgradeFailed: a node upgrade ended in error.
	ReasonNodeUpgradeFailed = "NodeUpgradeFailed"
)

// Re-exported so callers of this package need not import package aggregate.
var (
	// ErrIllegalTransition matches every *TransitionError.
	ErrIllegalTransition = aggregate.ErrIllegalTransition
	// ErrIllegalCommand matches every *CommandError.
	ErrIllegalCommand = aggregate.ErrIllegalCommand
	// ErrConflict matches a command that repeats an earlier one differently.
	ErrConflict = aggregate.ErrConflict
	// ErrNotFound matches a command addressed to a manager with no history.
	ErrNotFound = aggregate.ErrNotFound
)

// TransitionError is the error Evolve returns for an illegal event.
type TransitionError = aggregate.TransitionError

// CommandError is the error Decide returns for a refused command.
type CommandError = aggregate.CommandError

func illegal(s State, e events.Envelope, format string, args ...any) error {
	var t events.Type
	if e.Data != nil {
		t = e.Type()
	}
	return &TransitionError{
		Machine:   Machine,
		Aggregate: e.Aggregate,
		State:     s.stateName(),
		Event:     t,
		EventID:   e.ID,
		Reason:    fmt.Sprintf(format, args...),
	}
}

func refuse(s State, cmd Command, cause error, format string, args ...any) error {
	agg := ""
	if s.Exists {
		agg = s.Ref.String()
	} else if r, ok := cmd.(RequestUpgrade); ok && r.Ref.Name != "" {
		agg = r.Ref.String()
	}
	return &CommandError{
		Machine:   Machine,
		Aggregate: agg,
		State:     s.stateName(),
		Command:   cmd.commandName(),
		CommandID: cmd.CommandID(),
		Reason:    fmt.Sprintf(format, args...),
		Err:       cause,
	}
}
