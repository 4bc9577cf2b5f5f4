// Package machinetest holds property checks shared by the state machines'
// tests.
package machinetest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/events"
)

// Machine is what the checks need of a state machine.
type Machine[S, C any] struct {
	Decide func(S, C) ([]events.Event, error)
	// Apply folds payloads onto a state, as stored events would be.
	Apply func(t *testing.T, s S, evs []events.Event) S
}

// CompletesPrefix checks that deciding cmd again on any prefix of the
// events it decides on s produces exactly the rest: on a single-replica
// stream a multi-event decision is appended one event at a time, and a
// crash can store a prefix.
func CompletesPrefix[S, C any](t *testing.T, m Machine[S, C], s S, cmd C) {
	t.Helper()
	all, err := m.Decide(s, cmd)
	if err != nil || len(all) < 2 {
		return
	}
	for n := 1; n < len(all); n++ {
		rest, err := m.Decide(m.Apply(t, s, all[:n]), cmd)
		require.NoError(t, err, "after %d of %d events", n, len(all))
		require.Equal(t, all[n:], rest, "after %d of %d events", n, len(all))
	}
}
