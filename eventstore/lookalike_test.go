package eventstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/eventstore"
)

// statusLookalikes are stored messages the nats.go consumers take for
// statuses of their own: an empty body and a Status header.
var statusLookalikes = []map[string]string{
	{"Status": "100"},
	{"Status": "100", "Description": "Idle Heartbeat"},
	{"Status": "404"},
	{"Status": "404", "Description": "No Messages"},
	{"Status": "408", "Description": "Request Timeout"},
	{"Status": "409"},
	{"Status": "409", "Description": "Consumer Deleted"},
	{"Status": "409", "Description": "Leadership Change"},
	{"Status": "400", "Description": "Bad Request"},
	{"Status": "503"},
}

// publishLookalike stores a status lookalike on subject, as anyone allowed
// to publish there can.
func publishLookalike(t *testing.T, js jetstream.JetStream, subject string, hdrs map[string]string) uint64 {
	t.Helper()
	m := nats.NewMsg(subject)
	for k, v := range hdrs {
		m.Header.Set(k, v)
	}
	ack, err := js.PublishMsg(ctx(t), m)
	require.NoError(t, err)
	return ack.Sequence
}

// n1Store is where most tests here start: a fresh store (newStore), its
// JetStream, the test's context and the aggregate they store lookalikes
// on, n1 of mgr.
func n1Store(t *testing.T) (*eventstore.Store, jetstream.JetStream, context.Context, events.AggregateID) {
	t.Helper()
	s, js := newStore(t)
	return s, js, ctx(t), events.NodeAggregate(mgr, "n1")
}

// lookalikeStream stores good-1, a lookalike, good-2 on agg and, when last,
// one more lookalike at the very end (nothing after it to reveal a gap). It
// returns the lookalikes' sequences and agg's version.
func lookalikeStream(t *testing.T, s *eventstore.Store, js jetstream.JetStream, agg events.AggregateID, hdrs map[string]string, last bool) ([]uint64, uint64) {
	t.Helper()
	c := ctx(t)
	appendResumed(t, c, s, agg, 0, "good-1")
	bad := []uint64{publishLookalike(t, js, agg.Subject(), hdrs)}
	v := appendResumed(t, c, s, agg, bad[0], "good-2")
	if last {
		bad = append(bad, publishLookalike(t, js, agg.Subject(), hdrs))
		v = bad[1]
	}
	return bad, v
}

func TestScanParksStatusLookalikes(t *testing.T) {
	other := events.ManagerRef{Namespace: "ns", Name: "other", UID: "uid-2"}
	for _, hdrs := range statusLookalikes {
		t.Run(fmt.Sprint(hdrs), func(t *testing.T) {
			s, js, c, agg := n1Store(t)
			// Another manager's event in between, so that a filtered read
			// has gaps of its own.
			oa := events.NodeAggregate(other, "n1")
			appendResumed(t, c, s, oa, 0, "other")
			bad, _ := lookalikeStream(t, s, js, agg, hdrs, true)

			for _, subjects := range [][]string{nil, {agg.Subject()}, {events.ManagerSubjectPrefix(mgr) + ".>", "sb.evt.none.>"}} {
				var got []string
				var parked []uint64
				sctx, cancel := context.WithTimeout(c, 10*time.Second)
				err := s.Scan(sctx, eventstore.ScanOptions{Subjects: subjects}, func(e events.Envelope) error {
					if e.Aggregate == agg {
						got = append(got, e.Data.(events.NodeResumed).Message)
					}
					return nil
				}, func(de *events.DecodeError) { parked = append(parked, de.Sequence) })
				cancel()
				require.NoError(t, err, "subjects %v: the scan ends, it does not stall", subjects)
				assert.Equal(t, []string{"good-1", "good-2"}, got, "subjects %v: later events are still read", subjects)
				assert.Equal(t, bad, parked, "subjects %v: parked at their sequences", subjects)
			}
		})
	}
}

func TestLoadParksStatusLookalikes(t *testing.T) {
	for _, hdrs := range statusLookalikes {
		t.Run(fmt.Sprint(hdrs), func(t *testing.T) {
			s, js, c, agg := n1Store(t)
			_, version := lookalikeStream(t, s, js, agg, hdrs, true)
			h, err := s.Load(c, agg)
			require.NoError(t, err)
			assert.Len(t, h.Events, 2)
			assert.Len(t, h.Parked, 2)
			assert.Equal(t, version, h.Version, "the lookalikes count toward the version")
			_, err = s.Append(c, agg, h.Version, resumed(agg, "after"))
			require.NoError(t, err, "appends keep working")
		})
	}
}

