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

// React is the orchestrator's reaction to one event: it reads what react
// needs (readsOf), decides (react, pure) and applies the effects in order.
// It is idempotent: a repeated event decides nothing new and re-publishes
// commands that the work queue deduplicates (or the worker recognises as
// done).
func (o *Orchestrator) React(ctx context.Context, e events.Envelope) error {
	ref := e.Aggregate.Manager
	need := readsOf(e)
	var r reading
	var err error
	switch {
	case need.manager:
		r.manager, err = o.loadManager(ctx, ref, includes(e, events.ManagerAggregate(ref)))
	case need.plan:
		r.manager, err = o.plan(ctx, ref, e.Aggregate.Node)
	}
	if err != nil {
		return err
	}
	if need.node != nil {
		if n := need.node(e, r.manager); n != "" {
			agg := events.NodeAggregate(ref, n)
			if r.node, err = o.loadNode(ctx, agg, includes(e, agg)); err != nil {
				return err
			}
		}
	}
	for _, f := range react(e, r) {
		switch f.kind {
		case effectManager:
			err = o.manager(ctx, ref, f.command)
		case effectPublish:
			err = o.publish(ctx, r.manager, f.node, f.attempt, f.step, f.why)
		case effectCancelNode:
			err = o.cancelNode(ctx, r.manager, f.node, e)
		case effectPrechecks:
			err = o.runPrechecks(ctx, ref, r.manager, e)
		case effectRecordTarget:
			err = o.recordTargetAway(ctx, e, r.node)
		case effectRequestHashing:
			err = o.requestHashing(ctx, e, r.node)
		case effectRemoveSnapshots:
			err = o.removeSnapshots(ctx, r.manager)
		case effectRaiseReplicas:
			err = o.raiseReplicas(ctx, e, r.manager, r.node)
		case effectRestoreReplicas:
			err = o.restoreReplicas(ctx, r.manager)
		case effectMarkNodes:
			err = o.markNodes(ctx, r.manager, f)
		case effectGate, effectGateAdvisory:
			var ok bool
			if ok, err = o.gateOtherUpgrader(ctx, r.manager); err == nil && !ok && f.kind == effectGate {
				return nil // held: no new node starts
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// runPrechecks evaluates every precheck against a fresh cluster snapshot and
// records the results and, if all pass, the plan.
func (o *Orchestrator) runPrechecks(ctx context.Context, ref events.ManagerRef, st manager.State, e events.Envelope) error {
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
		AllowNodesWithoutReplicaScheduling: st.AllowNodesWithoutReplicaScheduling, ReplicaPolicy: st.ReplicaPolicy,
	})
	recorded := make([]manager.PrecheckResult, len(results))
	for i, r := range results {
		recorded[i] = manager.PrecheckResult{Check: r.Check, Passed: r.Passed, Reason: r.Reason, Message: r.Message}
	}
	var order []string
	if precheck.Passed(results) {
		order = plan.TargetNodes(cluster, st.RequestedNodes)
	}
	return o.manager(ctx, ref, manager.RecordPrechecks{Meta: aggregate.Meta{ID: id(e)}, Results: recorded, InstanceManagerImage: cluster.DefaultImage, Order: order,
		LonghornProfile: string(cluster.Platform.Profile), LonghornVersion: cluster.Platform.LonghornVersion})
}

// cancelNode records the cancel request on the node aggregate (the worker
// brings it to a safe point), or confirms the cancel at once when the node
// never started.
func (o *Orchestrator) cancelNode(ctx context.Context, st manager.State, node string, cause events.Envelope) error {
	agg := events.NodeAggregate(st.Ref, node)
	_, err := o.x.Nodes.Execute(ctx, agg,
		nodeupgrade.Command(nodeupgrade.RequestCancel{Meta: aggregate.Meta{ID: id(cause) + "/cancel"}, Reason: st.NodeCancelReason()}))
	if errors.Is(err, aggregate.ErrNotFound) {
		if st.Terminal() {
			return nil
		}
		return o.manager(ctx, st.Ref, manager.ConfirmCancelled{Meta: aggregate.Meta{ID: id(cause)}, Node: node, Message: "cancelled before " + node + " started"})
	}
	return err
}

// publish issues the Advance command for node at step. Its id is fixed by
// (manager, node, attempt, step, why): re-issuing it deduplicates.
func (o *Orchestrator) publish(ctx context.Context, st manager.State, node string, attempt int, step events.NodeState, why string) error {
	cmd := nodequeue.Command{
		ID:   fmt.Sprintf("%s/%s/%s/%d/%s", why, st.Ref.UID, events.EncodeToken(node), attempt, step),
		Kind: nodequeue.Advance, Manager: st.Ref, Node: node, Attempt: attempt, Step: step,
		DataEngine: st.DataEngine, InstanceManagerImage: st.InstanceManagerImage, InitiatorPolicy: st.InitiatorPolicy, ReplicaPolicy: st.ReplicaPolicy, IssuedAt: o.cfg.Now(),
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

// loadManager folds ref's manager, up to at least the stream sequence
// atLeast (readFresh).
func (o *Orchestrator) loadManager(ctx context.Context, ref events.ManagerRef, atLeast uint64) (manager.State, error) {
	l, err := readFresh(ctx, o.x.Managers.Load, events.ManagerAggregate(ref), atLeast, freshPatience)
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
	return o.loadManager(ctx, ref, 0)
}

// loadNode folds agg, up to at least the stream sequence atLeast
// (readFresh).
func (o *Orchestrator) loadNode(ctx context.Context, agg events.AggregateID, atLeast uint64) (nodeupgrade.State, error) {
	l, err := readFresh(ctx, o.x.Nodes.Load, agg, atLeast, freshPatience)
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
		nodeupgrade.Command(nodeupgrade.Fail{Meta: aggregate.Meta{ID: deadID}, Reason: "CommandDeadLettered",
			Message: fmt.Sprintf("command %s failed %d deliveries and was moved to %s; see the worker's logs", c.ID, d.Deliveries, topology.DeadLetterStream)}))
	if errors.Is(err, aggregate.ErrNotFound) {
		err = o.manager(ctx, c.Manager, manager.Fail{Meta: aggregate.Meta{ID: deadID}, Node: c.Node, Reason: "CommandDeadLettered",
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
