package eventstore_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/events/eventstest"
	"github.com/switchback-dev/switchback/eventstore"
	"github.com/switchback-dev/switchback/natsembed/natstest"
	"github.com/switchback-dev/switchback/topology"
)

func TestEveryTypeRoundTripsThroughTheStore(t *testing.T) {
	s, _ := newStore(t)
	c := ctx(t)
	samples := eventstest.Samples(mgr, "node.with.dots", t0)
	versions := map[events.AggregateID]uint64{}
	for i, e := range samples {
		v, err := s.Append(c, e.Aggregate, versions[e.Aggregate], e)
		require.NoError(t, err, e.Type())
		versions[e.Aggregate] = v
		samples[i].Sequence = v
	}
	var got []events.Envelope
	require.NoError(t, s.Scan(c, eventstore.ScanOptions{}, func(e events.Envelope) error {
		got = append(got, e)
		return nil
	}, nil))
	assert.Equal(t, samples, got)
}

func TestScanRangesAndFilters(t *testing.T) {
	srv := natstest.Start(t)
	nc, js := natstest.Connect(t, srv)
	s := openStore(t, js, eventstore.Config{})
	c := ctx(t)
	other := events.ManagerRef{Namespace: "ns", Name: "other", UID: "uid-2"}
	var v1, v2 uint64
	var err error
	for i := range 10 {
		a := events.NodeAggregate(mgr, "n1")
		v1, err = s.Append(c, a, v1, resumed(a, fmt.Sprintf("m%d", i)))
		require.NoError(t, err)
		b := events.NodeAggregate(other, "n1")
		v2, err = s.Append(c, b, v2, resumed(b, fmt.Sprintf("o%d", i)))
		require.NoError(t, err)
	}
	// One poison message in the middle of the stream.
	require.NoError(t, nc.Publish(events.NodeAggregate(mgr, "n1").Subject(), []byte("garbage")))
	require.NoError(t, nc.Flush())
	require.Eventually(t, func() bool { l, _ := s.LastSequence(c); return l == 21 }, 10e9, 10e6)

	collect := func(o eventstore.ScanOptions) (msgs []string, parked int) {
		require.NoError(t, s.Scan(c, o, func(e events.Envelope) error {
			msgs = append(msgs, e.Data.(events.NodeResumed).Message)
			return nil
		}, func(*events.DecodeError) { parked++ }))
		return msgs, parked
	}
	cases := []struct {
		name       string
		opts       eventstore.ScanOptions
		wantFirst  string
		wantCount  int
		wantParked int
	}{
		{"everything", eventstore.ScanOptions{}, "m0", 20, 1},
		{"from the middle", eventstore.ScanOptions{FromSeq: 11}, "m5", 10, 1},
		{"until a sequence", eventstore.ScanOptions{UntilSeq: 4}, "m0", 4, 0},
		{"one manager", eventstore.ScanOptions{Subjects: []string{events.ManagerSubjectPrefix(other) + ".>"}}, "o0", 10, 0},
		{"one manager, bounded", eventstore.ScanOptions{Subjects: []string{events.ManagerSubjectPrefix(other) + ".>"}, UntilSeq: 6}, "o0", 3, 0},
		{"past the end", eventstore.ScanOptions{FromSeq: 100}, "", 0, 0},
		{"filter matches nothing", eventstore.ScanOptions{Subjects: []string{"sb.evt.none.>"}}, "", 0, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, parked := collect(tc.opts)
			assert.Len(t, got, tc.wantCount)
			assert.Equal(t, tc.wantParked, parked)
			if tc.wantCount > 0 {
				assert.Equal(t, tc.wantFirst, got[0])
			}
		})
	}
}

// counter is a toy aggregate state for snapshot tests.
type counter struct {
	N    int    `json:"n"`
	Last string `json:"last"`
}

func foldCounter(s counter, e events.Envelope) (counter, error) {
	r, ok := e.Data.(events.NodeResumed)
	if !ok {
		return s, fmt.Errorf("unexpected %s", e.Type())
	}
	return counter{N: s.N + 1, Last: r.Message}, nil
}

