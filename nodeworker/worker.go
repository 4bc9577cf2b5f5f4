// Package nodeworker runs one node's upgrade: it consumes the node's commands
// from the work queue and walks the node states (initializing,
// failing-replicas, switching-over, upgrading-instance-manager, switching-back,
// rebuilding-replica, finalizing), appending an event after each step and only
// then acknowledging the command. Each round of a step gathers what it needs
// of the cluster, decides purely (steps.go) and applies the decision
// (apply.go).
//
// The node aggregate's history is the worker's only memory: a restarted or
// redelivered worker reloads it and continues at the recorded step. Every
// step observes the cluster first and acts only on what is not done yet, so
// running a step twice has no further effect.
package nodeworker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/switchback-dev/switchback/internal/periodic"
	"github.com/switchback-dev/switchback/plan"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchback-dev/switchback/commands"
	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/eventstore"
	"github.com/switchback-dev/switchback/nodequeue"
)

// Config configures a worker.
type Config struct {
	// Node is the node this worker upgrades.
	Node      string
	Store     *eventstore.Store
	Queue     *nodequeue.Queue
	DataPlane dataplane.DataPlane
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Resync is the longest a waiting step goes without observing again
	// when the data plane signals its changes (dataplane.Watcher), a
	// safety net for a lost signal; default 30s. The step wakes at once on
	// a change, on another writer's event in the node's history and when
	// its stall or failure is due.
	Resync time.Duration
	// PollInterval spaces observations while a step waits on a data plane
	// without the change signal; default 250ms.
	PollInterval time.Duration
	// StallAfter: a step blocked this long is reported stalled; default 2m.
	StallAfter time.Duration
	// FailAfter: a step blocked this long on a permanent cause (an IM that
	// keeps failing to start) fails the node; default 10m.
	FailAfter time.Duration
	// HashRate is the rate, in bytes per second of each replica, at which
	// Longhorn is expected to hash a volume's snapshots, and HashFloor the
	// least time given: before failing a volume's replica the worker waits
	// for the hashing until HashFloor plus what there is to hash at
	// HashRate, then fails it unhashed. Defaults 64 MiB/s and 2m.
	HashRate  int64
	HashFloor time.Duration
	// CopyRate is the rate, in bytes per second, at which Longhorn is
	// expected to build a temporary replica (spec.replicaPolicy
	// add-first): the wait for one is not a stall until HashFloor plus
	// the volume's actual size at CopyRate. Default 100 MiB/s.
	CopyRate int64
	// Sysfs is where the worker reads its host's kernel (nvme_core's
	// multipath parameter) to report it through a dataplane.HostReporter;
	// "" reads nothing.
	Sysfs string
	Log   *slog.Logger
}

// Worker consumes one node's commands.
type Worker struct {
	cfg Config
	log *slog.Logger
	// x runs the node's commands, as this node's worker.
	x *commands.Executor
	// ackWait is the command consumer's AckWait: heartbeats keep a command
	// in hand at a third of it.
	ackWait time.Duration
	// last is the node aggregate as this worker left it after the previous
	// command. The worker is its node's only regular writer, so the next
	// command usually starts from it without a load; anything appended by
	// others since shows up as a concurrency conflict, which reloads.
	last *run
	// nodeEvents holds one pending wake: another writer appended to the
	// node's history (watchNode).
	nodeEvents chan struct{}
}

