package orchestrator

import (
	"context"
	"errors"
	"fmt"

	"github.com/switchback-dev/switchback/aggregate/manager"
	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/events"
)

// The marks of the nodes still to come (dataplane.UpgradePendingTaintKey).
// An upgrade that moves workloads marks every planned node once it is
// planned, and unmarks each as its outcome is recorded, and all of them
// once the upgrade ends or is cancelled: the pods moved off the node in
// flight then land, where they can, on nodes they will not have to leave
// again. The marks are a projection of the manager's history, like the
// records of targets away: a reaction lost to a restart is decided again
// from the same history when its event is redelivered.

// marksReaction is whether e may change the marks of an upgrade.
func marksReaction(e events.Envelope, st manager.State) bool {
	if st.InitiatorPolicy != events.InitiatorPolicyMoveWorkloads || !st.Planned() {
		return false
	}
	switch e.Data.(type) {
	case events.UpgradePlanned, events.NodeFinished, events.UpgradeCompleted, events.UpgradeFailed,
		events.CancelRequested, events.UpgradeCancelled:
		return true
	}
	return false
}

// wantsMark is the mark node should carry as st stands: the manager's UID
// while the upgrade runs and node's outcome is not recorded, else none.
func wantsMark(st manager.State, node string) string {
	if st.Terminal() || st.CancelRequested || st.Nodes[node].State.Terminal() {
		return ""
	}
	return st.Ref.UID
}

// markChange decides the mark node gets, having read have on it: want and
// whether to write it. A mark another manager put there is replaced by
// this one's, never taken off.
func markChange(st manager.State, node, have string) (want string, write bool) {
	want = wantsMark(st, node)
	switch {
	case want == have:
		return want, false
	case want == "" && have != st.Ref.UID:
		return have, false
	}
	return want, true
}

// markNodes brings the mark of node (of every planned node when "") in
// line with st, reading each node first. A node gone needs none.
func (o *Orchestrator) markNodes(ctx context.Context, st manager.State, node string) error {
	if o.marks == nil {
		return nil
	}
	nodes := st.Plan
	if node != "" {
		nodes = []string{node}
	}
	for _, node := range nodes {
		n, err := o.cfg.Cluster.Node(ctx, node)
		if errors.Is(err, dataplane.ErrNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("orchestrator: mark of node %s: %w", node, err)
		}
		want, write := markChange(st, node, n.UpgradePendingMark)
		if !write {
			continue
		}
		err = o.marks.MarkUpgradePending(ctx, node, want)
		switch {
		case errors.Is(err, dataplane.ErrNotFound):
			continue
		case err != nil:
			return fmt.Errorf("orchestrator: mark of node %s: %w", node, err)
		}
		o.log.Info("node mark changed", "manager", st.Ref.String(), "node", node, "pending", want != "")
	}
	return nil
}
