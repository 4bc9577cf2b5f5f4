package nodeworker

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/switchback-dev/switchback/aggregate"
	"github.com/switchback-dev/switchback/aggregate/nodeupgrade"
	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/metrics"
	"github.com/switchback-dev/switchback/workloadmove"
)

// apply carries a plan out: history first (what must be restored, then the
// volume transitions), then the data-plane actions in order (a run of
// snapshot calls at once, see actAll), then what records their success. Every part is idempotent, so a crash anywhere
// redoes at most what did not take.
func (r *run) apply(ctx context.Context, p stepPlan) (outcome, error) {
	out := outcome{done: p.done, block: p.block, fatal: p.fatal,
		progressed: len(p.record)+len(p.rebuilds)+len(p.volumes)+len(p.actions)+len(p.confirm) > 0}
	for _, c := range p.record {
		if err := r.exec(ctx, c); err != nil {
			return outcome{}, err
		}
	}
	if len(p.rebuilds) > 0 {
		if err := r.exec(ctx, nodeupgrade.RecordRebuilds{Meta: aggregate.Meta{ID: r.id("rebuilds")}, Events: p.rebuilds}); err != nil {
			return outcome{}, err
		}
		for _, e := range p.rebuilds {
			if d, ok := e.(events.RebuildPlanned); ok {
				metrics.RebuildBytes.WithLabelValues("expected").Add(float64(d.ExpectedBytes))
				metrics.RebuildBytes.WithLabelValues("full").Add(float64(d.FullBytes))
			}
		}
	}
	for _, v := range p.volumes {
		r.setVolume(v)
	}
	if err := r.flush(ctx); err != nil {
		return outcome{}, err
	}
	if err := r.actAll(ctx, p.actions); err != nil {
		var refused *budgetRefusal
		if !errors.As(err, &refused) {
			return outcome{}, err
		}
		// The eviction API keeps a disruption budget: the round waits with
		// the API's reason, and asks again once something changes.
		metrics.WorkloadMoves.WithLabelValues("refused").Inc()
		out.done, out.block = false, waiting("", workloadmove.WaitDisruptionBudget, "%v", refused.err)
		return out, nil
	}
	for _, a := range p.actions {
		switch a.Call {
		case dataplane.CallEvictPod:
			metrics.WorkloadMoves.WithLabelValues("evicted").Inc()
		case dataplane.CallRestartShareManager:
			metrics.WorkloadMoves.WithLabelValues("restarted").Inc()
		}
	}
	for _, c := range p.confirm {
		if err := r.exec(ctx, c); err != nil {
			return outcome{}, err
		}
	}
	return out, nil
}

// snapshotCalls bounds the snapshot calls of one round in flight at once.
const snapshotCalls = 16

// concurrent reports whether consecutive actions making call may run at once:
// taking or removing the upgrade's snapshot touches one volume and nothing
// the other volumes' calls depend on, and the step records the phase only
// once every call of it succeeded. Every other action keeps its order
// (scheduling off before the snapshots, replicas failed one by one against
// the observed health, moves before the IM is replaced).
func concurrent(call dataplane.Call) bool {
	return call == dataplane.CallCreateSnapshot || call == dataplane.CallDeleteSnapshot
}

// actAll runs actions in order, except that a run of consecutive snapshot
// calls of one kind (one per volume; a node with 100 volumes otherwise waits
// on 100 calls one after another, before its switch-over and at its end)
// runs snapshotCalls at a time. The run ends before the next action starts.
// Its errors are returned in plan order, so the outcome does not depend on
// which call answered first.
func (r *run) actAll(ctx context.Context, actions []dataplane.Action) error {
	for i := 0; i < len(actions); {
		j := i + 1
		for concurrent(actions[i].Call) && j < len(actions) && actions[j].Call == actions[i].Call {
			j++
		}
		if j == i+1 {
			if err := r.act(ctx, actions[i]); err != nil {
				return err
			}
		} else if err := r.actAtOnce(ctx, actions[i:j]); err != nil {
			return err
		}
		i = j
	}
	return nil
}

// actAtOnce runs actions with at most snapshotCalls in flight and joins
// their errors in plan order. A failed call does not stop the others: each
// is idempotent, and the next round redoes only what did not take.
func (r *run) actAtOnce(ctx context.Context, actions []dataplane.Action) error {
	errs := make([]error, len(actions))
	sem := make(chan struct{}, snapshotCalls)
	var wg sync.WaitGroup
	for i, a := range actions {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			errs[i] = r.act(ctx, a)
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// budgetRefusal is an eviction the eviction API refused, for now, to keep
// a PodDisruptionBudget: a reason to wait, not a failure.
type budgetRefusal struct{ err error }

func (b *budgetRefusal) Error() string { return b.err.Error() }
func (b *budgetRefusal) Unwrap() error { return b.err }

// act runs one action.
func (r *run) act(ctx context.Context, a dataplane.Action) error { return call(ctx, r.dp(), a) }

// call makes one action's data-plane call. An object gone since it was
// observed is no error: a deleted volume or replica has nothing left to
// protect.
func call(ctx context.Context, dp dataplane.Actions, a dataplane.Action) error {
	err := a.Apply(ctx, dp)
	switch {
	case err == nil, errors.Is(err, dataplane.ErrNotFound):
		return nil
	case errors.Is(err, dataplane.ErrReplicaInEngine), errors.Is(err, dataplane.ErrSwitchingPaths):
		// Longhorn moved on since the observation: the next round sees it
		// and waits; nothing to retry by redelivery.
		return nil
	case errors.Is(err, dataplane.ErrDisruptionBudget):
		return &budgetRefusal{err: err}
	}
	return fmt.Errorf("%s: %w", a, err)
}
