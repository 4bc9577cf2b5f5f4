package manager

import (
	"github.com/switchback-dev/switchback/aggregate"
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

func refuse(s State, cmd Command, cause error, format string, args ...any) error {
	return offer(s, cmd).Refuse(cause, format, args...)
}
