package badinput_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/replay"
	"github.com/switchback-dev/switchback/topology"
)

// poll evaluates cond every 10ms until it holds or timeout passes, and
// reports whether it held; unlike waitFor it does not fail the test.
func poll(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// TestStatusLookalikeOnTheEventStream stores, on the subject of the node
// being upgraded (which that node's worker may publish on), a message with
// an empty body and a Status header: what a NATS client receives as a
// status (no messages, request timeout, consumer deleted, no responders),
// not a message. Every reader of the stream must park it as an undecodable
// event and go on: the upgrade completes, the node's version counts it,
// replay parks it and folds what follows, the projector dead-letters it, and
// the durable consumers acknowledge it instead of having it redelivered
// forever.
func TestStatusLookalikeOnTheEventStream(t *testing.T) {
	cases := []struct {
		name string
		hdrs map[string]string
	}{
		{"404 No Messages", map[string]string{"Status": "404", "Description": "No Messages"}},
		{"408 Request Timeout", map[string]string{"Status": "408", "Description": "Request Timeout"}},
		{"100 heartbeat, no description", map[string]string{"Status": "100"}},
		{"409 Consumer Deleted", map[string]string{"Status": "409", "Description": "Consumer Deleted"}},
		{"503 no responders", map[string]string{"Status": "503"}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := newCase(t, "event stream: status lookalike "+tc.name,
				"parked like undecodable events by every reader; upgrade completes; replay parks it")
			w, ref := stalledUpgrade(t, fmt.Sprintf("status-%d", i))
			agg := events.NodeAggregate(ref, "n1")
			m := nats.NewMsg(agg.Subject())
			for k, v := range tc.hdrs {
				m.Header.Set(k, v)
			}
			ack, err := w.e.JS.PublishMsg(w.ctx, m)
			require.NoError(t, err, "JetStream stores it: nothing refuses an empty body")
			seq := ack.Sequence

			// The node's history: the lookalike counts toward its version.
			h, err := w.e.Store.Load(w.ctx, agg)
			if err != nil {
				b.Got("loading n1's history fails (every decision on n1 too): %v", err)
				b.Bug("eventstore.LoadAfter fails on the stored lookalike (%v): loadBatch must read its inbox with subscribeRaw, not SubscribeSync", err)
			}
			require.Equal(t, seq, h.Version, "the lookalike counts toward n1's version")
			require.NotEmpty(t, h.Parked)
			assert.Equal(t, seq, h.Parked[len(h.Parked)-1].Sequence, "parked at its sequence")

			require.NoError(t, w.sim.HealTargetMoveFailure("vol-0"))
			done := poll(30*time.Second, func() bool { return w.e.Manager(ref).Terminal() })
			if !done {
				orch := consumerInfo(t, w, topology.OrchestratorConsumer).Delivered.Stream
				b.Got("upgrade stuck in %s; orchestrator consumer delivered up to seq %d (lookalike %d)", w.e.Manager(ref).State, orch, seq)
				b.Bug("the upgrade does not complete: the orchestrator's consumer (nats.go Messages) takes a 409/400 lookalike for a status and stops for good; orchestrator.Orchestrator.Run must read with eventstore.Store.Fetch")
			}
			st := w.finish(ref, 30*time.Second)
			require.Equal(t, events.ManagerCompleted, st.State, st.Message)
			w.onceEach(ref)
			assert.Zero(t, w.sim.IOStats().Failed)
			w.assertStatusIsReplay(ref)

			// Replay (an ordered read of the whole range) parks it and
			// folds everything after it.
			rep, err := replay.Run(w.ctx, w.e.Store, replay.Options{Manager: ref.Name, Namespace: ref.Namespace})
			require.NoError(t, err, "replay ends: it neither stalls nor loops at the lookalike")
			require.Len(t, rep.Upgrades, 1)
			assert.Equal(t, events.ManagerCompleted, rep.Upgrades[0].Manager.State, "replay folds the events after it")
			assert.Greater(t, rep.Upgrades[0].LastSequence, seq)
			assert.Empty(t, rep.Missing)
			var parkedByReplay bool
			for _, p := range rep.Parked {
				parkedByReplay = parkedByReplay || p.Sequence == seq
			}
			require.True(t, parkedByReplay, "replay parks the lookalike")
			all, err := replay.Run(w.ctx, w.e.Store, replay.Options{})
			require.NoError(t, err, "an unfiltered replay ends too")
			assert.Empty(t, all.Missing, "the lookalike is not taken for a lost sequence")
			got := fmt.Sprintf("upgrade %s; replay parks seq %d and folds on; n1's version counts it", st.State, seq)
			b.Got("%s", got)

			// The durable consumers: the projector dead-letters it and both
			// acknowledge it, rather than have it redelivered every AckWait.
			dead := poll(10*time.Second, func() bool { return deadLetters(t, w.ctx, w.e.JS)[seq] != nil })
			if !dead {
				b.Got("upgrade %s; replay parks seq %d; the projector never gets it (not dead-lettered, unacked)", st.State, seq)
				b.Bug("the projector's consumer (nats.go FetchNoWait/Next) drops the lookalike unacknowledged, redelivered and dropped every AckWait: projector.fetch must read with eventstore.Store.Fetch")
			}
			kind := deadLetters(t, w.ctx, w.e.JS)[seq].Header.Get(topology.HeaderDeadKind)
			acked := poll(10*time.Second, func() bool { return consumerInfo(t, w, topology.OrchestratorConsumer).AckFloor.Stream >= seq })
			if !acked {
				b.Got("upgrade %s; replay parks seq %d; projector dead-letters it (%s); orchestrator leaves it unacked", st.State, seq, kind)
				b.Bug("the orchestrator's consumer (nats.go Messages) drops the lookalike unacknowledged, redelivered every AckWait forever: orchestrator.Orchestrator.Run must read with eventstore.Store.Fetch")
			}
			b.Got("upgrade %s; replay parks seq %d; projector dead-letters it (%s); consumers ack it; n1's version counts it", st.State, seq, kind)
		})
	}
}

// consumerInfo is what the event stream's durable consumer name reports:
// the last stream sequence it delivered (Delivered.Stream) and the one up to
// which it acknowledged everything (AckFloor.Stream).
func consumerInfo(t *testing.T, w *world, name string) *jetstream.ConsumerInfo {
	t.Helper()
	c, err := w.e.JS.Consumer(w.ctx, w.e.Store.Stream(), name)
	require.NoError(t, err)
	info, err := c.Info(w.ctx)
	require.NoError(t, err)
	return info
}
