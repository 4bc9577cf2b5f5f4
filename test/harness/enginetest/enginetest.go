// Package enginetest runs the whole upgrade engine in one process for tests:
// an embedded NATS server, the event store, the command queue, the
// orchestrator and one worker per node, over a simulated cluster.
package enginetest

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchback-dev/switchback/aggregate/manager"
	"github.com/switchback-dev/switchback/aggregate/nodeupgrade"
	"github.com/switchback-dev/switchback/api/v1beta2"
	"github.com/switchback-dev/switchback/commands"
	"github.com/switchback-dev/switchback/commands/intake"
	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/eventstore"
	"github.com/switchback-dev/switchback/natsembed"
	"github.com/switchback-dev/switchback/natsembed/natstest"
	"github.com/switchback-dev/switchback/nodequeue"
	"github.com/switchback-dev/switchback/nodeworker"
	"github.com/switchback-dev/switchback/orchestrator"
)

// Options tune the engine for tests: short timeouts so stalls and failures
// show within a test's patience.
type Options struct {
	// PollInterval is how often a worker re-reads a data plane without the
	// change signal (dataplane.Watcher); default 5ms.
	PollInterval time.Duration
	// Resync is a worker's safety re-read of a data plane with the signal;
	// default an hour, so that a step a signal fails to wake shows as a
	// test timing out instead of passing on the resync.
	Resync     time.Duration
	StallAfter time.Duration // default 300ms
	FailAfter  time.Duration // default 2s
	AckWait    time.Duration // default 2s
	MaxDeliver int           // default 8
	// NoWorkers starts no worker; call StartWorker.
	NoWorkers bool
	// HoldPoll is how often a held upgrade is re-checked (default 20ms).
	HoldPoll time.Duration
	// Defaults runs every component with the product's own settings (each
	// package's defaults: the worker's poll, resync and stall timers, the
	// queue's AckWait) instead of the short ones above, for benchmarks of
	// what a user gets; the fields above must then be zero.
	Defaults bool
}

// Engine is a running engine.
type Engine struct {
	t      testing.TB
	Server *natsembed.Server
	NC     *nats.Conn
	JS     jetstream.JetStream
	Store  *eventstore.Store
	Queue  *nodequeue.Queue
	Plane  dataplane.DataPlane
	Log    *slog.Logger
	opts   Options
	// intake requests and cancels upgrades, as the intake controller does,
	// and loads the aggregates.
	intake *commands.Executor

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	workers map[string]context.CancelFunc
	orchs   []context.CancelFunc
}

// Start runs an engine over plane for the test's duration; workers for every
// node of plane unless opts.NoWorkers.
func Start(t testing.TB, plane dataplane.DataPlane, opts Options) *Engine {
	t.Helper()
	if opts.Defaults {
		if opts != (Options{Defaults: true}) {
			t.Fatalf("enginetest: Options.Defaults with other settings: %+v", opts)
		}
	} else {
		opts.PollInterval = cmp.Or(opts.PollInterval, 5*time.Millisecond)
		opts.Resync = cmp.Or(opts.Resync, time.Hour)
		opts.StallAfter = cmp.Or(opts.StallAfter, 300*time.Millisecond)
		opts.FailAfter = cmp.Or(opts.FailAfter, 2*time.Second)
		opts.AckWait = cmp.Or(opts.AckWait, 2*time.Second)
		opts.HoldPoll = cmp.Or(opts.HoldPoll, 20*time.Millisecond)
	}
	srv := natstest.Start(t)
	nc, js := natstest.Connect(t, srv)
	ctx, cancel := context.WithCancel(context.Background())
	store, err := eventstore.Open(ctx, js, eventstore.Config{})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	q, err := nodequeue.Open(ctx, js, nodequeue.Config{AckWait: opts.AckWait, MaxDeliver: opts.MaxDeliver})
	if err != nil {
		t.Fatalf("open queue: %v", err)
	}
	handler := slog.DiscardHandler
	if os.Getenv("ENGINE_LOG") != "" {
		handler = slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})
	}
	e := &Engine{
		t: t, Server: srv, NC: nc, JS: js, Store: store, Queue: q, Plane: plane,
		Log:  slog.New(handler),
		opts: opts, ctx: ctx, cancel: cancel, workers: map[string]context.CancelFunc{},
		intake: commands.New(commands.Config{Store: store, Source: events.SourceIntake}),
	}
	// Stop the engine before the server (registered earlier, so it runs later).
	t.Cleanup(e.Stop)
	e.StartOrchestrator()
	if !opts.NoWorkers {
		nodes, err := plane.Nodes(ctx)
		if err != nil {
			t.Fatalf("list nodes: %v", err)
		}
		for _, n := range nodes {
			e.StartWorker(n.Name)
		}
	}
	return e
}

