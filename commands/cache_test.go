package commands_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/commands"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/eventstore"
	"github.com/switchback-dev/switchback/natsembed/natstest"
)

// tally is a minimal aggregate state: how many events, and the last one.
type tally struct {
	N    int
	Last string
}

type bump struct{ id string }

func (b bump) CommandID() string { return b.id }

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func tallyMachine(cache *commands.StateCache[tally]) commands.Machine[tally, bump] {
	return commands.Machine[tally, bump]{
		Name: "tally",
		Evolve: func(s tally, e events.Envelope) (tally, error) {
			return tally{N: s.N + 1, Last: e.ID}, nil
		},
		Decide: func(tally, bump) ([]events.Event, error) {
			return []events.Event{events.NodeResumed{Step: events.NodePending, Message: "bump"}}, nil
		},
		Snapshot: &eventstore.Snapshotting{Schema: "tally/v1", Every: 3},
		Cache:    cache,
	}
}

// TestCachedLoadsFollowTheStream: a machine with a StateCache folds the same
// state as a cold load from the stream, reads only what other writers stored
// since, survives eviction, and keeps refreshing the snapshot a restarted
// process starts from.
func TestCachedLoadsFollowTheStream(t *testing.T) {
	srv := natstest.Start(t)
	_, jsA := natstest.Connect(t, srv)
	_, jsB := natstest.Connect(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, err := eventstore.Open(ctx, jsA, eventstore.Config{})
	require.NoError(t, err)
	other, err := eventstore.Open(ctx, jsB, eventstore.Config{})
	require.NoError(t, err)

	ref := events.ManagerRef{Namespace: "ns", Name: "m", UID: "uid-cache"}
	agg := events.NodeAggregate(ref, "n1")
	var version uint64
	appendOther := func(n int) {
		for range n {
			version, err = other.Append(ctx, agg, version, events.New(agg, events.SourceWorker, fmt.Sprintf("other-%d", version), t0, events.NodeResumed{Step: events.NodePending})...)
			require.NoError(t, err)
		}
	}
	cold := func() tally {
		l, err := eventstore.LoadState(ctx, a, agg, tally{}, tallyMachine(nil).Evolve, nil)
		require.NoError(t, err)
		return l.State
	}

	x := commands.NewAggregate(a, tallyMachine(commands.NewStateCache[tally](2)), events.SourceController, func() time.Time { return t0 })
	appendOther(5)
	first, err := x.Load(ctx, agg)
	require.NoError(t, err)
	assert.Equal(t, cold(), first.State)
	assert.Equal(t, version, first.Version)

	again, err := x.Load(ctx, agg)
	require.NoError(t, err)
	assert.Equal(t, first.State, again.State)
	assert.Zero(t, again.Folded, "nothing new: nothing folded")

	appendOther(2)
	tail, err := x.Load(ctx, agg)
	require.NoError(t, err)
	assert.Equal(t, 2, tail.Folded, "only what the other writer stored since")
	assert.Equal(t, cold(), tail.State)
	assert.Equal(t, version, tail.Version)
	assert.Equal(t, tally{N: 5, Last: first.State.Last}, first.State, "an earlier result is a value")

	res, err := x.Execute(ctx, agg, bump{id: "ours"})
	require.NoError(t, err)
	require.Len(t, res.Appended, 1)
	after, err := x.Load(ctx, agg)
	require.NoError(t, err)
	assert.Zero(t, after.Folded, "Execute left its result in the cache")
	assert.Equal(t, res.State, after.State)
	assert.Equal(t, cold(), after.State)

	// Another writer's event since our Execute is read from the tail before
	// deciding: no conflict, and the fold still matches the stream.
	version = res.Version
	appendOther(1)
	res, err = x.Execute(ctx, agg, bump{id: "after-race"})
	require.NoError(t, err)
	assert.Equal(t, cold(), res.State)

	// Eviction: two more aggregates push agg out; it reloads correctly.
	for _, n := range []string{"n2", "n3"} {
		_, err := x.Load(ctx, events.NodeAggregate(ref, n))
		require.NoError(t, err)
	}
	evicted, err := x.Load(ctx, agg)
	require.NoError(t, err)
	assert.Equal(t, cold(), evicted.State)

	// The snapshot kept up: a fresh process folds only a short tail.
	fresh, err := eventstore.LoadState(ctx, other, agg, tally{}, tallyMachine(nil).Evolve, &eventstore.Snapshotting{Schema: "tally/v1"})
	require.NoError(t, err)
	assert.NotZero(t, fresh.SnapshotSeq)
	assert.Less(t, fresh.Folded, 3)
	assert.Equal(t, cold().N, fresh.State.N)
}
