package eventstore_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/eventstore"
	"github.com/switchback-dev/switchback/metrics"
	"github.com/switchback-dev/switchback/natsembed/natstest"
)

// TestDedupCannotSuppressAnEvent plays the attack on stream-wide
// deduplication: a writer allowed on one aggregate's subject (a worker, on
// its own node) publishes junk there under the id of another aggregate's next
// event. The victim's append must still store its event, on its own subject,
// and a retry of it must still store nothing twice.
func TestDedupCannotSuppressAnEvent(t *testing.T) {
	single := func(t *testing.T) jetstream.JetStream {
		_, js := natstest.Connect(t, natstest.Start(t))
		return js
	}
	cluster := func(t *testing.T) jetstream.JetStream {
		if testing.Short() {
			t.Skip("cluster test in -short mode")
		}
		_, js := natstest.Connect(t, natstest.StartCluster(t, 3))
		return js
	}
	victimEvents := func(agg events.AggregateID, n int) []events.Envelope {
		data := make([]events.Event, n)
		for i := range data {
			data[i] = events.NodeResumed{Step: events.NodePending, Message: fmt.Sprintf("event %d", i+1)}
		}
		return events.New(agg, events.SourceController, "decision", t0, data...)
	}
	appendSync := func(t *testing.T, s *eventstore.Store, agg events.AggregateID, evs []events.Envelope) (uint64, error) {
		return s.Append(ctx(t), agg, 0, evs...)
	}
	appendAsync := func(t *testing.T, s *eventstore.Store, agg events.AggregateID, evs []events.Envelope) (uint64, error) {
		r := s.AppendBatch(ctx(t), []eventstore.AppendRequest{{Aggregate: agg, Expected: 0, Events: evs}})
		return r[0].Version, r[0].Err
	}
	for _, tc := range []struct {
		name     string
		js       func(*testing.T) jetstream.JetStream
		replicas int
		events   int
		taken    int // which event's id the attacker takes
		append   func(*testing.T, *eventstore.Store, events.AggregateID, []events.Envelope) (uint64, error)
	}{
		{name: "one event", js: single, events: 1, append: appendSync},
		{name: "one event, asynchronous", js: single, events: 1, append: appendAsync},
		{name: "a decision of three events, the second's id taken (publish chain)", js: single, events: 3, taken: 1, append: appendSync},
		{name: "a decision of 40 events, the 21st's id taken (atomic batch on one replica)", js: single, events: 40, taken: 20, append: appendSync},
		{name: "a decision of 1001 events, the 501st's id taken (over a batch: publish chain)", js: single, events: 1001, taken: 500, append: appendSync},
		{name: "R3: one event", js: cluster, replicas: 3, events: 1, append: appendSync},
		{name: "R3: a decision of three events, the last's id taken (atomic batch)", js: cluster, replicas: 3, events: 3, taken: 2, append: appendSync},
	} {
		t.Run(tc.name, func(t *testing.T) {
			js := tc.js(t)
			s := openStore(t, js, eventstore.Config{Replicas: tc.replicas})
			attacker := events.NodeAggregate(mgr, "n1")
			victim := events.NodeAggregate(mgr, "n2")
			evs := victimEvents(victim, tc.events)

			junk := nats.NewMsg(attacker.Subject())
			junk.Data = []byte("junk")
			junk.Header.Set(jetstream.MsgIDHeader, evs[tc.taken].ID)
			_, err := js.PublishMsg(ctx(t), junk)
			require.NoError(t, err)

			before := collisions(t, s.Stream())
			v, err := tc.append(t, s, victim, evs)
			require.NoError(t, err)
			// Loads are direct gets, which an R3 follower may answer a
			// moment behind the leader that acknowledged the append.
			var h eventstore.History
			require.Eventually(t, func() bool {
				h, err = s.Load(ctx(t), victim)
				return err == nil && h.Version >= v
			}, 10*time.Second, 5*time.Millisecond, "the load sees the append")
			require.Len(t, h.Events, tc.events, "every event of the victim is stored")
			for i, e := range h.Events {
				assert.Equal(t, evs[i].ID, e.ID)
			}
			assert.Equal(t, h.Version, v)
			assert.Equal(t, before+1, collisions(t, s.Stream()), "the collision is reported once")

			// Retrying the append (its answer lost) stores nothing twice.
			again, err := tc.append(t, s, victim, evs)
			require.NoError(t, err)
			assert.Equal(t, v, again)
			require.Eventually(t, func() bool {
				h, err = s.Load(ctx(t), victim)
				return err == nil && h.Version >= again
			}, 10*time.Second, 5*time.Millisecond, "the load sees the retried append")
			assert.Len(t, h.Events, tc.events)
		})
	}
}

// collisions is the dedup collision counter of stream.
func collisions(t *testing.T, stream string) float64 {
	var m dto.Metric
	require.NoError(t, metrics.DedupCollisions.WithLabelValues(stream).Write(&m))
	return m.GetCounter().GetValue()
}
