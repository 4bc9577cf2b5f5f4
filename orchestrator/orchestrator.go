package orchestrator

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/switchback-dev/switchback/aggregate/manager"
	"github.com/switchback-dev/switchback/commands"
	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/eventstore"
	"github.com/switchback-dev/switchback/nodequeue"
)

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

// Config wires the orchestrator.
type Config struct {
	Store *eventstore.Store
	Queue *nodequeue.Queue
	// Cluster is read for prechecks and planning, and for the records of
	// targets away (targets.go).
	Cluster dataplane.Reader
	// Targets writes the records of targets away; default: Cluster, when
	// it is a dataplane.TargetRecorder. Without one no record is written,
	// and the workers wait on every move of a target.
	Targets dataplane.TargetRecorder
	// Marks writes the marks of the nodes still to come (marks.go);
	// default: Cluster, when it is a dataplane.NodeMarker. Without one
	// nothing is marked, and a moved workload may move again.
	Marks dataplane.NodeMarker
	// Hasher asks for the hashing of a volume's snapshots (hashing.go);
	// default: Cluster, when it is a dataplane.SnapshotHasher. Without one
	// nothing is hashed, and each volume's rebuild plan waits out its
	// deadline.
	Hasher dataplane.SnapshotHasher
	// Snapshots removes the upgrade's snapshots once it completed
	// (snapshots.go); default: Cluster, when it is a SnapshotRemover.
	// Without one, or with KeepSnapshots, they are kept.
	Snapshots     SnapshotRemover
	KeepSnapshots bool
	// Replicas raises and restores a volume's replica count for a
	// temporary replica (replicas.go); default: Cluster, when it is a
	// dataplane.ReplicaCounter. Without one no temporary replica is
	// built, and an add-first node waits for one until told otherwise.
	Replicas dataplane.ReplicaCounter
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
	cfg Config
	log *slog.Logger
	x   *commands.Executor

	mu    sync.Mutex
	plans map[string]manager.State // by manager UID; see plan

	active *activeUpgrades

	targets  dataplane.TargetRecorder
	marks    dataplane.NodeMarker
	hasher   dataplane.SnapshotHasher
	snaps    SnapshotRemover
	replicas dataplane.ReplicaCounter
}

// NewOrchestrator validates cfg.
func New(cfg Config) (*Orchestrator, error) {
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
	log := cfg.Log.With("component", "orchestrator")
	o := &Orchestrator{cfg: cfg, log: log, plans: map[string]manager.State{},
		x:      commands.New(commands.Config{Store: cfg.Store, Source: events.SourceController, Now: cfg.Now}),
		active: &activeUpgrades{store: cfg.Store, log: log}}
	if o.cfg.ActiveUpgrades == nil {
		o.cfg.ActiveUpgrades = o.active.except
	}
	o.targets = cfg.Targets
	if tr, ok := cfg.Cluster.(dataplane.TargetRecorder); ok && o.targets == nil {
		o.targets = tr
	}
	if o.targets == nil {
		log.Warn("no writer of the records of targets away: workers will wait on every move of a target")
	}
	o.marks = cfg.Marks
	if m, ok := cfg.Cluster.(dataplane.NodeMarker); ok && o.marks == nil {
		o.marks = m
	}
	o.snaps = cfg.Snapshots
	if r, ok := cfg.Cluster.(SnapshotRemover); ok && o.snaps == nil {
		o.snaps = r
	}
	o.hasher = cfg.Hasher
	if h, ok := cfg.Cluster.(dataplane.SnapshotHasher); ok && o.hasher == nil {
		o.hasher = h
	}
	o.replicas = cfg.Replicas
	if c, ok := cfg.Cluster.(dataplane.ReplicaCounter); ok && o.replicas == nil {
		o.replicas = c
	}
	return o, nil
}
