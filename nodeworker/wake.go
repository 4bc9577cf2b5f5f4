package nodeworker

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/events"
)

// A waiting step wakes on whichever comes first:
//
//   - the data plane's change signal (dataplane.Watcher), taken before the
//     observation so that a change made while observing is not missed;
//   - an event another writer (the orchestrator's cancel request) appended
//     to the node's history, seen on a core NATS subscription to the node's
//     event subjects;
//   - the moment the block turns into a stall (StallAfter) or, for a
//     permanent cause, a failure (FailAfter), so that both keep their timing;
//   - the safety resync (Resync), or, on a data plane without the signal,
//     the poll (PollInterval).

// changes is the data plane's change signal for the next wait, nil (never
// ready) on a data plane without one.
func (w *Worker) changes() <-chan struct{} {
	if dw, ok := w.cfg.DataPlane.(dataplane.Watcher); ok {
		return dw.Changed()
	}
	return nil
}

// idle is how long a wait lasts without any wake: the resync when the data
// plane signals its changes, the poll when it does not.
func (w *Worker) idle() time.Duration {
	if _, ok := w.cfg.DataPlane.(dataplane.Watcher); ok {
		return w.cfg.Resync
	}
	return w.cfg.PollInterval
}

// policy is the worker's timing of its loop (see pace).
func (w *Worker) policy() policy {
	return policy{stallAfter: w.cfg.StallAfter, failAfter: w.cfg.FailAfter, idle: w.idle()}
}

// watchNode subscribes to the node's events for the worker's lifetime and
// turns those written by others into wakes (the worker's own appends are
// already in its state). It returns the unsubscribe.
func (w *Worker) watchNode() (func(), error) {
	own := events.SourceWorker + "/" + w.cfg.Node
	sub, err := w.cfg.Store.JetStream().Conn().Subscribe(events.NodeSubjects(w.cfg.Node), func(m *nats.Msg) {
		if m.Header.Get(events.HeaderPrefix+"source") == own {
			return
		}
		select {
		case w.nodeEvents <- struct{}{}:
		default: // a wake is pending already
		}
	})
	if err != nil {
		return nil, fmt.Errorf("nodeworker %s: watch the node's events: %w", w.cfg.Node, err)
	}
	return func() { _ = sub.Unsubscribe() }, nil
}

// noticeRetries space the reloads after a node event notice that the
// reload does not show yet: the core NATS notice and the stream's storing
// of the message race, so the stream may lag the notice by a moment.
var noticeRetries = []time.Duration{time.Millisecond, 5 * time.Millisecond, 20 * time.Millisecond, 100 * time.Millisecond}

// wait blocks until one of the wakes above, then reloads the node aggregate
// (a cancel request or another writer's event must be seen). changed is the
// data plane's signal taken before the observation; d the longest wait.
func (r *run) wait(ctx context.Context, changed <-chan struct{}, d time.Duration) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-changed:
	case <-timer.C:
	case <-r.w.nodeEvents:
		before := r.version
		for _, pause := range noticeRetries {
			if err := r.reload(ctx); err != nil || r.version != before {
				return err
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(pause):
			}
		}
	}
	return r.reload(ctx)
}
