package eventstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/eventstore"
	"github.com/switchback-dev/switchback/natsembed/natstest"
	"github.com/switchback-dev/switchback/topology"
)

var (
	mgr = events.ManagerRef{Namespace: "longhorn-system", Name: "up.1", UID: "uid-1"}
	t0  = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
)

func openStore(t *testing.T, js jetstream.JetStream, cfg eventstore.Config) *eventstore.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := eventstore.Open(ctx, js, cfg)
	require.NoError(t, err)
	return s
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func resumed(agg events.AggregateID, cmd string) events.Envelope {
	return events.New(agg, events.SourceController, cmd, t0, events.NodeResumed{Step: events.NodePending, Message: cmd})[0]
}

func TestAppendConcurrencyOneWinner(t *testing.T) {
	s, _ := newStore(t)
	raceOneWinner(t, s)
	// Multi-event decisions go through an atomic batch on replicated streams.
	appendSeveral(t, s)
}

// raceOneWinner: 20 goroutines append to one aggregate expecting the same
// version; exactly one wins and every loser learns the winner's version.
func raceOneWinner(t *testing.T, s *eventstore.Store) {
	c := ctx(t)
	agg := events.NodeAggregate(mgr, "node-1.example.com")
	other := events.NodeAggregate(mgr, "node-2")
	v0, err := s.Append(c, agg, 0, resumed(agg, "seed"))
	require.NoError(t, err)
	otherV, err := s.Append(c, other, 0, resumed(other, "other-seed"))
	require.NoError(t, err)

	const n = 20
	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		wins      []uint64
		conflicts []*eventstore.ConflictError
		others    []error
	)
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			v, err := s.Append(c, agg, v0, resumed(agg, fmt.Sprintf("racer-%d", i)))
			mu.Lock()
			defer mu.Unlock()
			var ce *eventstore.ConflictError
			switch {
			case err == nil:
				wins = append(wins, v)
			case errors.As(err, &ce):
				conflicts = append(conflicts, ce)
			default:
				others = append(others, err)
			}
		})
	}
	close(start)
	wg.Wait()
	require.Empty(t, others)
	require.Len(t, wins, 1, "exactly one append wins")
	require.Len(t, conflicts, n-1)
	for _, ce := range conflicts {
		assert.ErrorIs(t, ce, eventstore.ErrConflict)
		assert.Equal(t, wins[0], ce.Actual, "a loser learns the actual version")
		assert.Equal(t, v0, ce.Expected)
	}
	h, err := s.Load(c, agg)
	require.NoError(t, err)
	assert.Len(t, h.Events, 2)
	assert.Equal(t, wins[0], h.Version)

	// The other aggregate was not affected and still accepts its own version.
	_, err = s.Append(c, other, otherV, resumed(other, "other-next"))
	require.NoError(t, err)
}

func TestAppendIsIdempotent(t *testing.T) {
	s, _ := newStore(t)
	c := ctx(t)
	agg := events.ManagerAggregate(mgr)
	ev := events.New(agg, events.SourceIntake, "create/uid-1", t0, events.UpgradeRequested{Namespace: mgr.Namespace, Name: mgr.Name, UID: mgr.UID, Generation: 1, DataEngine: "v2"})[0]

	v1, err := s.Append(c, agg, 0, ev)
	require.NoError(t, err)
	// The same append retried (e.g. the ack was lost): success, same version.
	v2, err := s.Append(c, agg, 0, ev)
	require.NoError(t, err)
	assert.Equal(t, v1, v2)
	// The same event id at the right version: deduplicated by Nats-Msg-Id.
	v3, err := s.Append(c, agg, v1, ev)
	require.NoError(t, err)
	assert.Equal(t, v1, v3)

	last, err := s.LastSequence(c)
	require.NoError(t, err)
	assert.Equal(t, uint64(1), last, "one stored message")

	// A different event at a stale version is a real conflict.
	other := events.New(agg, events.SourceIntake, "other", t0, events.CancelRequested{})[0]
	_, err = s.Append(c, agg, 0, other)
	assert.ErrorIs(t, err, eventstore.ErrConflict)
}

func TestAppendSeveralEvents(t *testing.T) {
	srv := natstest.Start(t)
	_, js := natstest.Connect(t, srv)
	appendSeveral(t, openStore(t, js, eventstore.Config{}))
}

