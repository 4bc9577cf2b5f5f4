package orchestrator

import (
	"context"
	"errors"
	"fmt"

	"github.com/switchback-dev/switchback/aggregate"
	"github.com/switchback-dev/switchback/aggregate/manager"
	"github.com/switchback-dev/switchback/aggregate/nodeupgrade"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/nodequeue"
	"github.com/switchback-dev/switchback/plan"
	"github.com/switchback-dev/switchback/precheck"
	"github.com/switchback-dev/switchback/topology"
)

// React is the orchestrator's reaction to one event. It is idempotent: a
// repeated event decides nothing new and re-publishes commands that the work
// queue deduplicates (or the worker recognises as done).
func (o *Orchestrator) React(ctx context.Context, e events.Envelope) error {
	ref := e.Aggregate.Manager
	switch d := e.Data.(type) {
	case events.UpgradeRequested:
		return o.runPrechecks(ctx, ref, e)
	case events.UpgradeReleased:
		// Release schedules the next node in the same decision; should only
		// the release be stored, this completes it.
		return o.manager(ctx, ref, manager.ScheduleNext{ID: id(e)})
	case events.UpgradePlanned:
		st, err := o.loadManager(ctx, ref)
		if err != nil {
			return err
		}
		if ok, err := o.gateOtherUpgrader(ctx, st); !ok || err != nil {
			return err
		}
		return o.manager(ctx, ref, manager.ScheduleNext{ID: id(e)})
	case events.NodeScheduled:
		st, err := o.loadManager(ctx, ref)
		if err != nil {
			return err
		}
		if st.UpgradingNode != d.Node || st.Nodes[d.Node].Attempt != d.Attempt {
			return nil // superseded
		}
		return o.publish(ctx, st, d.Node, d.Attempt, events.NodePending, "start")
	case events.UpgradeFailed:
		// A node still mid-step when the upgrade failed (because of another
		// cause, such as a dead-lettered command) is brought to its safe point.
		st, err := o.loadManager(ctx, ref)
		if err != nil || st.UpgradingNode == "" {
			return err
		}
		node, err := o.loadNode(ctx, events.NodeAggregate(ref, st.UpgradingNode))
		if err != nil || !node.Exists || node.Terminal() {
			return err
		}
		return o.cancelNode(ctx, st, st.UpgradingNode, e)
	case events.CancelRequested:
		st, err := o.loadManager(ctx, ref)
		if err != nil || st.UpgradingNode == "" || st.Terminal() {
			return err
		}
		return o.cancelNode(ctx, st, st.UpgradingNode, e)
	case events.NodeUpgradeStarted:
		st, err := o.loadManager(ctx, ref)
		if err != nil {
			return err
		}
		if st.Terminal() || st.CancelRequested {
			// Started after the manager stopped: bring it to its safe point.
			return o.cancelNode(ctx, st, e.Aggregate.Node, e)
		}
		// The worker that started the node runs its first step in the same
		// delivery of the start command: nothing to issue.
		return nil
	case events.NodeStateChanged:
		// The hot path: one per step. The command is issued from the event
		// and the cached plan alone; should the node have moved on meanwhile
		// (a replayed event), the worker finds it past the step and acks.
		st, err := o.plan(ctx, ref, e.Aggregate.Node)
		if err != nil {
			return err
		}
		return o.publish(ctx, st, e.Aggregate.Node, st.Nodes[e.Aggregate.Node].Attempt, d.To, "step")
	case events.NodeCancelRequested:
		st, err := o.loadManager(ctx, ref)
		if err != nil {
			return err
		}
		node, err := o.loadNode(ctx, e.Aggregate)
		if err != nil || node.Terminal() {
			return err
		}
		// Wakes an idle worker; a busy one sees the request on its next poll.
		return o.publish(ctx, st, e.Aggregate.Node, node.Attempt, node.State, "cancel")
	case events.NodeUpgradeCompleted:
		// Before the next node starts (which recording this outcome does),
		// Longhorn's own upgrader is checked again.
		st, err := o.loadManager(ctx, ref)
		if err != nil {
			return err
		}
		if _, more := st.NextNode(); more && !st.Terminal() && !st.CancelRequested && st.UpgradingNode == e.Aggregate.Node {
			if _, err := o.gateOtherUpgrader(ctx, st); err != nil {
				return err
			}
		}
		return o.manager(ctx, ref, manager.RecordNodeOutcome{ID: id(e), Node: e.Aggregate.Node, State: events.NodeCompleted, Message: d.Message})
	case events.NodeUpgradeFailed:
		return o.manager(ctx, ref, manager.RecordNodeOutcome{ID: id(e), Node: e.Aggregate.Node, State: events.NodeError,
			Message: fmt.Sprintf("node %s failed at %s: %s", e.Aggregate.Node, d.Step, d.Message)})
	case events.NodeUpgradeCancelled:
		st, err := o.loadManager(ctx, ref)
		if err != nil || st.Terminal() {
			return err
		}
		return o.manager(ctx, ref, manager.ConfirmCancelled{ID: id(e), Node: e.Aggregate.Node, Message: d.Message})
	}
	return nil
}

