package nodeupgrade

import (
	"errors"

	"github.com/switchback-dev/switchback/aggregate"
)

// Machine is the name errors give this state machine.
const Machine = "node upgrade"

// Re-exported so callers of this package need not import package aggregate.
var (
	// ErrIllegalTransition matches every *TransitionError.
	ErrIllegalTransition = aggregate.ErrIllegalTransition
	// ErrIllegalCommand matches every *CommandError.
	ErrIllegalCommand = aggregate.ErrIllegalCommand
	// ErrConflict matches a command that repeats an earlier one differently.
	ErrConflict = aggregate.ErrConflict
	// ErrNotFound matches a command addressed to a node upgrade with no history.
	ErrNotFound = aggregate.ErrNotFound
)

// ErrVolumesNotReady is the kind of a refused CompleteStep or ConfirmCancelled
// whose volumes are not where the step needs them (a target still away, a
// volume not completed). It is a reason to wait and retry, not a bug.
var ErrVolumesNotReady = errors.New("volumes not ready")

// TransitionError is the error Evolve returns for an illegal event.
type TransitionError = aggregate.TransitionError

// CommandError is the error Decide returns for a refused command.
type CommandError = aggregate.CommandError

func refuse(s State, cmd Command, cause error, format string, args ...any) error {
	return offer(s, cmd).Refuse(cause, format, args...)
}
