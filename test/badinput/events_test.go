package badinput_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	eventsv1 "k8s.io/api/events/v1"

	"github.com/switchback-dev/switchback/api/v1beta2"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/projector"
	"github.com/switchback-dev/switchback/topology"
)

// stall is a well-formed event of node's upgrade: the poison cases start
// from it and break one thing each. causation makes each id unique.
func stall(ref events.ManagerRef, node, causation string) events.Envelope {
	return events.New(events.NodeAggregate(ref, node), events.SourceWorker+"/"+node, causation, time.Now(),
		events.NodeStalled{Step: events.NodeSwitchingOver, Reason: "ByHand", Message: "published by a test"})[0]
}

func encode(t *testing.T, e events.Envelope) *nats.Msg {
	t.Helper()
	m, err := events.Encode(e)
	require.NoError(t, err)
	return m
}

// poison is one bad message published by hand on the event stream.
type poison struct {
	name string
	// kind is the dead-letter kind expected (topology.HeaderDeadKind); ""
	// when JetStream itself must refuse the message.
	kind string
	// refusal is a substring of the publish error when kind is "".
	refusal string
	build   func(t *testing.T, ref events.ManagerRef, id string) *nats.Msg
	// published is filled in: the stream sequence it got.
	seq uint64
	// whether the subject names the test's manager (then a Warning Event on
	// it is due).
	aboutManager bool
}

func withHeader(key, value string) func(t *testing.T, ref events.ManagerRef, id string) *nats.Msg {
	return func(t *testing.T, ref events.ManagerRef, id string) *nats.Msg {
		m := encode(t, stall(ref, "n1", id))
		if value == "" {
			m.Header.Del(key)
		} else {
			m.Header.Set(key, value)
		}
		return m
	}
}

func withBody(body []byte) func(t *testing.T, ref events.ManagerRef, id string) *nats.Msg {
	return func(t *testing.T, ref events.ManagerRef, id string) *nats.Msg {
		m := encode(t, stall(ref, "n1", id))
		m.Data = body
		return m
	}
}

func poisons() []*poison {
	big := func(n int) []byte {
		return []byte(`{"step":"switching-over","reason":"Big","message":"` + strings.Repeat("x", n) + `"}`)
	}
	return []*poison{
		{name: "ce-specversion missing", kind: "bad-header", build: withHeader("ce-specversion", "")},
		{name: "ce-specversion 9.9 (unsupported)", kind: "bad-header", build: withHeader("ce-specversion", "9.9")},
		{name: "ce-id missing", kind: "bad-header", build: withHeader("ce-id", "")},
		{name: "ce-time not a timestamp", kind: "bad-header", build: withHeader("ce-time", "yesterday")},
		{name: "ce-causationid missing", kind: "bad-header", build: withHeader("ce-causationid", "")},
		{name: "content-type text/plain", kind: "bad-header", build: withHeader("content-type", "text/plain")},
		{name: "ce-type twice, in two cases", kind: "bad-header", build: func(t *testing.T, ref events.ManagerRef, id string) *nats.Msg {
			m := encode(t, stall(ref, "n1", id))
			m.Header["Ce-Type"] = []string{string(events.TypeNodeUpgradeCompleted)}
			return m
		}},
		{name: "unknown ce-type", kind: "unknown-type", build: withHeader("ce-type", "io.switchback.node.teleported.v1")},
		{name: "body not JSON", kind: "bad-data", build: withBody([]byte("{not json"))},
		{name: "body JSON of the wrong shape", kind: "bad-data", build: withBody([]byte(`{"step":7,"reason":["x"]}`))},
		{name: "payload over 64 KiB (events.MaxDataBytes)", kind: "too-large", build: withBody(big(events.MaxDataBytes))},
		{name: "payload over the stream's MaxMsgSize", refusal: "maximum", build: withBody(big(events.MaxDataBytes + 16<<10))},
		{name: "event of n2 on n1's subject", kind: "wrong-subject", build: func(t *testing.T, ref events.ManagerRef, id string) *nats.Msg {
			m := encode(t, stall(ref, "n2", id))
			m.Subject = events.NodeAggregate(ref, "n1").Subject()
			return m
		}},
		{name: "manager event type on a node subject", kind: "wrong-subject", build: func(t *testing.T, ref events.ManagerRef, id string) *nats.Msg {
			mgr := events.New(events.ManagerAggregate(ref), events.SourceController, id, time.Now(), events.UpgradeCompleted{Message: "forged"})[0]
			m := encode(t, mgr)
			m.Subject = events.NodeAggregate(ref, "n1").Subject()
			m.Header.Set("ce-subject", events.NodeAggregate(ref, "n1").String())
			return m
		}},
		{name: "ce-correlationid of another manager", kind: "wrong-subject", build: withHeader("ce-correlationid", "another-uid")},
		{name: "subject outside the layout (…<uid>.nodes.n1)", kind: "wrong-subject", build: func(t *testing.T, ref events.ManagerRef, id string) *nats.Msg {
			m := encode(t, stall(ref, "n1", id))
			m.Subject = events.ManagerSubjectPrefix(ref) + ".nodes.n1"
			return m
		}},
		{name: "node token not canonical (n~31 for n1)", kind: "wrong-subject", build: func(t *testing.T, ref events.ManagerRef, id string) *nats.Msg {
			m := encode(t, stall(ref, "n1", id))
			m.Subject = events.ManagerSubjectPrefix(ref) + ".node.n~31"
			return m
		}},
	}
}