// runPrechecks evaluates every precheck against a fresh cluster snapshot and
// records the results and, if all pass, the plan.
func (o *Orchestrator) runPrechecks(ctx context.Context, ref events.ManagerRef, e events.Envelope) error {
	st, err := o.loadManager(ctx, ref)
	if err != nil {
		return err
	}
	if st.Planned() || st.Terminal() || st.CancelRequested {
		return nil
	}
	cluster, err := plan.Read(ctx, o.cfg.Cluster)
	if err != nil {
		return err
	}
	active, err := o.cfg.ActiveUpgrades(ctx, ref)
	if err != nil {
		return err
	}
	results := precheck.Run(precheck.Input{
		Cluster: cluster, DataEngine: st.DataEngine, RequestedNodes: st.RequestedNodes,
		TargetImage: cluster.DefaultImage, ActiveUpgrades: active,
	})
	recorded := make([]manager.PrecheckResult, len(results))
	for i, r := range results {
		recorded[i] = manager.PrecheckResult{Check: r.Check, Passed: r.Passed, Reason: r.Reason, Message: r.Message}
	}
	var order []string
	if precheck.Passed(results) {
		order = plan.TargetNodes(cluster, st.RequestedNodes)
	}
	return o.manager(ctx, ref, manager.RecordPrechecks{ID: id(e), Results: recorded, InstanceManagerImage: cluster.DefaultImage, Order: order,
		LonghornProfile: string(cluster.Platform.Profile), LonghornVersion: cluster.Platform.LonghornVersion})
}

// cancelNode records the cancel request on the node aggregate (the worker
// brings it to a safe point), or confirms the cancel at once when the node
// never started.
func (o *Orchestrator) cancelNode(ctx context.Context, st manager.State, node string, cause events.Envelope) error {
	agg := events.NodeAggregate(st.Ref, node)
	_, err := o.x.Nodes.Execute(ctx, agg,
		nodeupgrade.Command(nodeupgrade.RequestCancel{ID: id(cause) + "/cancel", Reason: st.NodeCancelReason()}))
	if errors.Is(err, aggregate.ErrNotFound) {
		if st.Terminal() {
			return nil
		}
		return o.manager(ctx, st.Ref, manager.ConfirmCancelled{ID: id(cause), Node: node, Message: "cancelled before " + node + " started"})
	}
	return err
}

// publish issues the Advance command for node at step. Its id is fixed by
// (manager, node, attempt, step, why): re-issuing it deduplicates.
func (o *Orchestrator) publish(ctx context.Context, st manager.State, node string, attempt int, step events.NodeState, why string) error {
	cmd := nodequeue.Command{
		ID:   fmt.Sprintf("%s/%s/%s/%d/%s", why, st.Ref.UID, events.EncodeToken(node), attempt, step),
		Kind: nodequeue.Advance, Manager: st.Ref, Node: node, Attempt: attempt, Step: step,
		DataEngine: st.DataEngine, InstanceManagerImage: st.InstanceManagerImage, IssuedAt: o.cfg.Now(),
	}
	dup, err := o.cfg.Queue.Publish(ctx, cmd)
	if err == nil {
		o.log.Debug("command issued", "manager", st.Ref.String(), "node", node, "step", step, "duplicate", dup)
	}
	return err
}

