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
// planned, unmarks each as it completes, and all of them once the upgrade
// ends or is cancelled: the pods moved off the node in
// flight then land, where they can, on nodes they will not have to leave
// again. The marks are a projection of the manager's history, like the
// records of targets away: a reaction lost to a restart is decided again
// from the same history when its event is redelivered.

// markEffect is the effect e has on the marks of an upgrade in st, if
// any: every planned node's once planned, ended or cancelled; a node's
// once it completed, before its outcome is recorded (so that the next node
// starts with it unmarked and an upgrade completed has no mark left), and
// again once recorded, should the first have been lost.
func markEffect(e events.Envelope, st manager.State) (effect, bool) {
	if st.InitiatorPolicy != events.InitiatorPolicyMoveWorkloads || !st.Planned() {
		return effect{}, false
	}
	all := effect{kind: effectMarkNodes}
	running := !st.Terminal() && !st.CancelRequested
	switch d := e.Data.(type) {
	case events.UpgradePlanned, events.UpgradeCompleted, events.UpgradeFailed, events.CancelRequested, events.UpgradeCancelled:
		return all, true
	case events.NodeFinished:
		if running {
			return effect{kind: effectMarkNodes, node: d.Node}, true
		}
		return all, true
	case events.NodeUpgradeCompleted:
		if running {
			return effect{kind: effectMarkNodes, node: e.Aggregate.Node, ended: true}, true
		}
	}
	return effect{}, false
}

// wantsMark is the mark node should carry as st stands: the manager's UID
// while the upgrade runs and node's outcome is not recorded (nor about to
// be: ended), else none.
func wantsMark(st manager.State, node string, ended bool) string {
	if ended || st.Terminal() || st.CancelRequested || st.Nodes[node].State.Terminal() {
		return ""
	}
	return st.Ref.UID
}

// markChange decides the mark node gets, having read have on it: want and
// whether to write it. A mark another manager put there is replaced by
// this one's, never taken off.
func markChange(st manager.State, node, have string, ended bool) (want string, write bool) {
	want = wantsMark(st, node, ended)
	switch {
	case want == have:
		return want, false
	case want == "" && have != st.Ref.UID:
		return have, false
	}
	return want, true
}

// markNodes brings the mark of f.node (of every planned node when "") in
// line with st, reading each node first. A node gone needs none.
func (o *Orchestrator) markNodes(ctx context.Context, st manager.State, f effect) error {
	if o.marks == nil {
		return nil
	}
	nodes := st.Plan
	if f.node != "" {
		nodes = []string{f.node}
	}
	for _, node := range nodes {
		n, err := o.cfg.Cluster.Node(ctx, node)
		if errors.Is(err, dataplane.ErrNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("orchestrator: mark of node %s: %w", node, err)
		}
		want, write := markChange(st, node, n.UpgradePendingMark, f.ended)
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