// StartOrchestrator starts one more orchestrator instance.
func (e *Engine) StartOrchestrator() {
	o, err := orchestrator.New(orchestrator.Config{Store: e.Store, Queue: e.Queue, Cluster: e.Plane, Log: e.Log, HoldPoll: e.opts.HoldPoll})
	if err != nil {
		e.t.Fatalf("orchestrator: %v", err)
	}
	ctx, cancel := context.WithCancel(e.ctx)
	e.mu.Lock()
	e.orchs = append(e.orchs, cancel)
	e.mu.Unlock()
	e.wg.Go(func() {
		if err := o.Run(ctx); err != nil && ctx.Err() == nil {
			e.t.Errorf("orchestrator stopped: %v", err)
		}
	})
}

// StopOrchestrators kills every orchestrator instance mid-whatever, like
// a crash: the event it was reacting to comes back to the next one.
func (e *Engine) StopOrchestrators() {
	e.mu.Lock()
	orchs := e.orchs
	e.orchs = nil
	e.mu.Unlock()
	for _, cancel := range orchs {
		cancel()
	}
}

// StartWorker starts the worker of node (again, after StopWorker), on a
// connection of its own, as a separate process would.
func (e *Engine) StartWorker(node string) {
	nc, err := e.Server.Connect()
	if err != nil {
		e.t.Fatalf("worker %s: %v", node, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		e.t.Fatalf("worker %s: %v", node, err)
	}
	store, err := eventstore.Open(e.ctx, js, eventstore.Config{})
	if err != nil {
		e.t.Fatalf("worker %s: %v", node, err)
	}
	q, err := nodequeue.Open(e.ctx, js, e.Queue.Config())
	if err != nil {
		e.t.Fatalf("worker %s: %v", node, err)
	}
	w, err := nodeworker.New(nodeworker.Config{
		Node: node, Store: store, Queue: q, DataPlane: e.Plane, Log: e.Log,
		PollInterval: e.opts.PollInterval, Resync: e.opts.Resync, StallAfter: e.opts.StallAfter, FailAfter: e.opts.FailAfter,
	})
	if err != nil {
		e.t.Fatalf("worker %s: %v", node, err)
	}
	ctx, cancel := context.WithCancel(e.ctx)
	e.mu.Lock()
	e.workers[node] = func() { cancel(); nc.Close() }
	e.mu.Unlock()
	e.wg.Go(func() {
		if err := w.Run(ctx); err != nil && ctx.Err() == nil {
			e.t.Errorf("worker %s stopped: %v", node, err)
		}
	})
}

// StopWorker kills node's worker mid-whatever, like a crash: its context is
// cancelled and its connection dropped, so its command is not acked and comes
// back after AckWait.
func (e *Engine) StopWorker(node string) {
	e.mu.Lock()
	cancel := e.workers[node]
	delete(e.workers, node)
	e.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// Stop stops every component and waits for them.
func (e *Engine) Stop() {
	e.cancel()
	e.wg.Wait()
}

// Context is the engine's context.
func (e *Engine) Context() context.Context { return e.ctx }

// Request records a new manager as the intake would.
func (e *Engine) Request(ref events.ManagerRef, nodes ...string) {
	e.t.Helper()
	e.RequestSpec(ref, v1beta2.DataEngineUpgradeManagerSpec{DataEngine: v1beta2.DataEngineTypeV2, Nodes: nodes})
}

// RequestSpec records the creation of manager ref with spec.
func (e *Engine) RequestSpec(ref events.ManagerRef, spec v1beta2.DataEngineUpgradeManagerSpec) {
	e.t.Helper()
	if _, err := intake.RequestUpgrade(e.ctx, e.intake, ref, 1, spec); err != nil {
		e.t.Fatalf("request upgrade %s: %v", ref, err)
	}
}

// Cancel records the manager's deletion.
func (e *Engine) Cancel(ref events.ManagerRef) {
	e.t.Helper()
	if _, err := intake.RequestCancel(e.ctx, e.intake, ref, "deleted by the test"); err != nil {
		e.t.Fatalf("cancel %s: %v", ref, err)
	}
}

// Manager folds the manager aggregate now.
func (e *Engine) Manager(ref events.ManagerRef) manager.State {
	l, err := e.intake.Managers.Load(e.ctx, events.ManagerAggregate(ref))
	if err != nil {
		e.t.Fatalf("load manager %s: %v", ref, err)
	}
	return l.State
}

// Node folds a node aggregate now.
func (e *Engine) Node(ref events.ManagerRef, node string) nodeupgrade.State {
	l, err := e.intake.Nodes.Load(e.ctx, events.NodeAggregate(ref, node))
	if err != nil {
		e.t.Fatalf("load node %s of %s: %v", node, ref, err)
	}
	return l.State
}

// WaitManager waits until cond holds for the manager, failing after timeout.
func (e *Engine) WaitManager(ref events.ManagerRef, timeout time.Duration, what string, cond func(manager.State) bool) manager.State {
	e.t.Helper()
	var st manager.State
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if st = e.Manager(ref); cond(st) {
			return st
		}
		time.Sleep(5 * time.Millisecond)
	}
	e.t.Fatalf("manager %s: %s not reached within %s; state %s, message %q, upgrading %q", ref, what, timeout, st.State, st.Message, st.UpgradingNode)
	return st
}

// WaitNode waits until cond holds for a node aggregate.
func (e *Engine) WaitNode(ref events.ManagerRef, node string, timeout time.Duration, what string, cond func(nodeupgrade.State) bool) nodeupgrade.State {
	e.t.Helper()
	var st nodeupgrade.State
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if st = e.Node(ref, node); cond(st) {
			return st
		}
		time.Sleep(5 * time.Millisecond)
	}
	e.t.Fatalf("node %s of %s: %s not reached within %s; state %s stalled=%v message %q", node, ref, what, timeout, st.State, st.Stalled, st.Message)
	return st
}