func TestLoadStateWithSnapshots(t *testing.T) {
	s, _ := newStore(t)
	c := ctx(t)
	agg := events.NodeAggregate(mgr, "n1")
	v := appendNumbered(t, c, s, agg, 0, 0, 30)
	snap := &eventstore.Snapshotting{Schema: "counter/v1", Every: 10}

	full, err := eventstore.LoadState(c, s, agg, counter{}, foldCounter, nil)
	require.NoError(t, err)
	assert.Equal(t, counter{N: 30, Last: "e29"}, full.State)
	assert.Equal(t, 30, full.Folded)

	first, err := eventstore.LoadState(c, s, agg, counter{}, foldCounter, snap)
	require.NoError(t, err)
	assert.Equal(t, full.State, first.State)
	assert.Zero(t, first.SnapshotSeq, "no snapshot yet; this load writes one")

	v = appendNumbered(t, c, s, agg, v, 30, 35)
	second, err := eventstore.LoadState(c, s, agg, counter{}, foldCounter, snap)
	require.NoError(t, err)
	assert.Equal(t, counter{N: 35, Last: "e34"}, second.State)
	assert.Equal(t, 5, second.Folded, "only the tail after the snapshot is read")
	assert.Equal(t, first.Version, second.SnapshotSeq)
	assert.Equal(t, v, second.Version)

	// A snapshot written for another schema is ignored, not misread.
	other, err := eventstore.LoadState(c, s, agg, counter{}, foldCounter, &eventstore.Snapshotting{Schema: "counter/v2"})
	require.NoError(t, err)
	assert.Equal(t, 35, other.Folded)
	assert.Equal(t, second.State, other.State)

	// Events the fold rejects are reported, not fatal.
	_, err = s.Append(c, agg, v, events.New(agg, "x", "bad", t0, events.NodeUpgradeCompleted{})...)
	require.NoError(t, err)
	withProblem, err := eventstore.LoadState(c, s, agg, counter{}, foldCounter, nil)
	require.NoError(t, err)
	assert.Len(t, withProblem.Problems, 1)
	assert.Equal(t, 35, withProblem.State.N)
}

// TestSnapshotKeysAndOwnership: keys name the node (so NATS permissions can
// tell a node's from a manager's), a node worker's store refreshes no
// snapshot but reads them, and a value of the old layout is ignored.
func TestSnapshotKeysAndOwnership(t *testing.T) {
	ctl, js := newStore(t)
	worker := openStore(t, js, eventstore.Config{ReadOnlySnapshots: true})
	c := ctx(t)
	own := events.NodeAggregate(mgr, "node-1.example.com")
	other := events.NodeAggregate(mgr, "node-10")
	man := events.ManagerAggregate(mgr)

	for _, tc := range []struct {
		agg    events.AggregateID
		prefix string
	}{
		{own, "node.node-1_example_com."},
		{other, "node.node-10."},
		{events.NodeAggregate(mgr, "Odd_Node"), "node.=4Fdd=5F=4Eode."},
		{man, "mgr."},
	} {
		key := eventstore.SnapshotKey(tc.agg)
		assert.True(t, strings.HasPrefix(key, tc.prefix), "%s: key %s", tc.agg, key)
		assert.Regexp(t, `^[-/_=.a-zA-Z0-9]+$`, key, "a valid KV key")
		assert.Len(t, key, len(tc.prefix)+32)
	}
	assert.Equal(t, "node.node-1_example_com.", eventstore.NodeSnapshotKeyPrefix("node-1.example.com"))

	snap := &eventstore.Snapshotting{Schema: "counter/v1", Every: 1}
	var v uint64
	var err error
	for _, agg := range []events.AggregateID{own, other} {
		v, err = ctl.Append(c, agg, 0, resumed(agg, "e0"))
		require.NoError(t, err)
		_, err = worker.Append(c, agg, v, resumed(agg, "e1"))
		require.NoError(t, err)
	}
	kv, err := js.KeyValue(c, topology.SnapshotBucket)
	require.NoError(t, err)
	// The worker's loads refresh no snapshot, not even its own node's.
	for _, agg := range []events.AggregateID{own, other} {
		l, err := eventstore.LoadState(c, worker, agg, counter{}, foldCounter, snap)
		require.NoError(t, err)
		assert.Empty(t, l.Problems)
		_, err = kv.Get(c, eventstore.SnapshotKey(agg))
		require.ErrorIs(t, err, jetstream.ErrKeyNotFound, "the worker wrote no snapshot of %s", agg)
	}
	require.NoError(t, worker.SaveSnapshot(c, man, "counter/v1", 1, counter{N: 99}), "a no-op, not an error")
	_, err = kv.Get(c, eventstore.SnapshotKey(man))
	require.ErrorIs(t, err, jetstream.ErrKeyNotFound)

	// The controller refreshes any; the worker reads it.
	for _, agg := range []events.AggregateID{own, other} {
		_, err = eventstore.LoadState(c, ctl, agg, counter{}, foldCounter, snap)
		require.NoError(t, err)
	}
	l, err := eventstore.LoadState(c, worker, other, counter{}, foldCounter, snap)
	require.NoError(t, err)
	assert.NotZero(t, l.SnapshotSeq, "the worker reads node-10's snapshot")
	assert.Equal(t, counter{N: 2, Last: "e1"}, l.State)

	// A value without the current format (an older layout) is ignored.
	_, err = kv.Put(c, eventstore.SnapshotKey(own), []byte(`{"schema":"counter/v1","seq":1099511627776,"state":{"n":99}}`))
	require.NoError(t, err)
	l, err = eventstore.LoadState(c, ctl, own, counter{}, foldCounter, &eventstore.Snapshotting{Schema: "counter/v1"})
	require.NoError(t, err)
	assert.Zero(t, l.SnapshotSeq)
	assert.Equal(t, counter{N: 2, Last: "e1"}, l.State)
}