// deadLetters indexes the dead-lettered events by the sequence they had.
func deadLetters(t *testing.T, ctx context.Context, js jetstream.JetStream) map[uint64]*jetstream.RawStreamMsg {
	t.Helper()
	s, err := js.Stream(ctx, topology.DeadLetterStream)
	require.NoError(t, err)
	info, err := s.Info(ctx)
	require.NoError(t, err)
	out := map[uint64]*jetstream.RawStreamMsg{}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && seq > 0; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			continue
		}
		if !strings.HasPrefix(m.Subject, topology.DeadEventPrefix+".") {
			continue
		}
		orig, _ := strconv.ParseUint(m.Header.Get(topology.HeaderDeadSequence), 10, 64)
		out[orig] = m
	}
	return out
}

// TestPoisonOnTheEventStream publishes, by hand, messages that are not
// valid events onto SWITCHBACK_EVENTS while an upgrade runs (most on the
// subject of the node being upgraded). Each is parked in the dead-letter
// stream with its kind and reported (a Warning Event on the manager when the
// subject names it); projection and orchestration go on; the upgrade
// completes; the status is still exactly the fold of the valid history.
func TestPoisonOnTheEventStream(t *testing.T) {
	w, ref := stalledUpgrade(t, "poisoned")

	ps := poisons()
	for i, p := range ps {
		m := p.build(t, ref, fmt.Sprintf("poison/%d", i))
		_, p.aboutManager = parseManager(m.Subject, ref)
		ack, err := w.e.JS.PublishMsg(w.ctx, m)
		if p.kind == "" {
			require.Error(t, err, "%s: JetStream refuses it", p.name)
			assert.Contains(t, err.Error(), p.refusal)
			p.refusal = err.Error()
			continue
		}
		require.NoError(t, err, p.name)
		p.seq = ack.Sequence
	}
	require.NoError(t, w.sim.HealTargetMoveFailure("vol-0"))
	st := w.finish(ref, 30*time.Second)
	require.Equal(t, events.ManagerCompleted, st.State, "the upgrade completes despite the poison: %s", st.Message)
	w.onceEach(ref)
	assert.Zero(t, w.sim.IOStats().Failed)
	w.assertStatusIsReplay(ref)

	parked := waitFor(t, 20*time.Second, "every poison message dead-lettered", func() (map[uint64]*jetstream.RawStreamMsg, error) {
		return deadLetters(t, w.ctx, w.e.JS), nil
	}, func(m map[uint64]*jetstream.RawStreamMsg) bool {
		for _, p := range ps {
			if p.kind != "" && m[p.seq] == nil {
				return false
			}
		}
		return true
	})
	// Kubernetes Events of one kind about one object are folded into a
	// series by the Events API (the note of the first, a count): one
	// EventDeadLettered Warning on the manager, whatever the number.
	warnings := waitFor(t, 20*time.Second, "an EventDeadLettered Warning Event on the manager", w.warnings, func(evs []eventsv1.Event) bool {
		return len(deadLetteredEvents(evs, ref.Name)) > 0
	})
	reported := deadLetteredEvents(warnings, ref.Name)
	got, err := w.kc.Managers(w.ns).Get(w.ctx, ref.Name)
	require.NoError(t, err)
	assert.Equal(t, v1beta2.UpgradeStateCompleted, got.Status.State, "the projection went on")

	for _, p := range ps {
		t.Run(p.name, func(t *testing.T) {
			if p.kind == "" {
				c := newCase(t, "event stream: "+p.name, "refused by JetStream at publish: nothing stored")
				c.Got("publish failed: %s", p.refusal)
				return
			}
			c := newCase(t, "event stream: "+p.name, fmt.Sprintf("parked as %s in %s; upgrade completes", p.kind, topology.DeadLetterStream))
			d := parked[p.seq]
			require.NotNil(t, d)
			assert.Equal(t, p.kind, d.Header.Get(topology.HeaderDeadKind))
			report := "no Event (the subject names no manager)"
			if p.aboutManager {
				require.NotEmpty(t, reported, "Warning Event on the manager")
				report = "Warning Event " + projector.ReasonEventDeadLettered
			}
			c.Got("parked as %s (%s); %s; manager %s", d.Header.Get(topology.HeaderDeadKind),
				reasonTail(d.Header.Get(topology.HeaderDeadReason)), report, got.Status.State)
		})
	}
}

func deadLetteredEvents(evs []eventsv1.Event, manager string) []eventsv1.Event {
	var out []eventsv1.Event
	for _, ev := range evs {
		if ev.Reason == projector.ReasonEventDeadLettered && ev.Regarding.Name == manager {
			out = append(out, ev)
		}
	}
	return out
}

// reasonTail keeps what a dead-letter reason says is wrong, without the
// `decode event on "<subject>" (seq N) type "<type>": ` preamble.
func reasonTail(s string) string {
	if strings.HasPrefix(s, "decode event on ") {
		if i := strings.Index(s, "(seq "); i >= 0 {
			if j := strings.Index(s[i:], ": "); j >= 0 {
				return s[i+j+2:]
			}
		}
	}
	return s
}

// parseManager reports whether subject is a valid subject of ref's upgrade.
func parseManager(subject string, ref events.ManagerRef) (events.AggregateID, bool) {
	agg, err := events.ParseSubject(subject)
	return agg, err == nil && agg.Manager == ref
}
