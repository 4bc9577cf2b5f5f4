package intake

import (
	"context"
	"fmt"

	"github.com/switchback-dev/switchback/aggregate"
	"github.com/switchback-dev/switchback/aggregate/manager"
	"github.com/switchback-dev/switchback/api/v1beta2"
	"github.com/switchback-dev/switchback/commands"
	"github.com/switchback-dev/switchback/events"
)

// RequestUpgrade records a new manager's intent (keyed by its UID, so the
// informer's resyncs and restarts record it once). x runs as the intake
// (events.SourceIntake).
func RequestUpgrade(ctx context.Context, x *commands.Executor, ref events.ManagerRef, generation int64, spec v1beta2.DataEngineUpgradeManagerSpec) (commands.Result[manager.State], error) {
	return x.Managers.Execute(ctx, events.ManagerAggregate(ref),
		manager.Command(manager.RequestUpgrade{Meta: aggregate.Meta{ID: fmt.Sprintf("intake/%s/request", ref.UID)}, Ref: ref, Generation: generation,
			DataEngine: string(spec.DataEngine), Nodes: spec.Nodes, AllowNodesWithoutReplicaScheduling: spec.AllowNodesWithoutReplicaScheduling,
			InitiatorPolicy: string(spec.InitiatorPolicy), ReplicaPolicy: string(spec.ReplicaPolicy)}))
}

// RequestCancel records that the manager was deleted: there is no cancel verb.
func RequestCancel(ctx context.Context, x *commands.Executor, ref events.ManagerRef, reason string) (commands.Result[manager.State], error) {
	return x.Managers.Execute(ctx, events.ManagerAggregate(ref),
		manager.Command(manager.RequestCancel{Meta: aggregate.Meta{ID: fmt.Sprintf("intake/%s/cancel", ref.UID)}, Reason: reason}))
}
