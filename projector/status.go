package projector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/switchback-dev/switchback/api/v1beta2"
	"github.com/switchback-dev/switchback/events"
)

// renderManager is the DataEngineUpgradeManager status for v, computed for
// metadata.generation gen.
//
// upgradeNodes lists every node of the plan: a scheduled node shows its own
// upgrade's state (the step it is at, not just "pending" as the manager
// aggregate records it until the outcome), and a node not scheduled yet is
// "pending" with its place in the plan as message (or, once the upgrade
// ended, why it never started: "cancelled" after a cancel, "pending" with an
// explanation after an error). Before the plan exists the map is empty.
func renderManager(v *view, gen int64) v1beta2.DataEngineUpgradeManagerStatus {
	m := v.Manager
	st := v1beta2.DataEngineUpgradeManagerStatus{
		ObservedGeneration:   gen,
		StreamSequence:       v.LastSequence,
		State:                v1beta2.UpgradeState(m.State),
		Message:              managerMessage(v),
		InstanceManagerImage: m.InstanceManagerImage,
		UpgradingNode:        m.UpgradingNode,
		TotalNodes:           int32(len(m.Plan)),
		Conditions:           withGeneration(v.conds, gen),
	}
	if len(m.Plan) > 0 {
		st.UpgradeNodes = make(map[string]v1beta2.UpgradeNodeStatus, len(m.Plan))
	}
	for i, n := range m.Plan {
		var ns v1beta2.UpgradeNodeStatus
		if _, scheduled := m.Nodes[n]; scheduled {
			state, msg := nodeStateMessage(v, n)
			ns = v1beta2.UpgradeNodeStatus{State: state, Message: msg}
		} else {
			ns = unscheduledNode(v, i)
		}
		if ns.State == v1beta2.NodeUpgradeStateCompleted {
			st.CompletedNodes++
		}
		st.UpgradeNodes[n] = ns
	}
	return st
}

// unscheduledNode is the summary of the i-th plan node, not scheduled yet.
func unscheduledNode(v *view, i int) v1beta2.UpgradeNodeStatus {
	m := v.Manager
	switch {
	case m.State == events.ManagerCancelled:
		return v1beta2.UpgradeNodeStatus{State: v1beta2.NodeUpgradeStateCancelled, Message: "not started: the upgrade was cancelled"}
	case m.State == events.ManagerError:
		return v1beta2.UpgradeNodeStatus{State: v1beta2.NodeUpgradeStatePending, Message: "not started: the upgrade failed"}
	case m.CancelRequested:
		return v1beta2.UpgradeNodeStatus{State: v1beta2.NodeUpgradeStatePending, Message: "will not start: cancel requested"}
	}
	return v1beta2.UpgradeNodeStatus{State: v1beta2.NodeUpgradeStatePending, Message: fmt.Sprintf("waiting for its turn (%d of %d in the plan)", i+1, len(m.Plan))}
}

// managerMessage is status.message: the manager's own message, except that
// while the node in flight is stalled it says what blocks (docs/design.md,
// rule R7: stuck is not error), and while a node works it names the step.
func managerMessage(v *view) string {
	m := v.Manager
	if n, ok := v.stalledNode(); ok {
		return stallMessage(n)
	}
	msg := m.Message
	if msg == "" {
		switch m.State {
		case events.ManagerPending:
			msg = "upgrade requested; waiting for the prechecks"
		case events.ManagerInitializing:
			msg = "running prechecks"
		default:
			msg = string(m.State)
		}
	}
	if m.State == events.ManagerUpgrading && !m.CancelRequested && m.UpgradingNode != "" {
		if n := v.Nodes[m.UpgradingNode]; n.Exists && !n.Terminal() {
			msg += ": " + string(n.State)
		}
	}
	return msg
}

// trusted returns a status's recorded stream sequence, or 0 when it lies
// beyond the stream's end: no projection can have written that, so the
// status was written by hand (or restored from another cluster) and is
// rewritten from the fold instead of freezing projection at a sequence the
// stream will take ages to reach.
func (p *Projector) trusted(ctx context.Context, seq uint64, log *slog.Logger) uint64 {
	if seq <= p.lastSeq {
		return seq
	}
	last, err := p.cfg.Store.LastSequence(ctx)
	if err != nil || seq <= last {
		return seq
	}
	log.Warn("status records a stream sequence beyond the stream's end; rewriting it from history", "streamSequence", seq, "streamLast", last)
	return 0
}

