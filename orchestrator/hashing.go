package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/switchback-dev/switchback/aggregate/nodeupgrade"
	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/events"
)

// The on-demand hashing of a volume's snapshots, asked for by the
// controller from the node upgrade's history (events.HashingRequested):
// it reads the volume on every node holding a replica of it, so a worker,
// whose writes are held to its own node's objects, never asks for it. The
// request is written only for a volume the node's history recorded and
// that, as read, has a replica on the node: a worker's history alone does
// not start reads on other nodes for a volume its node does not hold.

// requestHashing writes the event's request into its volume. A request of
// Longhorn's or someone else's in progress is left alone (Longhorn refuses
// a second one): the worker waits for it, or for its deadline.
func (o *Orchestrator) requestHashing(ctx context.Context, e events.Envelope, st nodeupgrade.State) error {
	d, ok := e.Data.(events.HashingRequested)
	if !ok || o.hasher == nil {
		return nil
	}
	node := e.Aggregate.Node
	log := o.log.With("manager", e.Aggregate.Manager.String(), "node", node, "volume", d.Volume)
	if _, ok := st.Volumes[d.Volume]; !ok {
		log.Warn("snapshot hashing not requested: the node's history does not record the volume")
		return nil
	}
	v, err := o.cfg.Cluster.Volume(ctx, d.Volume)
	if errors.Is(err, dataplane.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("orchestrator: hashing of volume %s's snapshots for %s: %w", d.Volume, node, err)
	}
	if !slices.ContainsFunc(v.Replicas, func(r dataplane.Replica) bool { return r.Node == node }) {
		log.Warn("snapshot hashing not requested: the volume has no replica on the node")
		return nil
	}
	if v.Hashing.CompletedSince(d.At) {
		return nil
	}
	err = o.hasher.RequestSnapshotHashing(ctx, d.Volume, d.At)
	switch {
	case errors.Is(err, dataplane.ErrNotFound):
		return nil
	case errors.Is(err, dataplane.ErrRefused):
		log.Info("snapshot hashing not requested: another request is in progress", "why", err)
		return nil
	case err != nil:
		return fmt.Errorf("orchestrator: hashing of volume %s's snapshots for %s: %w", d.Volume, node, err)
	}
	log.Info("snapshot hashing requested", "at", d.At)
	return nil
}