// id is the id of the orchestrator's reaction to e: one reaction per event.
func id(e events.Envelope) string { return "orchestrator/" + e.ID }

func (o *Orchestrator) manager(ctx context.Context, ref events.ManagerRef, cmd manager.Command) error {
	res, err := o.x.Managers.Execute(ctx, events.ManagerAggregate(ref), cmd)
	for _, e := range res.Appended {
		o.log.Info("manager event", "manager", ref.String(), "type", e.Type(), "state", res.State.State)
	}
	return err
}

func (o *Orchestrator) loadManager(ctx context.Context, ref events.ManagerRef) (manager.State, error) {
	l, err := o.x.Managers.Load(ctx, events.ManagerAggregate(ref))
	if err == nil && l.State.Planned() {
		o.mu.Lock()
		o.plans[ref.UID] = l.State
		o.mu.Unlock()
	}
	return l.State, err
}

// plan returns a manager state that knows node's scheduling: from the cache
// filled by loadManager (the plan, image and attempts do not change once a
// node is scheduled), else loaded.
func (o *Orchestrator) plan(ctx context.Context, ref events.ManagerRef, node string) (manager.State, error) {
	o.mu.Lock()
	st, ok := o.plans[ref.UID]
	o.mu.Unlock()
	if ok && st.Nodes[node].Attempt > 0 {
		return st, nil
	}
	return o.loadManager(ctx, ref)
}

func (o *Orchestrator) loadNode(ctx context.Context, agg events.AggregateID) (nodeupgrade.State, error) {
	l, err := o.x.Nodes.Load(ctx, agg)
	return l.State, err
}

// onDeadCommand turns a command that exhausted its deliveries into a failed
// node: it must never be lost silently, and retrying it did not help.
func (o *Orchestrator) onDeadCommand(ctx context.Context, d nodequeue.DeadCommand) error {
	if d.Err != nil {
		o.log.Error("dead-lettered an undecodable command", "seq", d.Sequence, "reason", d.Reason, "error", d.Err)
		return nil
	}
	c := d.Command
	if d.Refused {
		// The worker that got it cannot run it (another node's, an unknown
		// manager's): nothing failed on a node, the record is the evidence.
		o.log.Error("dead-lettered a command its worker refused", "manager", c.Manager.String(), "node", c.Node, "command", c.ID, "seq", d.Sequence, "reason", d.Reason)
		return nil
	}
	agg := events.NodeAggregate(c.Manager, c.Node)
	deadID := fmt.Sprintf("orchestrator/dead/%d", d.Sequence)
	_, err := o.x.Nodes.Execute(ctx, agg,
		nodeupgrade.Command(nodeupgrade.Fail{ID: deadID, Reason: "CommandDeadLettered",
			Message: fmt.Sprintf("command %s failed %d deliveries and was moved to %s; see the worker's logs", c.ID, d.Deliveries, topology.DeadLetterStream)}))
	if errors.Is(err, aggregate.ErrNotFound) {
		err = o.manager(ctx, c.Manager, manager.Fail{ID: deadID, Node: c.Node, Reason: "CommandDeadLettered",
			Message: fmt.Sprintf("node %s could not start: command %s failed %d deliveries", c.Node, c.ID, d.Deliveries)})
		if errors.Is(err, aggregate.ErrNotFound) {
			// A command for a manager that never existed: parked, reported, done.
			o.log.Error("dead-lettered a command for an unknown manager", "manager", c.Manager.String(), "node", c.Node, "command", c.ID)
			return nil
		}
	}
	if errors.Is(err, aggregate.ErrIllegalCommand) {
		return nil // the node already ended
	}
	return err
}
