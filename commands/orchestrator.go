package commands

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchback-dev/switchback/aggregate"
	"github.com/switchback-dev/switchback/aggregate/manager"
	"github.com/switchback-dev/switchback/aggregate/nodeupgrade"
	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/eventstore"
	"github.com/switchback-dev/switchback/plan"
	"github.com/switchback-dev/switchback/precheck"
	"github.com/switchback-dev/switchback/workqueue"
)

// OrchestratorConsumer is the durable consumer the orchestrator reads history
// with. Every orchestrator instance shares it; one instance handles events in
// stream order, and an event redelivered (to another instance after a crash,
// or out of order after a failed reaction) is handled again harmlessly:
// every reaction decides from the aggregates' current state, not from the
// event alone, and issues idempotent commands.
const OrchestratorConsumer = "orchestrator"

// orchestratorBatch bounds events in flight to one instance: most events
// (volume changes) need no reaction, so pulling one at a time would make the
// orchestrator's pace a network round trip per event.
const orchestratorBatch = 128

// orchestratorWait is how long one fetch waits for the next event when the
// orchestrator is caught up; orchestratorRetry spaces fetches that failed.
const (
	orchestratorWait  = 5 * time.Second
	orchestratorRetry = 100 * time.Millisecond
)

// OrchestratorConfig wires the orchestrator.
type OrchestratorConfig struct {
	Store *eventstore.Store
	Queue *workqueue.Queue
	// Cluster is read for prechecks and planning.
	Cluster dataplane.Reader
	// ActiveUpgrades lists the other managers still in progress (namespace/name);
	// default: folded from the stream.
	ActiveUpgrades func(ctx context.Context, except events.ManagerRef) ([]string, error)
	Now            func() time.Time
	// OnParked is told about messages on the stream that do not decode.
	OnParked func(*events.DecodeError)
	// HoldPoll is how often a held upgrade is re-checked; default
	// DefaultHoldPoll.
	HoldPoll time.Duration
	Log      *slog.Logger
}

// Orchestrator is the process manager: it turns history into the next
// decisions (prechecks, scheduling, node commands, outcomes, cancel), and
// holds an upgrade between nodes while Longhorn's own upgrader would race it
// (see gateOtherUpgrader).
type Orchestrator struct {
	cfg OrchestratorConfig
	log *slog.Logger

	mu    sync.Mutex
	plans map[string]manager.State // by manager UID; see plan

	// The fold behind activeFromStream, extended from where it stopped.
	activeMu  sync.Mutex
	open      map[events.ManagerRef]manager.State // managers not terminal yet
	settled   map[events.ManagerRef]bool          // terminal: nothing more to fold
	scannedTo uint64
}

// NewOrchestrator validates cfg.
func NewOrchestrator(cfg OrchestratorConfig) (*Orchestrator, error) {
	if cfg.Store == nil || cfg.Queue == nil || cfg.Cluster == nil {
		return nil, errors.New("orchestrator: Store, Queue and Cluster are required")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.HoldPoll <= 0 {
		cfg.HoldPoll = DefaultHoldPoll
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	o := &Orchestrator{cfg: cfg, log: cfg.Log.With("component", "orchestrator"), plans: map[string]manager.State{}}
	if o.cfg.ActiveUpgrades == nil {
		o.cfg.ActiveUpgrades = o.activeFromStream
	}
	return o, nil
}

// Run consumes history until ctx ends.
func (o *Orchestrator) Run(ctx context.Context) error {
	js := o.cfg.Store.JetStream()
	_, err := js.CreateOrUpdateConsumer(ctx, o.cfg.Store.Stream(), jetstream.ConsumerConfig{
		Durable:       OrchestratorConsumer,
		Description:   "Switchback orchestrator: reacts to upgrade history",
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       30 * time.Second,
		MaxAckPending: orchestratorBatch,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return fmt.Errorf("orchestrator: consumer: %w", err)
	}
	dead, err := o.cfg.Queue.WatchDeadLetters(ctx, o.onDeadCommand)
	if err != nil {
		return err
	}
	defer dead.Stop()
	holds, stopHolds := context.WithCancel(ctx)
	var watching sync.WaitGroup
	watching.Go(func() { o.watchHolds(holds, o.cfg.HoldPoll) })
	defer watching.Wait()
	defer stopHolds()
	// Store.Fetch, not the nats.go consumer API: a stored event that looks
	// like a NATS status must be parked, not dropped unacknowledged forever.
	for {
		msgs, err := o.cfg.Store.Fetch(ctx, OrchestratorConsumer, orchestratorBatch, orchestratorWait)
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, nats.ErrConnectionClosed):
			return fmt.Errorf("orchestrator: %w", err)
		case err != nil:
			o.log.Warn("next event", "error", err)
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(orchestratorRetry):
			}
			continue
		}
		for _, msg := range msgs {
			o.handleMsg(ctx, msg)
		}
	}
}

