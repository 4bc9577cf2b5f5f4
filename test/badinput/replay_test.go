package badinput_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/aggregate/nodeupgrade"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/replay"
	"github.com/switchback-dev/switchback/test/harness/enginetest"
)

// replayed is an old event of the upgrade published again by hand.
type replayed struct {
	name     string
	expected string
	// pick chooses the original in the history so far.
	pick func(h []events.Envelope) (events.Envelope, bool)
	// sameMsgID re-publishes with the original Nats-Msg-Id instead of a new one.
	sameMsgID bool
	// verbatim keeps every stored header, JetStream's own included (the
	// expected-last-sequence of the original append).
	verbatim bool

	orig events.Envelope
	ack  *jetstream.PubAck
	err  error
}

func first[T events.Event](node string) func(h []events.Envelope) (events.Envelope, bool) {
	return func(h []events.Envelope) (events.Envelope, bool) {
		for _, e := range h {
			if _, ok := e.Data.(T); ok && e.Aggregate.Node == node {
				return e, true
			}
		}
		return events.Envelope{}, false
	}
}

func scheduled(node string) func(h []events.Envelope) (events.Envelope, bool) {
	return func(h []events.Envelope) (events.Envelope, bool) {
		for _, e := range h {
			if d, ok := e.Data.(events.NodeScheduled); ok && d.Node == node {
				return e, true
			}
		}
		return events.Envelope{}, false
	}
}

