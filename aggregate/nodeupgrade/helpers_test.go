package nodeupgrade

import (
	"maps"
	"slices"
	"time"

	"github.com/switchback-dev/switchback/aggregate/internal/machinetest"
	"github.com/switchback-dev/switchback/events"
)

const (
	node  = "node-1"
	image = "longhornio/longhorn-instance-manager:v1.12.0"
)

var (
	t0       = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	ref      = events.ManagerRef{Namespace: "longhorn-system", Name: "upgrade-v2", UID: "0c5a6c1e-uid-1"}
	otherRef = events.ManagerRef{Namespace: "longhorn-system", Name: "upgrade-v2", UID: "9d2f00aa-uid-2"}
	agg      = events.NodeAggregate(ref, node)
	source   = events.SourceWorker + "/" + node
)

func env(data events.Event) events.Envelope { return envAt(agg, t0, data) }

func envAt(id events.AggregateID, at time.Time, data events.Event) events.Envelope {
	return events.New(id, source, "cmd-test", at, data)[0]
}

// envs wraps payloads in envelopes one second apart.
func envs(data ...events.Event) []events.Envelope {
	return machinetest.Envelopes(agg, source, t0, data...)
}

// fold folds payloads from the zero state and fails the test on any refusal.
var fold = machine.FoldPayloads

// machine is the node upgrade as the shared checks drive it: a worker sends
// every command, on its own node's aggregate.
var machine = machinetest.Machine[State, Command]{
	Name: Machine, Decide: Decide, Evolve: Evolve, FoldSkipping: FoldSkipping, Wrap: envs, Clone: cloneState,
	StateName: State.stateName, Start: t0, Address: func(State, Command) (events.AggregateID, string) { return agg, source },
	Stamp: func(s State) (time.Time, int) { return s.UpdatedAt, s.Transitions },
}

// Canonical payloads.
var evStarted = events.NodeUpgradeStarted{Node: node, DataEngine: "v2", InstanceManagerImage: image, Attempt: 1}

func evChanged(from events.NodeState) events.NodeStateChanged {
	to, _ := from.Next()
	return events.NodeStateChanged{From: from, To: to}
}

func evVolume(vol string, from, to events.VolumeState, target string) events.VolumeStateChanged {
	return events.VolumeStateChanged{Volume: vol, From: from, To: to, TargetNode: target}
}

// timeline is a complete node upgrade: vol-a is attached with its target on
// the node (switched over to node-2 and back), vol-b is detached.
var timeline = []events.Event{
	evStarted,
	evChanged(events.NodePending),
	evVolume("vol-a", "", events.VolumePending, node),
	evVolume("vol-b", "", events.VolumePending, ""),
	evChanged(events.NodeInitializing),
	evChanged(events.NodeFailingReplicas),
	evVolume("vol-a", events.VolumePending, events.VolumeSwitchingOver, ""),
	evVolume("vol-a", events.VolumeSwitchingOver, events.VolumeSwitchedOver, "node-2"),
	evChanged(events.NodeSwitchingOver),
	evChanged(events.NodeUpgradingInstanceManager),
	evVolume("vol-a", events.VolumeSwitchedOver, events.VolumeSwitchingBack, ""),
	evVolume("vol-a", events.VolumeSwitchingBack, events.VolumeSwitchedBack, node),
	evChanged(events.NodeSwitchingBack),
	evVolume("vol-a", events.VolumeSwitchedBack, events.VolumeCompleted, ""),
	evChanged(events.NodeRebuildingReplica),
	evVolume("vol-b", events.VolumePending, events.VolumeCompleted, ""),
	events.NodeUpgradeCompleted{},
}

// upTo returns the timeline prefix that ends just before the node leaves
// step: at that step, with its volume work done.
func upTo(step events.NodeState) []events.Event {
	for i, d := range timeline {
		if c, ok := d.(events.NodeStateChanged); ok && c.From == step {
			return append([]events.Event(nil), timeline[:i]...)
		}
	}
	return append([]events.Event(nil), timeline[:len(timeline)-1]...) // finalizing
}

// cloneState deep-copies s, to prove that Decide and Evolve leave their input alone.
func cloneState(s State) State {
	s.Volumes = maps.Clone(s.Volumes)
	s.Moved = slices.Clone(s.Moved)
	return s
}

// harness drives the node upgrade through commands as a worker does.
type harness = machinetest.Harness[State, Command]
