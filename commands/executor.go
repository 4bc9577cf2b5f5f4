package commands

import (
	"time"

	"github.com/switchback-dev/switchback/aggregate/manager"
	"github.com/switchback-dev/switchback/aggregate/nodeupgrade"
	"github.com/switchback-dev/switchback/eventstore"
)

// Config says whose commands an Executor runs.
type Config struct {
	Store *eventstore.Store
	// Source is the events' CloudEvents source (events.SourceController,
	// SourceIntake, a worker's).
	Source string
	// Now stamps the events; default time.Now.
	Now func() time.Time
}

// Executor runs commands against Switchback's two aggregates: the managers
// and the node upgrades. Each Executor has its own state cache.
type Executor struct {
	Managers *Aggregate[manager.State, manager.Command]
	Nodes    *Aggregate[nodeupgrade.State, nodeupgrade.Command]
}

// New returns an Executor for cfg.
func New(cfg Config) *Executor {
	return &Executor{
		Managers: NewAggregate(cfg.Store, managerMachine(), cfg.Source, cfg.Now),
		Nodes:    NewAggregate(cfg.Store, nodeMachine(), cfg.Source, cfg.Now),
	}
}

// managerMachine is the manager aggregate. Its history and state grow with
// the number of nodes and it is read on most orchestrator reactions:
// snapshotted for a cold start, cached in memory for every later load.
func managerMachine() Machine[manager.State, manager.Command] {
	return Machine[manager.State, manager.Command]{
		Name: "manager", Evolve: manager.Evolve, Decide: manager.Decide,
		Snapshot: &eventstore.Snapshotting{Schema: "manager/v1", Every: 32},
		Cache:    NewStateCache[manager.State](managerCacheSize),
	}
}

// managerCacheSize bounds the cached manager states: a controller runs a
// handful of upgrades at a time.
const managerCacheSize = 64

// nodeMachine is the node-upgrade aggregate. Node histories grow with their
// volumes, so they are snapshotted, and cached in memory: the controller
// reads a node's upgrade on every change of one of its volumes (the record
// of a target away), and decoding its snapshot each time cost three times
// the rest of a step (BenchmarkStepOverhead, 100 nodes × 20 volumes: 17 ms
// a step without the cache, against 5 before the record existed).
func nodeMachine() Machine[nodeupgrade.State, nodeupgrade.Command] {
	return Machine[nodeupgrade.State, nodeupgrade.Command]{
		Name: "node upgrade", Evolve: nodeupgrade.Evolve, FoldStopping: nodeupgrade.FoldStopping, Decide: nodeupgrade.Decide,
		Snapshot: &eventstore.Snapshotting{Schema: "nodeupgrade/v1", Every: 64},
		Cache:    NewStateCache[nodeupgrade.State](nodeCacheSize),
	}
}

// nodeCacheSize bounds the cached node-upgrade states: the nodes of the
// upgrades in flight, a few KiB each.
const nodeCacheSize = 256
