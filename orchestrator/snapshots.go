package orchestrator

import (
	"context"
	"errors"
	"fmt"

	"github.com/switchback-dev/switchback/aggregate"
	"github.com/switchback-dev/switchback/aggregate/manager"
	"github.com/switchback-dev/switchback/aggregate/nodeupgrade"
	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/events"
)

// The upgrade's snapshots (one per node and attached volume, taken before
// the node is touched) are kept until the whole upgrade completed: each
// holds what was written before its node, hashed for the rebuilds of the
// nodes after it, and deleting one merges it into its child and clears
// that child's checksum, so a later node's rebuild would copy it whole.
// The controller removes them all once the last node completed, before it
// records the upgrade completed, each node's recorded in its history
// (SnapshotsRemoved); on cancel and error they are kept, for recovery. A worker removes none: it may touch only its own
// node's snapshots, and a volume's last rebuild may come on another node.

// SnapshotRemover removes a volume's snapshot; one gone is success.
type SnapshotRemover interface {
	DeleteSnapshot(ctx context.Context, volume, name string) error
}

// removeSnapshots removes the recorded snapshots of every completed node
// of st, whose last node completed, and records each node's removal. Redelivered, it
// finds the removals recorded and does nothing.
func (o *Orchestrator) removeSnapshots(ctx context.Context, st manager.State) error {
	if o.snaps == nil || o.cfg.KeepSnapshots {
		return nil
	}
	for _, node := range st.Plan {
		agg := events.NodeAggregate(st.Ref, node)
		ns, err := o.loadNode(ctx, agg, 0)
		if err != nil {
			return err
		}
		s := ns.Snapshots
		if s == nil || s.Removed || ns.State != events.NodeCompleted {
			continue
		}
		var errs []error
		for _, v := range s.Volumes {
			if err := o.snaps.DeleteSnapshot(ctx, v, s.Name); err != nil && !errors.Is(err, dataplane.ErrNotFound) {
				errs = append(errs, fmt.Errorf("volume %s: %w", v, err))
			}
		}
		if err := errors.Join(errs...); err != nil {
			return fmt.Errorf("orchestrator: remove the snapshots %s of node %s: %w", s.Name, node, err)
		}
		if _, err := o.x.Nodes.Execute(ctx, agg, nodeupgrade.Command(nodeupgrade.ConfirmSnapshotsRemoved{Meta: aggregate.Meta{ID: "controller/" + st.Ref.UID + "/snapshots-removed/" + node}})); err != nil {
			return err
		}
		o.log.Info("upgrade snapshots removed", "manager", st.Ref.String(), "node", node, "snapshot", s.Name, "volumes", len(s.Volumes))
	}
	return nil
}