// New validates cfg and returns a worker.
func New(cfg Config) (*Worker, error) {
	if cfg.Node == "" || cfg.Store == nil || cfg.Queue == nil || cfg.DataPlane == nil {
		return nil, errors.New("nodeworker: Node, Store, Queue and DataPlane are required")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	cfg.Resync = cmp.Or(cfg.Resync, 30*time.Second)
	cfg.PollInterval = cmp.Or(cfg.PollInterval, 250*time.Millisecond)
	cfg.StallAfter = cmp.Or(cfg.StallAfter, 2*time.Minute)
	cfg.FailAfter = cmp.Or(cfg.FailAfter, 10*time.Minute)
	cfg.HashRate = cmp.Or(cfg.HashRate, 64<<20)
	cfg.HashFloor = cmp.Or(cfg.HashFloor, 2*time.Minute)
	cfg.CopyRate = cmp.Or(cfg.CopyRate, plan.DefaultCopyRate)
	cfg.Log = cmp.Or(cfg.Log, slog.Default())
	x := commands.New(commands.Config{Store: cfg.Store, Source: events.SourceWorker + "/" + cfg.Node, Now: cfg.Now})
	return &Worker{cfg: cfg, log: cfg.Log.With("node", cfg.Node), x: x, nodeEvents: make(chan struct{}, 1)}, nil
}

// Run consumes commands until ctx ends. A command is acknowledged only after
// its step's event is stored; a failure before that leaves it to redelivery.
func (w *Worker) Run(ctx context.Context) error {
	cons, err := w.cfg.Queue.NodeConsumer(ctx, w.cfg.Node)
	if err != nil {
		return err
	}
	// The consumer's own AckWait, not this process's configuration: the
	// controller creates the consumer and may run with another one.
	w.ackWait = w.cfg.Queue.Config().AckWait
	if info := cons.CachedInfo(); info != nil && info.Config.AckWait > 0 {
		w.ackWait = info.Config.AckWait
	}
	unwatch, err := w.watchNode()
	if err != nil {
		return err
	}
	defer unwatch()
	hostCtx, stopHost := context.WithCancel(ctx)
	defer stopHost()
	w.reportHost(hostCtx)
	it, err := cons.Messages(jetstream.PullMaxMessages(1))
	if err != nil {
		return fmt.Errorf("nodeworker %s: consume: %w", w.cfg.Node, err)
	}
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	defer it.Stop()
	for {
		msg, err := it.Next()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				return ctx.Err()
			}
			if errors.Is(err, nats.ErrConnectionClosed) {
				return fmt.Errorf("nodeworker %s: %w", w.cfg.Node, err)
			}
			w.log.Warn("next command", "error", err)
			continue
		}
		w.handle(ctx, msg)
	}
}

// handle processes one delivery, keeping it alive with InProgress while the
// step runs (steps wait on the cluster for minutes; AckWait is seconds).
func (w *Worker) handle(ctx context.Context, msg jetstream.Msg) {
	meta, _ := msg.Metadata()
	if err := nodequeue.CheckCopied(msg.Subject(), msg.Headers()); err != nil {
		w.park(msg, err)
		return
	}
	cmd, err := nodequeue.DecodeCommand(msg.Data())
	if err != nil || cmd.Node != w.cfg.Node {
		if err == nil {
			err = fmt.Errorf("command %s is for node %q", cmd.ID, cmd.Node)
		}
		w.park(msg, err)
		return
	}
	log := w.log.With("manager", cmd.Manager.String(), "command", cmd.ID, "step", cmd.Step)
	if meta != nil {
		log.Debug("command received", "deliveries", meta.NumDelivered)
	}
	hbCtx, stopHB := context.WithCancel(ctx)
	defer stopHB()
	go w.heartbeat(hbCtx, msg)

	err = w.process(ctx, cmd)
	stopHB()
	switch {
	case err == nil:
		if err := msg.DoubleAck(ctx); err != nil {
			log.Warn("ack command", "error", err)
		}
	case errors.Is(err, errUnknownManager):
		w.park(msg, err)
	case ctx.Err() != nil:
		// Shutting down: leave the command to redelivery (AckWait).
	default:
		log.Error("command failed; it will be redelivered", "error", err)
		_ = msg.NakWithDelay(w.cfg.PollInterval * 4)
	}
}

func (w *Worker) heartbeat(ctx context.Context, msg jetstream.Msg) {
	periodic.Every(ctx, w.ackWait/3, func() { _ = msg.InProgress() })
}

// park refuses an undecodable or misrouted command for good (retrying it
// cannot help): the controller moves it to the dead-letter stream from
// JetStream's advisory, so a worker never writes that stream.
func (w *Worker) park(msg jetstream.Msg, cause error) {
	w.log.Error("refusing bad command; the controller parks it in the dead-letter stream", "error", cause)
	if err := nodequeue.Terminate(msg, cause); err != nil {
		w.log.Error("refuse bad command", "error", err)
	}
}