func TestScanBoundsWithLookalikes(t *testing.T) {
	s, js, c, agg := n1Store(t)
	bad, _ := lookalikeStream(t, s, js, agg, map[string]string{"Status": "404"}, false)
	cases := []struct {
		name       string
		opts       eventstore.ScanOptions
		wantEvents int
		wantParked int
	}{
		{"until the lookalike", eventstore.ScanOptions{UntilSeq: bad[0]}, 1, 1},
		{"from the lookalike", eventstore.ScanOptions{FromSeq: bad[0]}, 1, 1},
		{"after the lookalike", eventstore.ScanOptions{FromSeq: bad[0] + 1}, 1, 0},
		{"until a time before everything", eventstore.ScanOptions{UntilTime: time.Now().Add(-time.Hour)}, 0, 0},
		{"until a time after everything", eventstore.ScanOptions{UntilTime: time.Now().Add(time.Hour)}, 2, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var n, p int
			require.NoError(t, s.Scan(c, tc.opts, func(events.Envelope) error { n++; return nil }, func(*events.DecodeError) { p++ }))
			assert.Equal(t, tc.wantEvents, n)
			assert.Equal(t, tc.wantParked, p)
		})
	}
	stop := errors.New("stop")
	err := s.Scan(c, eventstore.ScanOptions{}, func(events.Envelope) error { return stop }, nil)
	assert.ErrorIs(t, err, stop, "an error from fn stops the scan")
}

func TestScanOnR3ClusterWithLookalike(t *testing.T) {
	s, js := newR3Store(t)
	agg := events.NodeAggregate(mgr, "n1")
	bad, _ := lookalikeStream(t, s, js, agg, map[string]string{"Status": "408", "Description": "Request Timeout"}, true)
	var n int
	var parked []uint64
	require.NoError(t, s.Scan(ctx(t), eventstore.ScanOptions{}, func(events.Envelope) error { n++; return nil }, func(de *events.DecodeError) { parked = append(parked, de.Sequence) }))
	assert.Equal(t, 2, n, "every event, whichever replica answers")
	assert.Equal(t, bad, parked)
}

func TestFetchDeliversStatusLookalikes(t *testing.T) {
	for _, hdrs := range statusLookalikes {
		t.Run(fmt.Sprint(hdrs), func(t *testing.T) {
			s, js, c, agg := n1Store(t)
			bad, _ := lookalikeStream(t, s, js, agg, hdrs, true)
			cons, err := js.CreateOrUpdateConsumer(c, s.Stream(), jetstream.ConsumerConfig{
				Durable: "d", AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Minute,
				DeliverPolicy: jetstream.DeliverAllPolicy, MaxDeliver: -1,
			})
			require.NoError(t, err)

			var got []string
			var parked []uint64
			for len(got)+len(parked) < 4 {
				msgs, err := s.Fetch(c, "d", 2, time.Second)
				require.NoError(t, err)
				require.NotEmpty(t, msgs, "nothing is held back")
				for _, m := range msgs {
					md, err := m.Metadata()
					require.NoError(t, err)
					e, err := eventstore.DecodeDelivered(m.Subject(), md.Sequence.Stream, m.Headers(), m.Data())
					var de *events.DecodeError
					if errors.As(err, &de) {
						parked = append(parked, de.Sequence)
					} else {
						require.NoError(t, err)
						got = append(got, e.Data.(events.NodeResumed).Message)
					}
					require.NoError(t, m.DoubleAck(c))
				}
			}
			assert.Equal(t, []string{"good-1", "good-2"}, got)
			assert.Equal(t, bad, parked, "the lookalikes reach the caller, to be parked")
			info, err := cons.Info(c)
			require.NoError(t, err)
			assert.Equal(t, bad[1], info.AckFloor.Stream, "everything acked: nothing is redelivered")
			assert.Zero(t, info.NumAckPending)

			msgs, err := s.Fetch(c, "d", 10, 0)
			require.NoError(t, err)
			assert.Empty(t, msgs, "nothing left, no wait")
			_, err = s.Append(c, agg, bad[1], resumed(agg, "live"))
			require.NoError(t, err)
			msgs, err = s.Fetch(c, "d", 10, 5*time.Second)
			require.NoError(t, err)
			require.Len(t, msgs, 1, "a waiting fetch gets the next event")
			require.NoError(t, msgs[0].Ack())
		})
	}
}

