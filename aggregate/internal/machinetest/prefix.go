package machinetest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/events"
)

// apply folds payloads onto s as a stored decision would be: wrapped, with
// the ids their append derives.
func (m Machine[S, C]) apply(t *testing.T, s S, evs []events.Event) S {
	t.Helper()
	envelopes := m.Wrap(evs...)
	for i := range envelopes {
		envelopes[i].ID = events.DeriveID(envelopes[i].Aggregate, "prefix", i)
	}
	out, err := m.FoldSkipping(s, envelopes...)
	require.NoError(t, err)
	return out
}

// CompletesPrefix checks that deciding cmd again on any prefix of the
// events it decides on s produces exactly the rest: on a single-replica
// stream a multi-event decision is appended one event at a time, and a
// crash can store a prefix.
func CompletesPrefix[S any, C Command](t *testing.T, m Machine[S, C], s S, cmd C) {
	t.Helper()
	all, err := m.Decide(s, cmd)
	if err != nil || len(all) < 2 {
		return
	}
	for n := 1; n < len(all); n++ {
		rest, err := m.Decide(m.apply(t, s, all[:n]), cmd)
		require.NoError(t, err, "after %d of %d events", n, len(all))
		require.Equal(t, all[n:], rest, "after %d of %d events", n, len(all))
	}
}
