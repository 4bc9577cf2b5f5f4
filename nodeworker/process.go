package nodeworker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/switchback-dev/switchback/aggregate"
	"github.com/switchback-dev/switchback/aggregate/nodeupgrade"
	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/eventstore"
	"github.com/switchback-dev/switchback/metrics"
	"github.com/switchback-dev/switchback/nodequeue"
)

// outcome is what one observation of a step found.
type outcome struct {
	// done: the step's goal holds; the node may move on.
	done bool
	// progressed: this round changed something (an action, a volume state),
	// so whatever blocked before is not a stall.
	progressed bool
	// block says what the step waits for, when not done.
	block *block
	// fatal ends the node upgrade in error.
	fatal *block
}

// block names what a step waits for: shown in stalled events and status.
type block struct {
	volume  string
	reason  string
	message string
	// permanent causes (an IM in error) fail the node after FailAfter.
	permanent bool
	// until is when a bounded wait ends by itself (a deadline the step
	// keeps, zero for none): the step observes again then, and is not
	// reported stalled before it.
	until time.Time
}

func waiting(volume, reason, format string, args ...any) *block {
	return &block{volume: volume, reason: reason, message: fmt.Sprintf(format, args...)}
}

// run is one command's execution context.
type run struct {
	w   *Worker
	cmd nodequeue.Command
	agg events.AggregateID
	st  nodeupgrade.State
	// version is the aggregate version st reflects.
	version uint64
	// volumes are volume changes decided this round, appended together by flush.
	volumes []nodeupgrade.SetVolumeState
}

func (r *run) dp() dataplane.DataPlane { return r.w.cfg.DataPlane }

// settings are this run's inputs to the step decisions.
func (r *run) settings() settings {
	return settings{
		node:      r.w.cfg.Node,
		image:     r.cmd.InstanceManagerImage,
		snapshot:  r.snapshotName(),
		idPrefix:  r.id(""),
		hashRate:  r.w.cfg.HashRate,
		hashFloor: r.w.cfg.HashFloor,
		copyRate:  r.w.cfg.CopyRate,
	}
}

// snapshotName is per manager and node: a redelivered step finds its own
// snapshot instead of taking another.
func (r *run) snapshotName() string {
	uid := r.cmd.Manager.UID
	if len(uid) > 8 {
		uid = uid[:8]
	}
	return "switchback-" + uid + "-" + r.w.cfg.Node
}

// round is one observation of step ("" for the cancel flow): gather,
// decide, apply.
func (r *run) round(step events.NodeState) func(context.Context) (outcome, error) {
	return func(ctx context.Context) (outcome, error) {
		o, err := r.observe(ctx, step)
		if err != nil {
			return outcome{}, err
		}
		if step == "" {
			return r.apply(ctx, decideCancel(o, r.st, r.settings()))
		}
		return r.apply(ctx, decide(step, o, r.st, r.settings()))
	}
}

