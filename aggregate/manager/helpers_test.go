package manager

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

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
	out := make([]events.Envelope, len(data))
	for i, d := range data {
		out[i] = envAt(agg, t0.Add(time.Duration(i)*time.Second), d)
	}
	return out
}

// fold folds payloads from the zero state and fails the test on any refusal.
func fold(t testing.TB, data ...events.Event) State {
	t.Helper()
	s, err := Fold(State{}, envs(data...)...)
	require.NoError(t, err)
	return s
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

// harness drives the manager through commands the way the command side does:
// decide, stamp with ids derived from the command, evolve, keep the history.
type harness struct {
	t       testing.TB
	s       State
	history []events.Envelope
	now     time.Time
}

func newHarness(t testing.TB) *harness { return &harness{t: t, now: t0} }

// do decides cmd, applies its events and checks the contract every decision
// must keep: the input state is untouched, every event evolves, and deciding
// the same command again yields nothing.
func (h *harness) do(cmd Command) []events.Event {
	h.t.Helper()
	before := cloneState(h.s)
	evs, err := Decide(h.s, cmd)
	require.NoError(h.t, err)
	require.Equal(h.t, before, h.s, "Decide modified its input")
	id := h.s.Aggregate()
	if r, ok := cmd.(RequestUpgrade); ok && !h.s.Exists {
		id = events.ManagerAggregate(r.Ref)
	}
	at := cmd.CommandTime()
	if at.IsZero() {
		at = h.now
	}
	for _, e := range events.New(id, sourceOf(cmd), cmd.CommandID(), at, evs...) {
		_, err := e.ToCloudEvent()
		require.NoError(h.t, err, "decided event does not encode")
		h.s, err = Evolve(h.s, e)
		require.NoError(h.t, err, "decided event refused by Evolve")
		h.history = append(h.history, e)
	}
	again, err := Decide(h.s, cmd)
	require.NoError(h.t, err, "re-deciding %T", cmd)
	require.Empty(h.t, again, "re-deciding %T is not idempotent", cmd)
	h.now = h.now.Add(time.Minute)
	return evs
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

// types lists the event types of evs, for compact expectations.
func types(evs []events.Event) []events.Type {
	out := make([]events.Type, len(evs))
	for i, e := range evs {
		out[i] = e.EventType()
	}
	return out
}

// requireTransitionError checks the shape of a refused event.
func requireTransitionError(t testing.TB, err error, state string, typ events.Type) {
	t.Helper()
	require.Error(t, err)
	require.ErrorIs(t, err, ErrIllegalTransition)
	var te *TransitionError
	require.ErrorAs(t, err, &te)
	require.Equal(t, Machine, te.Machine)
	require.Equal(t, state, te.State)
	require.Equal(t, typ, te.Event)
	require.NotEmpty(t, te.Reason)
	require.Contains(t, err.Error(), fmt.Sprint(te.Aggregate))
}

// requireCommandError checks the shape of a refused command.
func requireCommandError(t testing.TB, err error, kind error) {
	t.Helper()
	require.Error(t, err)
	require.ErrorIs(t, err, ErrIllegalCommand)
	var ce *CommandError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, Machine, ce.Machine)
	require.NotEmpty(t, ce.Command)
	if kind != nil {
		require.True(t, errors.Is(err, kind), "want kind %v, got %v", kind, err)
	}
}
