package eventstore_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/eventstore"
	"github.com/switchback-dev/switchback/natsembed"
	"github.com/switchback-dev/switchback/natsembed/natstest"
)

// TestScanRidesOutAServersDeath: the server leading the event stream, or
// the one serving the scan's own consumer, dies while a scan of 12,000
// events is a twelfth of the way through. The scan waits out the election
// and the lost consumer (the API answers nobody for seconds) and delivers
// every event up to the last one stored when it started, each once, in
// order.
func TestScanRidesOutAServersDeath(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test in -short mode")
	}
	for _, victim := range []string{"stream leader", "scan's consumer"} {
		t.Run(victim, func(t *testing.T) { scanThroughDeath(t, victim == "stream leader") })
	}
}

// r3 is an R3 store on a cluster of three servers, with a connection of the
// test's own (the cluster's would be closed with the server it is on), and
// that connection.
func r3(t *testing.T) (*natsembed.Cluster, *nats.Conn, *eventstore.Store, jetstream.JetStream) {
	t.Helper()
	cluster := natstest.StartCluster(t, 3)
	nc, err := nats.Connect(cluster.URLs(), nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	return cluster, nc, openStore(t, js, eventstore.Config{Replicas: 3}), js
}

// appendMany appends n events, one to each of the aggregates of nodes
// n<from> to n<from+n-1>.
func appendMany(t *testing.T, c context.Context, s *eventstore.Store, from, n int) {
	t.Helper()
	reqs := make([]eventstore.AppendRequest, n)
	for i := range reqs {
		agg := events.NodeAggregate(mgr, fmt.Sprintf("n%d", from+i))
		reqs[i] = eventstore.AppendRequest{Aggregate: agg, Events: []events.Envelope{resumed(agg, "e")}}
	}
	for i, r := range s.AppendBatch(c, reqs) {
		require.NoError(t, r.Err, "append %d", from+i)
	}
}

func scanThroughDeath(t *testing.T, streamLeader bool) {
	cluster, _, s, js := r3(t)
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	const total, killAt = 12000, 1000
	for from := 0; from < total; from += 1000 {
		appendMany(t, c, s, from, 1000)
	}
	stream, err := js.Stream(c, s.Stream())
	require.NoError(t, err)
	leader := stream.CachedInfo().Cluster.Leader
	require.NotEmpty(t, leader)

	var seqs []uint64
	killed := ""
	err = s.Scan(c, eventstore.ScanOptions{}, func(e events.Envelope) error {
		seqs = append(seqs, e.Sequence)
		if len(seqs) == killAt {
			if !streamLeader {
				// The scan's consumer is the stream's only one.
				names := stream.ConsumerNames(c)
				for name := range names.Name() {
					ci, err := stream.Consumer(c, name)
					require.NoError(t, err)
					leader = ci.CachedInfo().Cluster.Leader
				}
				require.NoError(t, names.Err())
			}
			for i, srv := range cluster.Servers {
				if srv != nil && srv.Name() == leader {
					cluster.Stop(i)
					killed = leader
				}
			}
		}
		return nil
	}, nil)
	require.NoError(t, err)
	require.Equal(t, leader, killed, "the server was stopped mid-scan")
	require.Len(t, seqs, total, "every event stored when the scan started")
	for i, seq := range seqs {
		if !assert.Equal(t, uint64(i+1), seq, "in order, each once") {
			break
		}
	}
}

// TestScanReadsPastALaggingReplica: a server of the stream stops while
// events are appended, and a scan starts as soon as it is back: its
// consumer may be placed on that server, which has nothing past what it
// held when it stopped until it has caught up; so may a direct get
// (Config.DirectScans). Every scan still reads every event up to the
// stream leader's last (before the scan asked the leader, about 4 scans in
// 10 right after a restart read nothing).
func TestScanReadsPastALaggingReplica(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test in -short mode")
	}
	cluster, nc, s, js := r3(t)
	direct := openStore(t, js, eventstore.Config{Replicas: 3, DirectScans: true})
	c, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	stream, err := js.Stream(c, s.Stream())
	require.NoError(t, err)
	leader := stream.CachedInfo().Cluster.Leader
	const rounds, perRound = 5, 2000
	for round := range rounds {
		// Neither the leader nor the server the test's appends go through.
		victim := slices.IndexFunc(cluster.Servers, func(srv *natsembed.Server) bool {
			return srv != nil && srv.Name() != leader && srv.Name() != nc.ConnectedServerName()
		})
		cluster.Stop(victim)
		appendMany(t, c, s, round*perRound, perRound)
		require.NoError(t, cluster.Restart(victim))
		last, err := s.LastSequence(c)
		require.NoError(t, err)
		// Each scan's consumer is placed anew: three of them in the window.
		for _, st := range []*eventstore.Store{s, s, s, direct} {
			var got uint64
			require.NoError(t, st.Scan(c, eventstore.ScanOptions{}, func(events.Envelope) error { got++; return nil }, nil))
			require.Equal(t, last, got, "round %d: every event up to the leader's last", round)
			// A filtered scan ends where the leader says its subjects end.
			var one uint64
			agg := events.NodeAggregate(mgr, fmt.Sprintf("n%d", round*perRound))
			require.NoError(t, st.Scan(c, eventstore.ScanOptions{Subjects: []string{agg.Subject()}}, func(events.Envelope) error { one++; return nil }, nil))
			require.Equal(t, uint64(1), one, "round %d: the one event of %s", round, agg)
		}
		// Caught up before it stops again (and before the servers shut
		// down: one stopped while it still creates its stores leaks them).
		require.Eventually(t, func() bool {
			info, err := stream.Info(c)
			if err != nil || info.Cluster == nil || len(info.Cluster.Replicas) != 2 {
				return false
			}
			for _, r := range info.Cluster.Replicas {
				if !r.Current || r.Lag > 0 {
					return false
				}
			}
			return true
		}, time.Minute, 20*time.Millisecond, "round %d: every replica current", round)
	}
}