// TestReplayedOldEvents re-publishes copies of old events of a running
// upgrade (the bytes as stored, a new Nats-Msg-Id), as a confused operator
// or a buggy tool could. Every fold (workers', orchestrator's, projector's,
// replay's) refuses them as illegal transitions, nothing acts on them, and
// the upgrade completes with a status that is the fold of the original
// history. The same copy with its original Nats-Msg-Id is dropped by
// JetStream's deduplication.
func TestReplayedOldEvents(t *testing.T) {
	w, ref := stalledUpgrade(t, "replayed")
	n1 := w.e.Node(ref, "n1")
	before := w.e.Manager(ref)
	require.Equal(t, events.NodeCompleted, before.Nodes["n2"].State, "n2 went first")

	cases := []*replayed{
		{name: "replayed node-state-changed of the node in flight", pick: first[events.NodeStateChanged]("n1"),
			expected: "refused by the folds (n1 is past that step); n1 unchanged; no command"},
		{name: "replayed upgrade-requested", pick: first[events.UpgradeRequested](""),
			expected: "refused (the manager exists); prechecks not run again"},
		{name: "replayed node-scheduled of a finished node", pick: scheduled("n2"),
			expected: "refused; n2 not started again; no command"},
		{name: "replayed node-upgrade-completed of a finished node", pick: first[events.NodeUpgradeCompleted]("n2"),
			expected: "refused (n2 is terminal); nothing changes"},
		{name: "replayed copy with its original Nats-Msg-Id", pick: first[events.NodeStateChanged]("n1"), sameMsgID: true,
			expected: "dropped by JetStream deduplication: nothing stored"},
		{name: "replayed byte for byte (stored Nats-Expected-* headers)", pick: first[events.VolumeStateChanged]("n1"), verbatim: true,
			expected: "refused by JetStream: wrong last sequence (10071); nothing stored"},
	}
	stream, err := w.e.JS.Stream(w.ctx, w.e.Store.Stream())
	require.NoError(t, err)
	hist := w.history(ref)
	replayedSeqs := map[uint64]bool{}
	for i, c := range cases {
		orig, ok := c.pick(hist)
		require.True(t, ok, "%s: original found", c.name)
		raw, err := stream.GetMsg(w.ctx, orig.Sequence)
		require.NoError(t, err)
		m := nats.NewMsg(raw.Subject)
		for k, v := range raw.Header {
			// A replay tool re-publishes the CloudEvent: its ce- headers,
			// content type and body. The verbatim copy also carries what
			// JetStream stored and added (the original append's
			// concurrency check, the Nats-* headers of a direct get).
			lk := strings.ToLower(k)
			if c.verbatim || strings.HasPrefix(lk, events.HeaderPrefix) || lk == events.HeaderContentType || k == jetstream.MsgIDHeader {
				m.Header[k] = v
			}
		}
		m.Data = raw.Data
		if !c.sameMsgID {
			m.Header.Set(jetstream.MsgIDHeader, fmt.Sprintf("replay-%d-%d", i, orig.Sequence))
		}
		c.orig = orig
		c.ack, c.err = w.e.JS.PublishMsg(w.ctx, m)
		if c.verbatim {
			var apiErr *jetstream.APIError
			require.ErrorAs(t, c.err, &apiErr, c.name)
			require.Equal(t, jetstream.JSErrCodeStreamWrongLastSequence, apiErr.ErrorCode)
			continue
		}
		require.NoError(t, c.err, c.name)
		if !c.ack.Duplicate {
			replayedSeqs[c.ack.Sequence] = true
		}
	}
	// While n1 still waits, the replays changed nothing anybody folds.
	assert.Equal(t, n1.State, w.e.Node(ref, "n1").State)
	after := w.e.Manager(ref)
	assert.Equal(t, before.Prechecks, after.Prechecks, "no precheck ran again")
	assert.Equal(t, before.Nodes, after.Nodes)

	require.NoError(t, w.sim.HealTargetMoveFailure("vol-0"))
	st := w.finish(ref, 30*time.Second)
	require.Equal(t, events.ManagerCompleted, st.State, st.Message)
	assert.Zero(t, w.sim.IOStats().Failed)
	w.assertStatusIsReplay(ref)
	var original []events.Envelope
	for _, e := range w.history(ref) {
		if !replayedSeqs[e.Sequence] {
			original = append(original, e)
		}
	}
	for key, n := range enginetest.Transitions(original) {
		assert.Equal(t, 1, n, "transition %q appears once", key)
	}
	info, err := w.e.Queue.CommandStreamInfo(w.ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(3*len(events.NodeSteps)), info.State.LastSeq, "one command per node and step: the replays issued none")
	rep, err := replay.Run(w.ctx, w.e.Store, replay.Options{Manager: ref.Name, Namespace: ref.Namespace})
	require.NoError(t, err)
	require.Len(t, rep.Upgrades, 1)
	refused := rep.Upgrades[0].Refused
	assert.Len(t, refused, len(replayedSeqs), "replay lists each replayed copy as refused")
	rejected := waitFor(t, 10*time.Second, "the projector counted the refusals", func() (uint64, error) { return w.proj.Metrics().Rejected, nil },
		func(n uint64) bool { return n >= uint64(len(replayedSeqs)) })

	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := newCase(t, "replay: "+c.name, c.expected)
			if c.verbatim {
				b.Got("publish refused: %v", c.err)
				return
			}
			if c.sameMsgID {
				assert.True(t, c.ack.Duplicate, "JetStream deduplicated it")
				b.Got("PubAck duplicate=%v (seq %d is the original's)", c.ack.Duplicate, c.ack.Sequence)
				return
			}
			var why error
			for _, r := range refused {
				if containsSeq(r, c.ack.Sequence) {
					why = r
				}
			}
			require.Error(t, why, "replay reports seq %d as refused", c.ack.Sequence)
			b.Got("seq %d refused: %s; upgrade %s; projector rejected %d", c.ack.Sequence, clip(reasonOf(why), 70), st.State, rejected)
		})
	}
}

// containsSeq reports whether err is replay's refusal of seq ("seq N: ...").
func containsSeq(err error, seq uint64) bool {
	return strings.HasPrefix(err.Error(), fmt.Sprintf("seq %d: ", seq))
}

