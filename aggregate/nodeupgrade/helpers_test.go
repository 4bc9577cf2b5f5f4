package nodeupgrade

import (
	"errors"
	"maps"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

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
	return s
}

// harness drives the node upgrade through commands as a worker does.
type harness struct {
	t       testing.TB
	s       State
	history []events.Envelope
	now     time.Time
}

func newHarness(t testing.TB) *harness { return &harness{t: t, now: t0} }

// do decides cmd, applies its events and checks the contract of every
// decision: input untouched, every event evolves and encodes, and deciding
// the same command again yields nothing.
func (h *harness) do(cmd Command) []events.Event {
	h.t.Helper()
	before := cloneState(h.s)
	evs, err := Decide(h.s, cmd)
	require.NoError(h.t, err)
	require.Equal(h.t, before, h.s, "Decide modified its input")
	at := cmd.CommandTime()
	if at.IsZero() {
		at = h.now
	}
	for _, e := range events.New(agg, source, cmd.CommandID(), at, evs...) {
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

func types(evs []events.Event) []events.Type {
	if len(evs) == 0 {
		return nil
	}
	out := make([]events.Type, len(evs))
	for i, e := range evs {
		out[i] = e.EventType()
	}
	return out
}

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
}

func requireCommandError(t testing.TB, err error, kind error) {
	t.Helper()
	require.Error(t, err)
	require.ErrorIs(t, err, ErrIllegalCommand)
	var ce *CommandError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, Machine, ce.Machine)
	if kind != nil {
		require.True(t, errors.Is(err, kind), "want kind %v, got %v", kind, err)
	}
}