// TestLoadWaitsOutAClusterWithNobodyToAnswer: a load whose direct get
// nobody answers in time (here: the stream is being created again while a
// lone subscriber swallows the request) asks again from where it is, and
// returns the aggregate once the stream answers.
func TestLoadWaitsOutAClusterWithNobodyToAnswer(t *testing.T) {
	srv := natstest.Start(t)
	nc, _ := natstest.Connect(t, srv)
	js, err := jetstream.New(nc, jetstream.WithDefaultTimeout(200*time.Millisecond))
	require.NoError(t, err)
	s := openStore(t, js, eventstore.Config{})
	c := ctx(t)
	require.NoError(t, js.DeleteStream(c, s.Stream()))

	asked := make(chan struct{})
	swallow, err := nc.Subscribe("$JS.API.DIRECT.GET."+s.Stream(), func(*nats.Msg) {
		select {
		case asked <- struct{}{}:
		default:
		}
	})
	require.NoError(t, err)
	agg := events.NodeAggregate(mgr, "n1")
	loaded := make(chan eventstore.History, 1)
	failed := make(chan error, 1)
	go func() {
		h, err := s.Load(context.Background(), agg)
		if err != nil {
			failed <- err
			return
		}
		loaded <- h
	}()
	<-asked
	require.NoError(t, swallow.Unsubscribe())
	s = openStore(t, js, eventstore.Config{})
	appendResumed(t, c, s, agg, 0, "after the wait")
	select {
	case h := <-loaded:
		require.Len(t, h.Events, 1)
		assert.Equal(t, "after the wait", h.Events[0].Data.(events.NodeResumed).Message)
	case err := <-failed:
		t.Fatalf("load gave up: %v", err)
	}
}