func (o *Orchestrator) handleMsg(ctx context.Context, msg jetstream.Msg) {
	meta, _ := msg.Metadata()
	var seq uint64
	if meta != nil {
		seq = meta.Sequence.Stream
	}
	env, err := eventstore.DecodeDelivered(msg.Subject(), seq, msg.Headers(), msg.Data())
	if err != nil {
		// Parked: the projector reports it; the orchestrator has nothing to do.
		var de *events.DecodeError
		if errors.As(err, &de) && o.cfg.OnParked != nil {
			o.cfg.OnParked(de)
		}
		o.log.Warn("skipping undecodable event", "subject", msg.Subject(), "seq", seq, "error", err)
		_ = msg.Ack()
		return
	}
	if err := o.React(ctx, env); err != nil {
		if ctx.Err() != nil {
			return
		}
		o.log.Error("reaction failed; retrying", "manager", env.Aggregate.Manager.String(), "node", env.Aggregate.Node, "type", env.Type(), "seq", seq, "error", err)
		_ = msg.NakWithDelay(time.Second)
		return
	}
	// A plain ack: should it be lost, the redelivered event is handled again,
	// harmlessly.
	if err := msg.Ack(); err != nil {
		o.log.Warn("ack event", "seq", seq, "error", err)
	}
}

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
	_, err := Execute(ctx, o.cfg.Store, NodeMachine, agg, events.SourceController, o.cfg.Now(),
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
	cmd := workqueue.Command{
		ID:   fmt.Sprintf("%s/%s/%s/%d/%s", why, st.Ref.UID, events.EncodeToken(node), attempt, step),
		Kind: workqueue.Advance, Manager: st.Ref, Node: node, Attempt: attempt, Step: step,
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
	res, err := Execute(ctx, o.cfg.Store, ManagerMachine, events.ManagerAggregate(ref), events.SourceController, o.cfg.Now(), cmd)
	for _, e := range res.Appended {
		o.log.Info("manager event", "manager", ref.String(), "type", e.Type(), "state", res.State.State)
	}
	return err
}

func (o *Orchestrator) loadManager(ctx context.Context, ref events.ManagerRef) (manager.State, error) {
	l, err := Load(ctx, o.cfg.Store, ManagerMachine, events.ManagerAggregate(ref))
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
	l, err := Load(ctx, o.cfg.Store, NodeMachine, agg)
	return l.State, err
}

// onDeadCommand turns a command that exhausted its deliveries into a failed
// node: it must never be lost silently, and retrying it did not help.
func (o *Orchestrator) onDeadCommand(ctx context.Context, d workqueue.DeadCommand) error {
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
	_, err := Execute(ctx, o.cfg.Store, NodeMachine, agg, events.SourceController, o.cfg.Now(),
		nodeupgrade.Command(nodeupgrade.Fail{ID: deadID, Reason: "CommandDeadLettered",
			Message: fmt.Sprintf("command %s failed %d deliveries and was moved to %s; see the worker's logs", c.ID, d.Deliveries, workqueue.DeadLetterStream)}))
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

// activeFromStream returns the managers still in progress, except one. It
// folds the manager subjects once and then only what was appended since,
// forgetting managers once they are terminal: a stream with 10k finished
// upgrades must not be read whole at every new request.
func (o *Orchestrator) activeFromStream(ctx context.Context, except events.ManagerRef) ([]string, error) {
	var out []string
	err := o.foldOpen(ctx, func(ref events.ManagerRef, _ manager.State) {
		if ref != except {
			out = append(out, ref.String())
		}
	})
	slices.Sort(out)
	return out, err
}

// heldFromStream returns the managers held, from the same fold.
func (o *Orchestrator) heldFromStream(ctx context.Context) ([]events.ManagerRef, error) {
	var out []events.ManagerRef
	err := o.foldOpen(ctx, func(ref events.ManagerRef, st manager.State) {
		if st.Held != nil {
			out = append(out, ref)
		}
	})
	slices.SortFunc(out, func(a, b events.ManagerRef) int { return cmp.Compare(a.String(), b.String()) })
	return out, err
}

// foldOpen extends the fold of the manager subjects to the stream's end
// and calls f for each manager not terminal yet.
func (o *Orchestrator) foldOpen(ctx context.Context, f func(events.ManagerRef, manager.State)) error {
	o.activeMu.Lock()
	defer o.activeMu.Unlock()
	if o.open == nil {
		o.open, o.settled = map[events.ManagerRef]manager.State{}, map[events.ManagerRef]bool{}
	}
	seen := func(seq uint64) { o.scannedTo = max(o.scannedTo, seq) }
	err := o.cfg.Store.Scan(ctx, eventstore.ScanOptions{FromSeq: o.scannedTo + 1, Subjects: []string{events.SubjectPrefix + ".*.*.*.mgr"}},
		func(e events.Envelope) error {
			seen(e.Sequence)
			ref := e.Aggregate.Manager
			if o.settled[ref] {
				return nil
			}
			st, _ := manager.Evolve(o.open[ref], e)
			if st.Terminal() {
				delete(o.open, ref)
				o.settled[ref] = true
				return nil
			}
			o.open[ref] = st
			return nil
		}, func(de *events.DecodeError) { seen(de.Sequence) })
	if err != nil {
		return err
	}
	for ref, st := range o.open {
		if st.Exists {
			f(ref, st)
		}
	}
	return nil
}