// leftAway says, for a node upgrade about to end in error, which volumes'
// targets stay on their temporary node and the spec.engineNodeID each had:
// an error is terminal, so the operator restores them once the node is
// fixed. "" when none is away.
func leftAway(st nodeupgrade.State) string {
	var parts []string
	for _, name := range st.VolumesWhere(nodeupgrade.Volume.TargetAway) {
		v := st.Volumes[name]
		if v.EngineNodeBefore == nil {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s (spec.engineNodeID was %q, target on %s)", name, *v.EngineNodeBefore, v.TargetNode))
	}
	if len(parts) == 0 {
		return ""
	}
	return "; targets left on their temporary node, safe; restore their spec.engineNodeID once the node is fixed: " + strings.Join(parts, ", ")
}

// restoreBeforeFail writes back the node's recorded replica scheduling
// before the node upgrade ends in error: nothing but history would know the
// value afterwards.
func (r *run) restoreBeforeFail(ctx context.Context) error {
	o, err := r.observe(ctx, events.NodeError)
	if err != nil {
		return err
	}
	p := stepPlan{}
	p.restoreScheduling(o, r.st, r.settings())
	p.removeTaint(o, r.st, r.settings())
	_, err = r.apply(ctx, p)
	return err
}

// process runs the step cmd names, if the node is still at it.
func (w *Worker) process(ctx context.Context, cmd nodequeue.Command) (err error) {
	r := &run{w: w, cmd: cmd, agg: events.NodeAggregate(cmd.Manager, w.cfg.Node)}
	if last := w.last; last != nil && last.agg == r.agg {
		r.st, r.version = last.st, last.version
	} else if err := r.reload(ctx); err != nil {
		return err
	}
	w.last = nil
	defer func() {
		if err == nil {
			w.last = r
		}
	}()
	if !r.st.Exists {
		if cmd.Step != events.NodePending {
			return fmt.Errorf("node upgrade %s does not exist; command %s is for step %s", r.agg, cmd.ID, cmd.Step)
		}
		// A manager deleted or failed while this command waited must not
		// start a node. (Should the two cross anyway, the orchestrator sees
		// the start and cancels the node at once.)
		if start, err := w.managerStillStarts(ctx, cmd); err != nil || !start {
			return err
		}
		platform, err := w.cfg.DataPlane.Platform(ctx)
		if err != nil {
			return err
		}
		if err := r.exec(ctx, nodeupgrade.Start{Meta: aggregate.Meta{ID: r.id("start")},
			Node: w.cfg.Node, DataEngine: cmd.DataEngine, InstanceManagerImage: cmd.InstanceManagerImage, Attempt: cmd.Attempt,
			LonghornProfile: string(platform.Profile), InitiatorPolicy: cmd.InitiatorPolicy, ReplicaPolicy: cmd.ReplicaPolicy,
		}); err != nil {
			return err
		}
	}
	started := time.Now()
	return r.loop(ctx, cmd.Step, r.round(cmd.Step), func(ctx context.Context) error {
		if err := r.exec(ctx, nodeupgrade.CompleteStep{Meta: aggregate.Meta{ID: r.id("complete/" + string(cmd.Step))}, From: cmd.Step, Message: nodeSteps[cmd.Step].done}); err != nil {
			return err
		}
		metrics.StepDuration.WithLabelValues(string(cmd.Step)).Observe(time.Since(started).Seconds())
		return nil
	})
}

// managerStillStarts says whether the manager still has cmd's node in
// flight, as when it scheduled it. Usually nothing came after that
// scheduling: its event is the manager's last, read alone, and the node
// starts without a fold of the manager's state, which lists every node
// (one per node upgrade, so a cost that grew with the cluster at every
// node). Otherwise the folded state decides.
func (w *Worker) managerStillStarts(ctx context.Context, cmd nodequeue.Command) (bool, error) {
	agg := events.ManagerAggregate(cmd.Manager)
	if last, ok, err := w.cfg.Store.LastEvent(ctx, agg); err == nil && ok && last.Aggregate == agg {
		if d, ok := last.Data.(events.NodeScheduled); ok && d.Node == w.cfg.Node && d.Attempt == cmd.Attempt {
			return true, nil
		}
	}
	m, err := w.x.Managers.Load(ctx, agg)
	if err != nil {
		return false, err
	}
	if !m.State.Exists {
		return false, fmt.Errorf("%w: %s (uid %s)", errUnknownManager, cmd.Manager, cmd.Manager.UID)
	}
	if m.State.Terminal() || m.State.CancelRequested || m.State.UpgradingNode != w.cfg.Node {
		w.log.Info("not starting: the manager moved on", "manager", cmd.Manager.String(), "state", m.State.State)
		return false, nil
	}
	return true, nil
}

// errUnknownManager marks a command whose manager has no history: retrying
// cannot help, so the command is parked.
var errUnknownManager = errors.New("unknown manager")

// loop observes until observe reports done (then calls onDone), the node
// leaves step, or a cancel arrives (then the cancel flow takes over; the
// cancel flow itself runs with step ""). While blocked it waits for a change
// (wait); blocked for StallAfter it reports a stall naming what blocks, and
// progress ends it.
func (r *run) loop(ctx context.Context, step events.NodeState, observe func(context.Context) (outcome, error), onDone func(context.Context) error) error {
	w := r.w
	var pc pacing
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		switch {
		case r.st.Terminal():
			return nil
		case step != "" && r.st.CancelRequested:
			return r.cancel(ctx)
		case step != "" && r.st.State != step:
			// Already past it (a redelivery or a re-issued command).
			return nil
		}
		// Taken before observing: a change while observing wakes the wait.
		changed := w.changes()
		out, err := observe(ctx)
		if err == nil {
			err = r.flush(ctx)
		}
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			// The data plane failing is a reason to wait, shown like any other
			// block; redelivery would only repeat the same reads.
			out = outcome{block: waiting("", "DataPlaneError", "%v", err)}
		}
		now := w.cfg.Now()
		switch {
		case out.fatal != nil:
			if err := r.restoreBeforeFail(ctx); err != nil {
				return err
			}
			return r.exec(ctx, nodeupgrade.Fail{Meta: aggregate.Meta{ID: r.id("fail")}, Step: r.st.State, Reason: out.fatal.reason, Message: out.fatal.message + leftAway(r.st)})
		case out.done:
			return onDone(ctx)
		}
		t := pace(out, r.st.Stalled, pc, now, w.policy())
		pc = t.pacing
		if t.resume {
			if err := r.exec(ctx, nodeupgrade.ReportProgress{Meta: aggregate.Meta{ID: r.id("progress")}, Step: r.st.State, Message: "progressing again"}); err != nil {
				return err
			}
		}
		if f := t.fail; f != nil {
			if err := r.restoreBeforeFail(ctx); err != nil {
				return err
			}
			return r.exec(ctx, nodeupgrade.Fail{Meta: aggregate.Meta{ID: r.id("fail")}, Step: r.st.State, Reason: f.reason, Message: f.message + leftAway(r.st)})
		}
		if b := t.stall; b != nil {
			if err := r.exec(ctx, nodeupgrade.ReportStall{Meta: aggregate.Meta{ID: r.id("stall")}, Step: r.st.State, Volume: b.volume, Reason: b.reason, Message: b.message}); err != nil {
				return err
			}
		}
		if t.again {
			// Our own appends keep st current; act again at once.
			continue
		}
		if err := r.wait(ctx, changed, t.wait); err != nil {
			return err
		}
	}
}