func TestFetchAcksNaksAndErrors(t *testing.T) {
	s, js, c, agg := n1Store(t)
	_, err := s.Append(c, agg, 0, resumed(agg, "one"))
	require.NoError(t, err)
	_, err = js.CreateOrUpdateConsumer(c, s.Stream(), jetstream.ConsumerConfig{
		Durable: "d", AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Minute, DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	require.NoError(t, err)

	msgs, err := s.Fetch(c, "d", 1, time.Second)
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	md, err := msgs[0].Metadata()
	require.NoError(t, err)
	assert.Equal(t, uint64(1), md.NumDelivered)
	assert.Equal(t, "d", md.Consumer)
	assert.Equal(t, agg.Subject(), msgs[0].Subject())
	require.NoError(t, msgs[0].InProgress())
	require.NoError(t, msgs[0].Nak())

	msgs, err = s.Fetch(c, "d", 1, 5*time.Second)
	require.NoError(t, err)
	require.Len(t, msgs, 1, "a nak'ed message comes back")
	md, err = msgs[0].Metadata()
	require.NoError(t, err)
	assert.Equal(t, uint64(2), md.NumDelivered)
	require.NoError(t, msgs[0].TermWithReason("test"))

	_, err = s.Fetch(c, "missing", 1, 0)
	require.Error(t, err, "a consumer that does not exist is an error")
	assert.Contains(t, err.Error(), "missing")
}

// TestNatsClientDropsStatusLookalikes records the nats.go behaviour Scan and
// Fetch work around; should it fail after an upgrade of nats.go, the client
// was fixed and the consumer API can be used again.
func TestNatsClientDropsStatusLookalikes(t *testing.T) {
	s, js, c, agg := n1Store(t)
	bad, _ := lookalikeStream(t, s, js, agg, map[string]string{"Status": "404"}, false)
	stream, err := js.Stream(c, s.Stream())
	require.NoError(t, err)

	// An ordered consumer drops the lookalike, sees a gap in its consumer
	// sequence, re-creates itself at the lookalike, and so on: good-2 never
	// comes.
	oc, err := stream.OrderedConsumer(c, jetstream.OrderedConsumerConfig{})
	require.NoError(t, err)
	it, err := oc.Messages()
	require.NoError(t, err)
	defer it.Stop()
	var seqs []uint64
	for {
		nctx, cancel := context.WithTimeout(c, 2*time.Second)
		m, err := it.Next(jetstream.NextContext(nctx))
		cancel()
		if err != nil {
			require.ErrorIs(t, err, context.DeadlineExceeded)
			break
		}
		md, err := m.Metadata()
		require.NoError(t, err)
		seqs = append(seqs, md.Sequence.Stream)
	}
	assert.Equal(t, []uint64{1}, seqs, "the ordered consumer stalls at the lookalike")

	// A durable consumer's Fetch drops it unacknowledged.
	dc, err := stream.CreateOrUpdateConsumer(c, jetstream.ConsumerConfig{Durable: "d", AckPolicy: jetstream.AckExplicitPolicy, DeliverPolicy: jetstream.DeliverAllPolicy})
	require.NoError(t, err)
	seqs = nil
	for range 3 {
		b, err := dc.FetchNoWait(10)
		require.NoError(t, err)
		for m := range b.Messages() {
			md, err := m.Metadata()
			require.NoError(t, err)
			seqs = append(seqs, md.Sequence.Stream)
			require.NoError(t, m.DoubleAck(c))
		}
	}
	assert.NotContains(t, seqs, bad[0], "the lookalike never reaches the caller")
	info, err := dc.Info(c)
	require.NoError(t, err)
	assert.Equal(t, bad[0]-1, info.AckFloor.Stream, "and stays unacknowledged: the ack floor stays before it")
}

// TestFollowGoesPastStatusLookalikes, with a consumer and by direct gets
// (Config.DirectScans).
func TestFollowGoesPastStatusLookalikes(t *testing.T) {
	for _, direct := range []bool{false, true} {
		t.Run(fmt.Sprintf("direct scans %t", direct), func(t *testing.T) { followPastLookalikes(t, direct) })
	}
}

func followPastLookalikes(t *testing.T, direct bool) {
	s, js, c, agg := n1Store(t)
	if direct {
		s = openStore(t, js, eventstore.Config{DirectScans: true})
	}
	other := events.NodeAggregate(mgr, "n2")
	appendResumed(t, c, s, other, 0, "other")
	bad, version := lookalikeStream(t, s, js, agg, map[string]string{"Status": "404", "Description": "No Messages"}, true)

	type seen struct {
		msg     string
		pending uint64
	}
	var got []seen
	var parked []uint64
	appended := make(chan error, 1)
	err := s.Follow(c, []string{agg.Subject()}, 0, func(e events.Envelope, pending uint64) bool {
		msg := e.Data.(events.NodeResumed).Message
		got = append(got, seen{msg, pending})
		if msg == "good-2" {
			// Appended while following: it must come too.
			go func() {
				_, err := s.Append(c, agg, version, resumed(agg, "live"))
				appended <- err
			}()
		}
		return msg == "live"
	}, func(de *events.DecodeError) { parked = append(parked, de.Sequence) })
	require.NoError(t, err)
	require.NoError(t, <-appended)
	assert.Equal(t, []seen{{"good-1", 3}, {"good-2", 1}, {"live", 0}}, got,
		"every event, with how many messages of the filter follow it")
	assert.Equal(t, bad, parked)

	fctx, cancel := context.WithCancel(c)
	done := make(chan error, 1)
	go func() {
		done <- s.Follow(fctx, nil, 0, func(events.Envelope, uint64) bool { return false }, nil)
	}()
	cancel()
	select {
	case err := <-done:
		assert.NoError(t, err, "ending ctx ends Follow without an error")
	case <-time.After(10 * time.Second):
		t.Fatal("Follow did not end with its context")
	}
}