// appendSeveral: a multi-event decision is stored whole, a stale one not at
// all, and its retry is recognised.
func appendSeveral(t *testing.T, s *eventstore.Store) {
	c := ctx(t)
	agg := events.ManagerAggregate(mgr)
	batch := events.New(agg, events.SourceController, "prechecks", t0,
		events.PrecheckPassed{Check: "NodesKnown", Reason: "Known"},
		events.PrecheckPassed{Check: "AtLeastTwoNodes", Reason: "Enough"},
		events.UpgradePlanned{InstanceManagerImage: "im:2", Nodes: []string{"a", "b"}},
	)
	base, err := s.LastSequence(c)
	require.NoError(t, err)
	v, err := s.Append(c, agg, 0, batch...)
	require.NoError(t, err)
	assert.Equal(t, base+3, v)

	// A stale batch stores nothing at all.
	stale := events.New(agg, events.SourceController, "stale", t0, events.CancelRequested{}, events.UpgradeCancelled{})
	_, err = s.Append(c, agg, 0, stale...)
	var ce *eventstore.ConflictError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, v, ce.Actual)

	// Retrying the successful batch is recognised as success.
	v2, err := s.Append(c, agg, 0, batch...)
	require.NoError(t, err)
	assert.Equal(t, v, v2)

	h, err := s.Load(c, agg)
	require.NoError(t, err)
	require.Len(t, h.Events, 3)
	for i, e := range h.Events {
		assert.Equal(t, batch[i].ID, e.ID)
		assert.Equal(t, base+uint64(i+1), e.Sequence)
	}
}

func TestAppendRejectsForeignEvents(t *testing.T) {
	s, _ := newStore(t)
	a := events.NodeAggregate(mgr, "a")
	_, err := s.Append(ctx(t), events.NodeAggregate(mgr, "b"), 0, resumed(a, "x"))
	assert.ErrorContains(t, err, "belongs to")
}

func TestLoadInOrderAcrossBatchesAndRestart(t *testing.T) {
	dir := t.TempDir()
	srv := natstest.StartAt(t, dir)
	nc, js := natstest.Connect(t, srv)
	s := openStore(t, js, eventstore.Config{LoadBatch: 7})
	c := ctx(t)
	agg := events.NodeAggregate(mgr, "n1")
	noise := events.NodeAggregate(mgr, "n2")
	var v, nv uint64
	var err error
	for i := range 50 {
		v, err = s.Append(c, agg, v, resumed(agg, fmt.Sprintf("c%d", i)))
		require.NoError(t, err)
		nv, err = s.Append(c, noise, nv, resumed(noise, fmt.Sprintf("n%d", i)))
		require.NoError(t, err)
	}
	check := func(s *eventstore.Store) {
		h, err := s.Load(c, agg)
		require.NoError(t, err)
		require.Len(t, h.Events, 50)
		assert.Equal(t, v, h.Version)
		for i, e := range h.Events {
			assert.Equal(t, fmt.Sprintf("c%d", i), e.Data.(events.NodeResumed).Message)
			assert.Equal(t, agg, e.Aggregate)
		}
		tail, err := s.LoadAfter(c, agg, h.Events[39].Sequence)
		require.NoError(t, err)
		assert.Len(t, tail.Events, 10)
		assert.Equal(t, v, tail.Version)
	}
	check(s)

	// Restart on the same store dir: every event is still there.
	nc.Close()
	srv.Shutdown()
	srv2 := natstest.StartAt(t, dir)
	_, js2 := natstest.Connect(t, srv2)
	check(openStore(t, js2, eventstore.Config{LoadBatch: 7}))
}

func TestLoadParksUndecodableMessages(t *testing.T) {
	srv := natstest.Start(t)
	nc, js := natstest.Connect(t, srv)
	s := openStore(t, js, eventstore.Config{})
	c := ctx(t)
	agg := events.NodeAggregate(mgr, "n1")
	v, err := s.Append(c, agg, 0, resumed(agg, "good-1"))
	require.NoError(t, err)

	bad, err := events.Encode(resumed(agg, "to-be-mangled"))
	require.NoError(t, err)
	bad.Header.Set("ce-type", "io.switchback.node.teleported.v1")
	bad.Header.Del(events.MsgIDHeader)
	raw := nats.NewMsg(agg.Subject())
	raw.Data = []byte("hello")
	// In this order: the assertions below read Parked in stream order.
	for _, m := range []*nats.Msg{bad, raw} {
		_, err := js.PublishMsg(c, m)
		require.NoError(t, err, m.Subject)
	}
	require.NoError(t, nc.Flush())
	last, err := s.LastSequence(c)
	require.NoError(t, err)

	h, err := s.Load(c, agg)
	require.NoError(t, err)
	assert.Len(t, h.Events, 1)
	assert.Len(t, h.Parked, 2)
	assert.Equal(t, last, h.Version, "the version counts parked messages, so appends keep working")
	assert.ErrorIs(t, h.Parked[0], events.ErrUnknownType)
	assert.ErrorIs(t, h.Parked[1], events.ErrBadHeader)

	_, err = s.Append(c, agg, v, resumed(agg, "stale"))
	assert.ErrorIs(t, err, eventstore.ErrConflict)
	_, err = s.Append(c, agg, h.Version, resumed(agg, "good-2"))
	assert.NoError(t, err)
}

