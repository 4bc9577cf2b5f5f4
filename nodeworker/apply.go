package nodeworker

import (
	"context"
	"errors"
	"fmt"

	"github.com/switchback-dev/switchback/dataplane"
)

// apply carries a plan out: history first (what must be restored, then the
// volume transitions), then the data-plane actions in order, then what
// records their success. Every part is idempotent, so a crash anywhere
// redoes at most what did not take.
func (r *run) apply(ctx context.Context, p stepPlan) (outcome, error) {
	out := outcome{done: p.done, block: p.block, fatal: p.fatal,
		progressed: len(p.record)+len(p.volumes)+len(p.actions)+len(p.confirm) > 0}
	for _, c := range p.record {
		if err := r.exec(ctx, c); err != nil {
			return outcome{}, err
		}
	}
	for _, v := range p.volumes {
		r.setVolume(v)
	}
	if err := r.flush(ctx); err != nil {
		return outcome{}, err
	}
	for _, a := range p.actions {
		if err := r.act(ctx, a); err != nil {
			return outcome{}, err
		}
	}
	for _, c := range p.confirm {
		if err := r.exec(ctx, c); err != nil {
			return outcome{}, err
		}
	}
	return out, nil
}

// act runs one action. An object gone since it was observed is no error: a
// deleted volume or replica has nothing left to protect.
func (r *run) act(ctx context.Context, a action) error {
	dp := r.dp()
	var err error
	switch a.kind {
	case actSetScheduling:
		err = dp.SetReplicaScheduling(ctx, a.object, a.allow)
	case actSnapshot:
		err = dp.CreateSnapshot(ctx, a.object, a.arg)
	case actDeleteSnapshot:
		err = dp.DeleteSnapshot(ctx, a.object, a.arg)
	case actFailReplica:
		err = dp.FailReplica(ctx, a.object, a.arg)
	case actSetEngineNode:
		err = dp.SetEngineNode(ctx, a.object, a.arg)
	case actDeleteIM:
		err = dp.DeleteInstanceManager(ctx, a.object)
	case actSetIMImage:
		err = dp.SetInstanceManagerImage(ctx, a.object, a.arg)
	default:
		err = fmt.Errorf("unknown action %q", a.kind)
	}
	if err != nil && !errors.Is(err, dataplane.ErrNotFound) {
		return fmt.Errorf("%s: %w", a, err)
	}
	return nil
}
