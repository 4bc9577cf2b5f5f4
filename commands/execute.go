package commands

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/eventstore"
)

// maxConflictRetries bounds reload-decide-append rounds under contention.
// Every round makes progress for somebody, so running out means a hot loop
// elsewhere, not bad luck.
const maxConflictRetries = 16

// Machine binds a state machine's pure functions for an Aggregate.
type Machine[S any, C Command] struct {
	Name   string
	Zero   S
	Evolve func(S, events.Envelope) (S, error)
	// FoldStopping, when set, applies several events at once as Evolve would one
	// by one, for machines whose Evolve copies state a fold may share (see
	// nodeupgrade.Folder); nil folds with Evolve.
	FoldStopping func(S, []events.Envelope) (S, error)
	Decide       func(S, C) ([]events.Event, error)
	Snapshot     *eventstore.Snapshotting
	// Cache, when set, keeps folded states between loads (see StateCache).
	Cache *StateCache[S]
}

// fold applies envs to s, stopping at the first that does not apply.
func (m Machine[S, C]) fold(s S, envs []events.Envelope) (S, error) {
	if m.FoldStopping != nil {
		return m.FoldStopping(s, envs)
	}
	for _, e := range envs {
		var err error
		if s, err = m.Evolve(s, e); err != nil {
			return s, err
		}
	}
	return s, nil
}

// Command is what both machines' commands are: the id every event id
// derives from.
type Command interface{ CommandID() string }

// Result is what Execute did.
type Result[S any] struct {
	// State is the aggregate after the command (and any events appended).
	State S
	// Version is the aggregate's version after the command.
	Version uint64
	// Appended are the events this call stored; empty when the command was
	// already satisfied (idempotent repeat) or decided nothing.
	Appended []events.Envelope
	// Problems are parked or refused events met while loading.
	Problems []error
}

// Aggregate executes the commands of one state machine against a store, as
// one source, stamping events with its clock.
type Aggregate[S any, C Command] struct {
	store   *eventstore.Store
	machine Machine[S, C]
	source  string
	now     func() time.Time
}

// NewAggregate binds m to store, source and now (nil: time.Now).
func NewAggregate[S any, C Command](store *eventstore.Store, m Machine[S, C], source string, now func() time.Time) *Aggregate[S, C] {
	if now == nil {
		now = time.Now
	}
	return &Aggregate[S, C]{store: store, machine: m, source: source, now: now}
}

// Execute runs one command: load the aggregate, decide, append with the
// version it decided on, and on a concurrency conflict start over from a
// fresh load. The events' ids derive from the command id and the version
// decided on, so a retry of the same decision deduplicates while a later
// repeat of the same kind of command (a second stall, say) is a new event.
func (a *Aggregate[S, C]) Execute(ctx context.Context, agg events.AggregateID, cmd C) (Result[S], error) {
	return a.ExecuteFrom(ctx, agg, nil, cmd)
}

// ExecuteFrom is Execute starting from a state the caller already holds (a
// worker is the only regular writer of its node, so its copy is nearly always
// current); a stale copy costs one concurrency conflict and a reload.
func (a *Aggregate[S, C]) ExecuteFrom(ctx context.Context, agg events.AggregateID, from *eventstore.Loaded[S], cmd C) (Result[S], error) {
	m := a.machine
	causation := cmd.CommandID()
	var lastErr error
	for range maxConflictRetries {
		var loaded eventstore.Loaded[S]
		if from != nil {
			loaded, from = *from, nil
		} else {
			var err error
			if loaded, err = loadState(ctx, a.store, m, agg); err != nil {
				return Result[S]{}, fmt.Errorf("%s %s: %w", m.Name, agg, err)
			}
		}
		decided, err := m.Decide(loaded.State, cmd)
		if err != nil {
			return Result[S]{State: loaded.State, Version: loaded.Version}, fmt.Errorf("%s %s: %w", m.Name, agg, err)
		}
		if len(decided) == 0 {
			return Result[S]{State: loaded.State, Version: loaded.Version, Problems: loaded.Problems}, nil
		}
		envs := events.New(agg, a.source, fmt.Sprintf("%s@%d", causation, loaded.Version), a.now(), decided...)
		version, err := a.store.Append(ctx, agg, loaded.Version, envs...)
		var conflict *eventstore.ConflictError
		if errors.As(err, &conflict) {
			lastErr = err
			continue
		}
		if err != nil {
			return Result[S]{}, fmt.Errorf("%s %s: %w", m.Name, agg, err)
		}
		// Decide promised these apply; a refusal here is a bug in the
		// machine, worth surfacing rather than hiding.
		state, err := m.fold(loaded.State, envs)
		if err != nil {
			return Result[S]{}, fmt.Errorf("%s %s: decided event does not apply: %w", m.Name, agg, err)
		}
		remember(a.store, m, agg, state, version, len(envs))
		return Result[S]{State: state, Version: version, Appended: envs, Problems: loaded.Problems}, nil
	}
	return Result[S]{}, fmt.Errorf("%s %s: gave up after %d concurrency conflicts: %w", m.Name, agg, maxConflictRetries, lastErr)
}

// Load folds an aggregate without deciding anything.
func (a *Aggregate[S, C]) Load(ctx context.Context, agg events.AggregateID) (eventstore.Loaded[S], error) {
	l, err := loadState(ctx, a.store, a.machine, agg)
	if err != nil {
		return l, fmt.Errorf("%s %s: %w", a.machine.Name, agg, err)
	}
	return l, nil
}
