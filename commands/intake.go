package commands

import (
	"context"
	"fmt"
	"time"

	"github.com/switchback-dev/switchback/aggregate/manager"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/eventstore"
)

// RequestUpgrade records a new manager's intent (keyed by its UID, so the
// informer's resyncs and restarts record it once).
func RequestUpgrade(ctx context.Context, store *eventstore.Store, ref events.ManagerRef, generation int64, dataEngine string, nodes []string, at time.Time) (Result[manager.State], error) {
	return Execute(ctx, store, ManagerMachine, events.ManagerAggregate(ref), events.SourceIntake, at,
		manager.Command(manager.RequestUpgrade{ID: fmt.Sprintf("intake/%s/request", ref.UID), Ref: ref, Generation: generation, DataEngine: dataEngine, Nodes: nodes}))
}

// RequestCancel records that the manager was deleted: there is no cancel verb.
func RequestCancel(ctx context.Context, store *eventstore.Store, ref events.ManagerRef, reason string, at time.Time) (Result[manager.State], error) {
	return Execute(ctx, store, ManagerMachine, events.ManagerAggregate(ref), events.SourceIntake, at,
		manager.Command(manager.RequestCancel{ID: fmt.Sprintf("intake/%s/cancel", ref.UID), Reason: reason}))
}