func TestStreamConfig(t *testing.T) {
	s, js := newStore(t)
	st, err := js.Stream(ctx(t), s.Stream())
	require.NoError(t, err)
	cfg := st.CachedInfo().Config
	assert.Equal(t, []string{"sb.evt.>"}, cfg.Subjects)
	assert.True(t, cfg.DenyDelete)
	assert.True(t, cfg.DenyPurge)
	assert.True(t, cfg.AllowDirect)
	assert.Equal(t, jetstream.FileStorage, cfg.Storage)
	assert.Equal(t, jetstream.LimitsPolicy, cfg.Retention)
	assert.Equal(t, 2*time.Minute, cfg.Duplicates)
	assert.Error(t, st.Purge(ctx(t)), "history cannot be purged")
	// Opening again (another process starting) converges without error.
	openStore(t, js, eventstore.Config{})
}

func TestAppendConcurrencyOnR3Cluster(t *testing.T) {
	s, _ := newR3Store(t)
	raceOneWinner(t, s)
	// Multi-event decisions go through an atomic batch on replicated streams.
	appendSeveral(t, s)
}

// TestLoadTrustsOnlyTheServersHeaders stores messages carrying copies of the
// headers a direct get adds (as `nats stream get` then `nats pub` would):
// faked sequences, subjects, pending counts, timestamps and an end-of-batch
// status. Load and Scan park each of them, the version is the subject's true
// last sequence (small batches, so a faked pending count would end the load
// early), and appends keep working.
func TestLoadTrustsOnlyTheServersHeaders(t *testing.T) {
	srv := natstest.Start(t)
	nc, js := natstest.Connect(t, srv)
	s := openStore(t, js, eventstore.Config{LoadBatch: 2})
	c := ctx(t)
	agg := events.NodeAggregate(mgr, "n1")
	other := events.NodeAggregate(mgr, "n2")
	_, err := s.Append(c, agg, 0, resumed(agg, "good-1"))
	require.NoError(t, err)
	_, err = s.Append(c, other, 0, resumed(other, "other-1"))
	require.NoError(t, err)

	forged := []struct {
		name    string
		headers map[string]string
	}{
		{"sequence far ahead", map[string]string{"Nats-Sequence": "1099511627776"}},
		{"sequence behind", map[string]string{"Nats-Sequence": "1", "Nats-Stream": topology.EventStream}},
		{"another subject", map[string]string{"Nats-Subject": other.Subject()}},
		{"nothing pending", map[string]string{"Nats-Num-Pending": "0", "Nats-Last-Sequence": "1"}},
		{"bad timestamp, lower case", map[string]string{"nats-time-stamp": "yesterday"}},
	}
	for i, f := range forged {
		m, err := events.Encode(resumed(agg, "copy-"+f.name))
		require.NoError(t, err)
		for k, val := range f.headers {
			m.Header[k] = []string{val}
		}
		m.Header.Set(events.MsgIDHeader, fmt.Sprintf("forged-%d", i))
		_, err = js.PublishMsg(c, m)
		require.NoError(t, err, f.name)
		// A good event after each forgery: the load must go on past it.
		_, err = s.Append(c, agg, lastOn(t, s, agg), resumed(agg, fmt.Sprintf("good-%d", i+2)))
		require.NoError(t, err, "append after %q", f.name)
	}
	// The source header the server refuses from clients (10227); a copy
	// gets it from a stream source whose subject transform lands on the
	// aggregate's subject.
	_, err = js.CreateStream(c, jetstream.StreamConfig{Name: "ELSEWHERE", Subjects: []string{"elsewhere.>"}})
	require.NoError(t, err)
	src, err := events.Encode(resumed(agg, "copy-sourced"))
	require.NoError(t, err)
	src.Subject = "elsewhere.copy"
	_, err = js.PublishMsg(c, src)
	require.NoError(t, err)
	es, err := js.Stream(c, topology.EventStream)
	require.NoError(t, err)
	cfg := es.CachedInfo().Config
	cfg.Sources = []*jetstream.StreamSource{{Name: "ELSEWHERE", SubjectTransforms: []jetstream.SubjectTransformConfig{{Source: "elsewhere.copy", Destination: agg.Subject()}}}}
	_, err = js.UpdateStream(c, cfg)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		last, err := es.GetLastMsgForSubject(c, agg.Subject())
		return err == nil && last.Header.Get("Nats-Stream-Source") != ""
	}, 10*time.Second, 10*time.Millisecond, "the sourced copy lands on the aggregate")
	forged = append(forged, struct {
		name    string
		headers map[string]string
	}{name: "sourced from another stream"})
	v, err := s.Append(c, agg, lastOn(t, s, agg), resumed(agg, fmt.Sprintf("good-%d", len(forged)+1)))
	require.NoError(t, err, "append after the sourced copy")
	require.NoError(t, nc.Flush())

	h, err := s.Load(c, agg)
	require.NoError(t, err)
	assert.Equal(t, v, h.Version, "the version is the subject's last sequence")
	require.Len(t, h.Events, len(forged)+1, "every good event is loaded")
	for i, e := range h.Events {
		assert.Equal(t, fmt.Sprintf("good-%d", i+1), e.Data.(events.NodeResumed).Message)
	}
	require.Len(t, h.Parked, len(forged))
	for i, p := range h.Parked {
		assert.ErrorIs(t, p, events.ErrBadHeader, forged[i].name)
		assert.Contains(t, p.Error(), "reserved header", forged[i].name)
		assert.Greater(t, p.Sequence, h.Events[i].Sequence, "parked at its true sequence: %s", forged[i].name)
		assert.Less(t, p.Sequence, h.Events[i+1].Sequence, "parked at its true sequence: %s", forged[i].name)
	}
	tail, err := s.LoadAfter(c, agg, h.Events[2].Sequence)
	require.NoError(t, err)
	assert.Len(t, tail.Events, len(forged)-2)
	assert.Equal(t, v, tail.Version)

	var scanned, parked int
	require.NoError(t, s.Scan(c, eventstore.ScanOptions{Subjects: []string{agg.Subject()}}, func(events.Envelope) error {
		scanned++
		return nil
	}, func(de *events.DecodeError) {
		assert.ErrorIs(t, de, events.ErrBadHeader)
		parked++
	}))
	assert.Equal(t, len(forged)+1, scanned)
	assert.Equal(t, len(forged), parked, "Scan parks the copies too")

	_, err = s.Append(c, agg, h.Version, resumed(agg, "after"))
	require.NoError(t, err, "appends keep working")

	// What consumers that decode for themselves call.
	clean, err := events.Encode(resumed(agg, "clean"))
	require.NoError(t, err)
	assert.Nil(t, eventstore.CheckDeliveredHeaders(agg.Subject(), 1, clean.Header))
	clean.Header["nats-subject"] = []string{other.Subject()}
	de := eventstore.CheckDeliveredHeaders(agg.Subject(), 1, clean.Header)
	require.NotNil(t, de)
	assert.ErrorIs(t, de, events.ErrBadHeader)
	assert.Contains(t, de.Error(), "Nats-Subject")

	// A stored copy of an end-of-batch status (empty body) does not end a
	// load early: only a response without the server's Nats-Sequence is a
	// status. (Not scanned: the client's pull consumer itself takes such a
	// message for a status of its own.)
	eob := events.NodeAggregate(mgr, "n3")
	ev, err := s.Append(c, eob, 0, resumed(eob, "good-1"))
	require.NoError(t, err)
	m, err := events.Encode(resumed(eob, "eob"))
	require.NoError(t, err)
	m.Header["Status"] = []string{"204"}
	m.Header["Description"] = []string{"EOB"}
	m.Data = nil
	_, err = js.PublishMsg(c, m)
	require.NoError(t, err)
	ev, err = s.Append(c, eob, ev+1, resumed(eob, "good-2"))
	require.NoError(t, err)
	he, err := s.Load(c, eob)
	require.NoError(t, err)
	assert.Len(t, he.Events, 2)
	assert.Len(t, he.Parked, 1)
	assert.Equal(t, ev, he.Version)
}

// lastOn is agg's version as Load reports it.
func lastOn(t *testing.T, s *eventstore.Store, agg events.AggregateID) uint64 {
	t.Helper()
	h, err := s.Load(context.Background(), agg)
	require.NoError(t, err)
	return h.Version
}
