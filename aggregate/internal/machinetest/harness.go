package machinetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/aggregate"
	"github.com/switchback-dev/switchback/events"
)

// Harness drives a machine through commands the way the command side does:
// decide, stamp with ids derived from the command, evolve, keep the history.
type Harness[S any, C Command] struct {
	T testing.TB
	M Machine[S, C]
	// S is the state the commands so far led to; History their events.
	S       S
	History []events.Envelope
	// Now stamps a command that carries no time; it moves on a minute per
	// command.
	Now time.Time
	// Invariants, when set, is checked on every state a decision leads to.
	Invariants func(testing.TB, S)
}

// NewHarness starts a harness on s at m.Start.
func NewHarness[S any, C Command](t testing.TB, m Machine[S, C], s S) *Harness[S, C] {
	return &Harness[S, C]{T: t, M: m, S: s, Now: m.Start}
}

// Do decides cmd, applies its events and checks the contract every decision
// must keep: the input state is untouched, every event encodes and evolves,
// and deciding the same command again yields nothing.
func (h *Harness[S, C]) Do(cmd C) []events.Event {
	h.T.Helper()
	evs, err := h.Try(cmd)
	require.NoError(h.T, err)
	return evs
}

// Try is Do for a command that may be refused: a refusal must be a
// *CommandError and decide nothing, and it leaves the harness as it was.
func (h *Harness[S, C]) Try(cmd C) ([]events.Event, error) {
	h.T.Helper()
	before := h.M.Clone(h.S)
	evs, err := h.M.Decide(h.S, cmd)
	require.Equal(h.T, before, h.S, "Decide modified its input")
	if err != nil {
		require.Nil(h.T, evs)
		RequireCommandError(h.T, err, h.M.Name, nil)
		return nil, err
	}
	id, source := h.M.Address(h.S, cmd)
	at := cmd.CommandTime()
	if at.IsZero() {
		at = h.Now
	}
	for _, e := range events.New(id, source, cmd.CommandID(), at, evs...) {
		_, err := e.ToCloudEvent()
		require.NoError(h.T, err, "%T decided an event that does not encode", cmd)
		h.S, err = h.M.Evolve(h.S, e)
		require.NoError(h.T, err, "%T decided an event Evolve refuses", cmd)
		h.History = append(h.History, e)
	}
	if h.Invariants != nil {
		h.Invariants(h.T, h.S)
	}
	again, err := h.M.Decide(h.S, cmd)
	require.NoError(h.T, err, "re-deciding %T", cmd)
	require.Empty(h.T, again, "re-deciding %T is not idempotent", cmd)
	h.Now = h.Now.Add(time.Minute)
	return evs, nil
}

// RequireTransitionError checks the shape of an event machine refused in
// state: the kind, the machine, the state, the event type, a reason, and the
// aggregate named in the message.
func RequireTransitionError(t testing.TB, err error, machine, state string, typ events.Type) {
	t.Helper()
	te := requireAs[*aggregate.TransitionError](t, err, aggregate.ErrIllegalTransition)
	require.Equal(t, machine, te.Machine)
	require.Equal(t, state, te.State)
	require.Equal(t, typ, te.Event)
	require.NotEmpty(t, te.Reason)
	require.Contains(t, err.Error(), fmt.Sprint(te.Aggregate))
}

// RequireCommandError checks the shape of a command machine refused: the
// kind, the machine, the command named, and the finer kind when given.
func RequireCommandError(t testing.TB, err error, machine string, kind error) {
	t.Helper()
	ce := requireAs[*aggregate.CommandError](t, err, aggregate.ErrIllegalCommand)
	require.Equal(t, machine, ce.Machine)
	require.NotEmpty(t, ce.Command)
	if kind != nil {
		require.True(t, errors.Is(err, kind), "want kind %v, got %v", kind, err)
	}
}

// requireAs checks that err is an E matching kind and returns it.
func requireAs[E error](t testing.TB, err, kind error) E {
	t.Helper()
	require.Error(t, err)
	require.ErrorIs(t, err, kind)
	var e E
	require.ErrorAs(t, err, &e)
	return e
}

// RequireJSONRoundTrip checks that s survives JSON encoding unchanged, which
// state snapshots rely on.
func RequireJSONRoundTrip[S any](t testing.TB, s S) {
	t.Helper()
	b, err := json.Marshal(s)
	require.NoError(t, err)
	var back S
	require.NoError(t, json.Unmarshal(b, &back))
	require.Equal(t, s, back)
}