// History returns every event of the manager's upgrade, in stream order.
func (e *Engine) History(ref events.ManagerRef) []events.Envelope {
	e.t.Helper()
	var out []events.Envelope
	err := e.Store.Scan(e.ctx, eventstore.ScanOptions{Subjects: []string{events.ManagerSubjectPrefix(ref) + ".>"}}, func(env events.Envelope) error {
		out = append(out, env)
		return nil
	}, func(de *events.DecodeError) { e.t.Errorf("parked: %v", de) })
	if err != nil {
		e.t.Fatalf("history %s: %v", ref, err)
	}
	return out
}

// LastOf returns the data of the last event of type T in h.
func LastOf[T events.Event](h []events.Envelope) (T, bool) {
	var zero T
	for i := len(h) - 1; i >= 0; i-- {
		if d, ok := h[i].Data.(T); ok {
			return d, true
		}
	}
	return zero, false
}

// Transitions counts, per "aggregate type from->to" key, the state-changing
// events of an upgrade: each must appear exactly once.
func Transitions(h []events.Envelope) map[string]int {
	out := map[string]int{}
	for _, e := range h {
		var key string
		if v := nodeupgrade.RebuildVolume(e.Data); v != "" {
			// One of each rebuild event per volume and node.
			out[fmt.Sprintf("%s %s %s", e.Aggregate.Node, e.Type(), v)]++
			continue
		}
		switch d := e.Data.(type) {
		case events.NodeStateChanged:
			key = fmt.Sprintf("%s %s->%s", e.Aggregate.Node, d.From, d.To)
		case events.VolumeStateChanged:
			key = fmt.Sprintf("%s vol %s %s->%s", e.Aggregate.Node, d.Volume, d.From, d.To)
		case events.PrecheckPassed:
			key = "precheck " + d.Check
		case events.PrecheckFailed:
			key = "precheck " + d.Check
		case events.NodeScheduled:
			key = "scheduled " + d.Node
		case events.NodeFinished:
			key = "finished " + d.Node
		case events.PodMoved:
			// One per pod: the same pod (uid) moved twice is a duplicate.
			key = fmt.Sprintf("%s moved %s %s", e.Aggregate.Node, d.Pod, d.UID)
		case events.NodeStalled, events.NodeResumed:
			continue // may legitimately repeat
		default:
			key = fmt.Sprintf("%s %s", e.Aggregate.Node, e.Type())
		}
		out[key]++
	}
	return out
}