// write writes the node upgrades the steps changed, then the manager's
// status, and records the Events of the steps that status now reflects.
//
// The manager's streamSequence is the commit point: node upgrades are
// written first, so a crash in between only repeats idempotent node writes,
// and an event's Kubernetes Events are recorded once the manager's status
// includes it and never for an event it already included (redelivery,
// restart), so each transition is announced once.
func (p *Projector) write(ctx context.Context, e *entry, steps []step, log *slog.Logger) error {
	var base uint64
	if e.obj != nil {
		base = p.trusted(ctx, e.obj.Status.StreamSequence, log)
		if base >= e.view.LastSequence {
			// Already projected (the status is at or past this event).
			p.m.skippedStale.Add(uint64(len(steps)))
			return nil
		}
	}
	var nodes []string
	for _, s := range steps {
		if s.seq > base {
			nodes = append(nodes, s.nodes...)
		}
	}
	slices.Sort(nodes)
	for _, n := range slices.Compact(nodes) {
		if err := p.writeNode(ctx, e, n, log.With("node", n)); err != nil {
			return err
		}
	}
	base, wrote, err := p.writeManager(ctx, e, log)
	var perm *permanentError
	switch {
	case errors.Is(err, errGone):
		log.Info("the DataEngineUpgradeManager is gone; its history is no longer projected")
		p.markGone(e.view.ref.UID)
		p.forgetManager(e.view.ref)
		return nil
	case errors.As(err, &perm):
		p.m.writeFailures.Add(1)
		log.Error("status write refused; the next event rewrites the whole status", "error", err)
		// The transitions happened all the same, and their messages are
		// acked: announce them, and the refusal.
		p.announce(e, steps, base)
		p.rec.emit(p.objectsOf(e), notice{at: p.cfg.Now(), warning: true, reason: ReasonStatusRejected, action: actionProject,
			note: fmt.Sprintf("status write refused by the apiserver: %v", err)})
		return nil
	case err != nil:
		return err
	}
	if !wrote {
		p.m.skippedStale.Add(uint64(len(steps)))
		return nil
	}
	p.m.projected.Add(uint64(p.announce(e, steps, base)))
	if e.obj != nil {
		p.observeWrite(e.view, e.obj.Status, steps, base, p.cfg.Now())
	}
	log.Debug("projected", "streamSequence", e.view.LastSequence, "state", e.view.Manager.State)
	if e.view.settled() {
		// Nothing more will happen to this manager; a late redelivery
		// just catches up from the stream again.
		delete(p.entries, e.view.ref.UID)
	}
	return nil
}

// announce records the Kubernetes Events of the steps above base, in
// stream order, and returns how many steps that was.
func (p *Projector) announce(e *entry, steps []step, base uint64) int {
	objs := p.objectsOf(e)
	n := 0
	for _, s := range steps {
		if s.seq <= base {
			continue
		}
		n++
		for _, nt := range s.notices {
			p.rec.emit(objs, nt)
		}
	}
	return n
}

// writeManager writes the manager's status when the object records an
// older streamSequence, conditioned on the resourceVersion last seen and
// retried with a fresh read on conflict. base is the streamSequence the
// status had before; wrote is false when the status was already at or past
// the view (another projector, or a redelivery).
func (p *Projector) writeManager(ctx context.Context, e *entry, log *slog.Logger) (base uint64, wrote bool, err error) {
	ref := e.view.ref
	firstBase, haveBase, maybeLanded := uint64(0), false, false
	err = p.retry(ctx, log, "manager status", p.cfg.WriteTimeout, func(ctx context.Context) error {
		if e.obj == nil {
			obj, err := p.readManager(ctx, ref)
			if err != nil {
				return err
			}
			e.obj = obj
		}
		stored := p.trusted(ctx, e.obj.Status.StreamSequence, log)
		if !haveBase {
			firstBase, haveBase = stored, true
		}
		if stored >= e.view.LastSequence {
			// Either somebody else got there, or an earlier attempt whose
			// answer was lost did: in that case its Events are still due.
			base, wrote = firstBase, maybeLanded
			return nil
		}
		base = stored
		upd := e.obj.DeepCopy()
		upd.Status = renderManager(e.view, e.obj.Generation)
		out, err := p.cfg.Client.Managers(ref.Namespace).UpdateStatus(ctx, upd)
		switch {
		case err == nil:
			e.obj, wrote = out, true
			return nil
		case apierrors.IsNotFound(err):
			return errGone
		case !apierrors.IsConflict(err):
			maybeLanded = true
		}
		e.obj = nil // read afresh: our copy is stale or the outcome unknown
		return err
	})
	return base, wrote, err
}

// objectsOf identifies e's objects for Events.
func (p *Projector) objectsOf(e *entry) objects {
	return objects{ref: e.view.ref, nodeObject: func(node string) (string, types.UID) {
		if o := e.nodeObjs[node]; o != nil {
			return o.Name, o.UID
		}
		return "", ""
	}}
}
