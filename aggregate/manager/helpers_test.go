package manager

import (
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/switchback-dev/switchback/aggregate/internal/machinetest"
	"github.com/switchback-dev/switchback/events"
)

var (
	t0       = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	ref      = events.ManagerRef{Namespace: "longhorn-system", Name: "upgrade-v2", UID: "0c5a6c1e-uid-1"}
	otherRef = events.ManagerRef{Namespace: "longhorn-system", Name: "upgrade-v2", UID: "9d2f00aa-uid-2"}
	agg      = events.ManagerAggregate(ref)
	plan3    = []string{"node-1", "node-2", "node-3"}
)

const image = "longhornio/longhorn-instance-manager:v1.12.0"

// env wraps one payload in an envelope on the test manager.
func env(data events.Event) events.Envelope {
	return envAt(agg, t0, data)
}

func envAt(id events.AggregateID, at time.Time, data events.Event) events.Envelope {
	return events.New(id, events.SourceController, "cmd-test", at, data)[0]
}

// envs wraps payloads in envelopes one second apart.
func envs(data ...events.Event) []events.Envelope {
	return machinetest.Envelopes(agg, events.SourceController, t0, data...)
}

// fold folds payloads from the zero state and fails the test on any refusal.
var fold = machine.FoldPayloads

// machine is the manager as the shared checks drive it.
var machine = machinetest.Machine[State, Command]{
	Name: Machine, Decide: Decide, Evolve: Evolve, FoldSkipping: FoldSkipping, Wrap: envs, Clone: cloneState,
	StateName: State.stateName, Address: address, Start: t0,
	Stamp: func(s State) (time.Time, int) { return s.UpdatedAt, s.Transitions },
}

// Canonical payloads.
var (
	evRequested = events.UpgradeRequested{Namespace: ref.Namespace, Name: ref.Name, UID: ref.UID, Generation: 1, DataEngine: "v2"}
	evPassed    = func(check string) events.PrecheckPassed {
		return events.PrecheckPassed{Check: check, Reason: "Satisfied", Message: check + " holds"}
	}
	evFailed = func(check string) events.PrecheckFailed {
		return events.PrecheckFailed{Check: check, Reason: "NotSatisfied", Message: check + " does not hold"}
	}
	evPlanned   = events.UpgradePlanned{InstanceManagerImage: image, Nodes: plan3}
	evScheduled = func(node string) events.NodeScheduled { return events.NodeScheduled{Node: node, Attempt: 1} }
	evFinished  = func(node string, st events.NodeState) events.NodeFinished {
		return events.NodeFinished{Node: node, State: st}
	}
)

// cloneState deep-copies s, to prove that Decide and Evolve leave their input alone.
func cloneState(s State) State {
	s.RequestedNodes = slices.Clone(s.RequestedNodes)
	s.Prechecks = slices.Clone(s.Prechecks)
	s.Plan = slices.Clone(s.Plan)
	s.Nodes = maps.Clone(s.Nodes)
	return s
}

// harness drives the manager through commands the way the command side does.
type harness = machinetest.Harness[State, Command]

func newHarness(t testing.TB) *harness { return machinetest.NewHarness(t, machine, State{}) }

// address is where cmd's events go on s: the manager's own aggregate, or,
// before it exists, the one the opening command names.
func address(s State, cmd Command) (events.AggregateID, string) {
	id := s.Aggregate()
	if r, ok := cmd.(RequestUpgrade); ok && !s.Exists {
		id = events.ManagerAggregate(r.Ref)
	}
	return id, sourceOf(cmd)
}

// sourceOf is the component that issues cmd: the intake turns the manager's
// creation and deletion into commands, the controller does the rest.
func sourceOf(cmd Command) string {
	switch cmd.(type) {
	case RequestUpgrade, RequestCancel:
		return events.SourceIntake
	}
	return events.SourceController
}
