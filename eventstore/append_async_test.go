package eventstore_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/eventstore"
)

// TestAppendBatch: one batch to distinct aggregates stores every event with
// its aggregate's new version; a stale expectation is a *ConflictError that
// names the winner's version and does not stop the rest; a retried batch
// (same event ids) is recognised as the earlier success; a multi-event
// request and an aggregate listed twice are handled like Append would.
func TestAppendBatch(t *testing.T) {
	s, _ := newStore(t)
	c := ctx(t)

	const n = 8
	aggs := make([]events.AggregateID, n)
	reqs := make([]eventstore.AppendRequest, n)
	for i := range aggs {
		aggs[i] = events.NodeAggregate(mgr, fmt.Sprintf("node-%d", i))
		reqs[i] = eventstore.AppendRequest{Aggregate: aggs[i], Events: []events.Envelope{resumed(aggs[i], "first")}}
	}
	first := s.AppendBatch(c, reqs)
	for i, r := range first {
		require.NoError(t, r.Err, aggs[i])
		assert.Equal(t, r.Version, lastOn(t, s, aggs[i]), "the version is the stored sequence of %s", aggs[i])
	}

	again := s.AppendBatch(c, reqs)
	for i, r := range again {
		require.NoError(t, r.Err, "a retried append of the same event is its earlier success")
		assert.Equal(t, first[i].Version, r.Version)
	}
	h, err := s.Load(c, aggs[0])
	require.NoError(t, err)
	assert.Len(t, h.Events, 1, "nothing stored twice")

	// Another writer moves aggs[1]; our batch still expects the old version.
	moved, err := s.Append(c, aggs[1], first[1].Version, resumed(aggs[1], "other-writer"))
	require.NoError(t, err)
	next := []eventstore.AppendRequest{
		{Aggregate: aggs[0], Expected: first[0].Version, Events: []events.Envelope{resumed(aggs[0], "second")}},
		{Aggregate: aggs[1], Expected: first[1].Version, Events: []events.Envelope{resumed(aggs[1], "second")}},
		{Aggregate: aggs[2], Expected: first[2].Version, Events: []events.Envelope{resumed(aggs[2], "second-a"), resumed(aggs[2], "second-b")}},
		{Aggregate: aggs[0], Expected: first[0].Version, Events: []events.Envelope{resumed(aggs[0], "twice")}},
	}
	res := s.AppendBatch(c, next)
	require.NoError(t, res[0].Err)
	assert.Equal(t, lastOn(t, s, aggs[0]), res[0].Version)

	var conflict *eventstore.ConflictError
	require.ErrorAs(t, res[1].Err, &conflict)
	assert.Equal(t, first[1].Version, conflict.Expected)
	assert.Equal(t, moved, conflict.Actual, "the conflict names the winner's version")

	require.NoError(t, res[2].Err)
	h, err = s.Load(c, aggs[2])
	require.NoError(t, err)
	assert.Len(t, h.Events, 3, "both events of the multi-event request")
	assert.Equal(t, h.Version, res[2].Version)

	require.Error(t, res[3].Err, "an aggregate listed twice in one batch")
	assert.NotErrorAs(t, res[3].Err, &conflict)
}

// TestAppendAsyncRefusesForeignEvents: an event of another aggregate is
// refused before anything is published, as Append refuses it.
func TestAppendAsyncRefusesForeignEvents(t *testing.T) {
	s, _ := newStore(t)
	a, b := events.NodeAggregate(mgr, "a"), events.NodeAggregate(mgr, "b")
	_, err := s.AppendAsync(a, 0, resumed(b, "x")).Wait(ctx(t))
	require.Error(t, err)
	assert.Zero(t, lastOn(t, s, a))
}