// reload folds the node aggregate again: a cancel request or another
// worker's progress must be seen.
func (r *run) reload(ctx context.Context) error {
	l, err := r.w.x.Nodes.Load(ctx, r.agg)
	if err != nil {
		return err
	}
	for _, p := range l.Problems {
		r.w.log.Warn("node history has a message that was skipped", "manager", r.cmd.Manager.String(), "error", p)
	}
	r.st, r.version = l.State, l.Version
	return nil
}

// id names one kind of worker decision; Execute makes it unique per
// aggregate version.
func (r *run) id(what string) string {
	return fmt.Sprintf("worker/%s/%s/%s", r.cmd.Manager.UID, r.w.cfg.Node, what)
}

// exec decides and appends one node command and adopts the resulting state.
func (r *run) exec(ctx context.Context, cmd nodeupgrade.Command) error {
	from := &eventstore.Loaded[nodeupgrade.State]{State: r.st, Version: r.version}
	res, err := r.w.x.Nodes.ExecuteFrom(ctx, r.agg, from, cmd)
	if err != nil {
		return err
	}
	r.st, r.version = res.State, res.Version
	for _, e := range res.Appended {
		r.w.log.Info("node event", "manager", r.cmd.Manager.String(), "type", e.Type(), "state", r.st.State)
	}
	return nil
}

// setVolume queues a volume transition (unless already recorded) for the
// round's flush: a step moving many volumes appends one batch.
func (r *run) setVolume(c nodeupgrade.SetVolumeState) {
	if v, ok := r.st.Volumes[c.Volume]; ok && v.State == c.To && (c.TargetNode == "" || v.TargetNode == c.TargetNode) {
		return
	}
	r.volumes = append(r.volumes, c)
}

// flush appends the queued volume transitions as one decision.
func (r *run) flush(ctx context.Context) error {
	if len(r.volumes) == 0 {
		return nil
	}
	changes := r.volumes
	r.volumes = nil
	return r.exec(ctx, nodeupgrade.SetVolumeStates{Meta: aggregate.Meta{ID: r.id("volumes")}, Changes: changes})
}