// reasonOf keeps the fold's reason: what follows `in state "X": `.
func reasonOf(err error) string {
	s := err.Error()
	if i := strings.LastIndex(s, `": `); i >= 0 {
		return s[i+3:]
	}
	return s
}

// TestReplayedCopyWithStoredNatsHeaders: `nats stream get` then `nats pub`
// of the result copies the headers a direct get adds (Nats-Sequence,
// Nats-Stream, Nats-Subject, Nats-Time-Stamp) into the new message. Loading
// the aggregate must still report the subject's true last sequence, or no
// append on it can ever succeed.
func TestReplayedCopyWithStoredNatsHeaders(t *testing.T) {
	b := newCase(t, "replay: copy carrying stored Nats-Sequence/Nats-Subject headers",
		"refused or ignored by the folds; the node's appends keep working")
	cluster := threeNodes(t)
	require.NoError(t, cluster.InjectTargetMoveFailure("vol-0")) // hold n1 in switching-over
	w := newWorld(t, cluster, enginetest.Options{StallAfter: 200 * time.Millisecond})
	ref := events.ManagerRef{Namespace: "longhorn-system", Name: "copied", UID: "uid-copied"}
	w.e.Request(ref)
	w.e.WaitNode(ref, "n1", 20*time.Second, "stalled in switching-over", func(n nodeupgrade.State) bool { return n.Stalled })
	agg := events.NodeAggregate(ref, "n1")
	orig, ok := first[events.NodeStateChanged]("n1")(w.history(ref))
	require.True(t, ok)
	stream, err := w.e.JS.Stream(w.ctx, w.e.Store.Stream())
	require.NoError(t, err)
	raw, err := stream.GetMsg(w.ctx, orig.Sequence)
	require.NoError(t, err)
	m := nats.NewMsg(raw.Subject)
	for k, v := range raw.Header {
		if !strings.HasPrefix(k, "Nats-Expected") {
			m.Header[k] = v
		}
	}
	m.Data = raw.Data
	m.Header.Set(jetstream.MsgIDHeader, "copied-by-hand")
	t.Logf("copied headers: %v", m.Header)
	ack, err := w.e.JS.PublishMsg(w.ctx, m)
	require.NoError(t, err)

	h, err := w.e.Store.Load(w.ctx, agg)
	require.NoError(t, err)
	require.Equal(t, ack.Sequence, h.Version, "load reports the subject's true last sequence, not the copied Nats-Sequence")
	require.NotEmpty(t, h.Parked, "the copy is parked, not folded")
	parked := h.Parked[len(h.Parked)-1]
	assert.Equal(t, ack.Sequence, parked.Sequence)
	assert.ErrorIs(t, parked, events.ErrBadHeader)
	for _, e := range h.Events {
		assert.NotEqual(t, ack.Sequence, e.Sequence, "the copy is not an event of the history")
	}

	// The node's appends keep working: the worker reports the stall and,
	// once the volume heals, n1 finishes and the upgrade completes.
	_, err = w.e.Store.Append(w.ctx, agg, h.Version, stall(ref, "n1", "after-copy"))
	require.NoError(t, err, "an append at the loaded version succeeds")
	require.NoError(t, cluster.HealTargetMoveFailure("vol-0"))
	st := w.finish(ref, 30*time.Second)
	require.Equal(t, events.ManagerCompleted, st.State, st.Message)
	assert.Zero(t, cluster.IOStats().Failed)
	rep, err := replay.Run(w.ctx, w.e.Store, replay.Options{Manager: ref.Name, Namespace: ref.Namespace})
	require.NoError(t, err)
	var parkedByReplay bool
	for _, p := range rep.Parked {
		parkedByReplay = parkedByReplay || p.Sequence == ack.Sequence
	}
	assert.True(t, parkedByReplay, "replay parks the copy too")
	b.Got("load reports version %d = the subject's last sequence; the copy parked (%s); appends work, upgrade %s",
		h.Version, clip(parked.Err.Error(), 60), st.State)
}
