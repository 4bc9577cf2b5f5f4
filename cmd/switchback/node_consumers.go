package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/nodequeue"
)

// nodeConsumerResync is how often the leader looks for nodes that joined.
// A command for a node without a consumer waits in the command stream (a
// new durable consumer starts at the node's first kept command), so a
// joining node loses nothing meanwhile.
const nodeConsumerResync = 30 * time.Second

// ensureNodeConsumers creates the command consumer of every node, now and
// then for each node that joins, until ctx ends. Workers only bind to their
// consumer (their NATS user may not create one), so the leader does it.
// Every pass on a new leadership covers all nodes again: creating is
// idempotent, and it also applies a changed consumer configuration after
// the controller itself was upgraded.
func ensureNodeConsumers(ctx context.Context, q *nodequeue.Queue, cluster dataplane.Reader, log *slog.Logger) error {
	done := map[string]bool{}
	for {
		nodes, err := cluster.Nodes(ctx)
		if err != nil {
			log.Warn("listing nodes for their command consumers", "error", err)
		}
		for _, n := range nodes {
			if done[n.Name] {
				continue
			}
			if err := q.EnsureNodeConsumers(ctx, n.Name); err != nil {
				log.Warn("creating a node's command consumer", "node", n.Name, "error", err)
				continue
			}
			done[n.Name] = true
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(nodeConsumerResync):
		}
	}
}
