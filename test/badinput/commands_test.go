package badinput_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/aggregate/nodeupgrade"
	"github.com/switchback-dev/switchback/commands"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/eventstore"
	"github.com/switchback-dev/switchback/nodequeue"
	"github.com/switchback-dev/switchback/sim"
	"github.com/switchback-dev/switchback/test/harness/enginetest"
	"github.com/switchback-dev/switchback/topology"
)

// badCommand is one message published by hand on a node's command queue.
type badCommand struct {
	name, expected string
	node           string // whose queue
	body           func(real events.ManagerRef) []byte
	// dlqSubject is where it must be parked; "" = it must not be.
	dlqSubject string
	// reason (and more) are substrings of the dead-letter reason.
	reason string
	more   []string
	// bug, when set, is the fix needed for the expected behaviour, and
	// notDead the behaviour seen meanwhile.
	bug string

	seq uint64
}

var ghost = events.ManagerRef{Namespace: "longhorn-system", Name: "never-created", UID: "uid-ghost"}

func commandJSON(c nodequeue.Command) []byte {
	b, err := json.Marshal(c)
	if err != nil {
		panic(err)
	}
	return b
}

func advance(ref events.ManagerRef, node string, step events.NodeState, id string) nodequeue.Command {
	return nodequeue.Command{ID: id, Kind: nodequeue.Advance, Manager: ref, Node: node, Attempt: 1, Step: step,
		DataEngine: "v2", InstanceManagerImage: sim.NewIMImage, IssuedAt: time.Now()}
}

// TestBadCommands publishes bad commands on the node queues while an
// upgrade runs. Undecodable and misrouted ones are refused by the worker at
// once and parked by the controller; commands no worker can carry out are
// retried up to MaxDeliver, then parked by the controller. None changes any aggregate, and the upgrade
// completes.
func TestBadCommands(t *testing.T) {
	cluster := threeNodes(t)
	require.NoError(t, cluster.InjectTargetMoveFailure("vol-0")) // hold n1 (planned last) in switching-over
	e := engineOnly(t, cluster, enginetest.Options{AckWait: 300 * time.Millisecond, MaxDeliver: 3, StallAfter: 200 * time.Millisecond})
	ref := events.ManagerRef{Namespace: "longhorn-system", Name: "commanded", UID: "uid-commanded"}
	e.Request(ref)
	e.WaitNode(ref, "n1", 20*time.Second, "stalled in switching-over", func(n nodeupgrade.State) bool { return n.Stalled })

	cases := []*badCommand{
		{name: "command for an unknown manager (start step)", node: "n1",
			expected: "dead-lettered (unknown manager); no event anywhere",
			body: func(events.ManagerRef) []byte {
				return commandJSON(advance(ghost, "n1", events.NodePending, "ghost-start"))
			},
			dlqSubject: "sb.dlq.cmd.n1", reason: "unknown manager"},
		{name: "command for an unknown manager (mid-upgrade step)", node: "n1",
			expected: "retried MaxDeliver times, dead-lettered by the controller; no event anywhere",
			body: func(events.ManagerRef) []byte {
				return commandJSON(advance(ghost, "n1", events.NodeSwitchingOver, "ghost-step"))
			},
			dlqSubject: "sb.dlq.cmd.n1", reason: "max deliveries exceeded"},
		{name: "malformed command JSON", node: "n1",
			expected:   "refused by the worker, parked under sb.dlq.cmd.unknown with the parse error",
			body:       func(events.ManagerRef) []byte { return []byte(`{"id": "half`) },
			dlqSubject: "sb.dlq.cmd.unknown", reason: "bad command: unexpected end of JSON input"},
		{name: "empty command body", node: "n1",
			expected:   "refused by the worker, parked under sb.dlq.cmd.unknown",
			body:       func(events.ManagerRef) []byte { return nil },
			dlqSubject: "sb.dlq.cmd.unknown", reason: "bad command"},
		{name: "command with invalid fields (kind, attempt, step)", node: "n1",
			expected: "refused by the worker, parked, the reason listing every problem",
			body: func(r events.ManagerRef) []byte {
				c := advance(r, "n1", "teleporting", "invalid-fields")
				c.Kind, c.Attempt = "teleport", 0
				return commandJSON(c)
			},
			dlqSubject: "sb.dlq.cmd.unknown", reason: `unknown kind "teleport"`,
			more: []string{"attempt 0 must be >= 1", `unknown step "teleporting"`}},
		{name: "command for n2 published on n1's queue", node: "n1",
			expected: "refused by n1's worker, parked under sb.dlq.cmd.n2; n2 untouched",
			body: func(r events.ManagerRef) []byte {
				return commandJSON(advance(r, "n2", events.NodeInitializing, "misrouted"))
			},
			dlqSubject: "sb.dlq.cmd.n2", reason: `is for node "n2"`},
		{name: "stale start command for a node already completed", node: "n2",
			expected: "recognised as done and acked; nothing happens",
			body: func(r events.ManagerRef) []byte {
				return commandJSON(advance(r, "n2", events.NodePending, "stale-start"))
			}},
	}
	for _, c := range cases {
		ack, err := e.JS.PublishMsg(e.Context(), &nats.Msg{Subject: topology.CommandSubject(c.node), Data: c.body(ref), Header: nats.Header{}})
		require.NoError(t, err, c.name)
		c.seq = ack.Sequence
	}
	require.NoError(t, cluster.HealTargetMoveFailure("vol-0"))
	st := e.WaitManager(ref, 30*time.Second, "a terminal state", terminal)
	require.Equal(t, events.ManagerCompleted, st.State, "the upgrade completes despite the bad commands: %s", st.Message)
	for key, n := range enginetest.Transitions(e.History(ref)) {
		assert.Equal(t, 1, n, "transition %q appears once", key)
	}
	assert.Zero(t, cluster.IOStats().Failed)

	// The queues drain: every command was acked or parked.
	waitFor(t, 20*time.Second, "the command queue drained", func() (uint64, error) {
		return e.Queue.Outstanding(e.Context())
	}, func(n uint64) bool { return n == 0 })
	// Workers refuse; the controller parks from JetStream's advisories, a
	// moment after the queue drained.
	parked := 0
	for _, c := range cases {
		if c.dlqSubject != "" {
			parked++
		}
	}
	dead := waitFor(t, 20*time.Second, "every refused or exhausted command parked", func() (map[uint64]*jetstream.RawStreamMsg, error) {
		return deadCommands(t, e), nil
	}, func(d map[uint64]*jetstream.RawStreamMsg) bool { return len(d) >= parked })
	ghostEvents := 0
	err := e.Store.Scan(e.Context(), eventstore.ScanOptions{Subjects: []string{events.ManagerSubjectPrefix(ghost) + ".>"}},
		func(events.Envelope) error { ghostEvents++; return nil }, nil)
	require.NoError(t, err)
	l, err := commands.New(commands.Config{Store: e.Store}).Managers.Load(e.Context(), events.ManagerAggregate(ghost))
	require.NoError(t, err)
	require.False(t, l.State.Exists, "the unknown manager was not created by a command")
	require.Zero(t, ghostEvents, "no event was appended for the unknown manager")

	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := newCase(t, "commands: "+c.name, c.expected)
			d := dead[c.seq]
			if c.bug != "" {
				require.Nil(t, d, "still not dead-lettered: remove the bug note")
				b.Got("acked and dropped: not in %s, nothing else happened (upgrade %s)", topology.DeadLetterStream, st.State)
				b.Bug("%s", c.bug)
			}
			if c.dlqSubject == "" {
				assert.Nil(t, d, "not dead-lettered")
				b.Got("acked, nothing happened; upgrade %s", st.State)
				return
			}
			require.NotNil(t, d, "dead-lettered")
			assert.Equal(t, c.dlqSubject, d.Subject)
			for _, r := range append([]string{c.reason}, c.more...) {
				assert.Contains(t, d.Header.Get(topology.HeaderDeadReason), r)
			}
			b.Got("%s: %s after %s deliveries; upgrade %s", d.Subject, clip(d.Header.Get(topology.HeaderDeadReason), 70),
				d.Header.Get(topology.HeaderDeadDelivered), st.State)
		})
	}
}

// deadCommands indexes the dead-lettered commands by their queue sequence.
func deadCommands(t *testing.T, e *enginetest.Engine) map[uint64]*jetstream.RawStreamMsg {
	t.Helper()
	s, err := e.JS.Stream(e.Context(), topology.DeadLetterStream)
	require.NoError(t, err)
	info, err := s.Info(e.Context())
	require.NoError(t, err)
	out := map[uint64]*jetstream.RawStreamMsg{}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && seq > 0; seq++ {
		m, err := s.GetMsg(e.Context(), seq)
		if err != nil || !strings.HasPrefix(m.Subject, "sb.dlq.cmd.") {
			continue
		}
		orig, _ := strconv.ParseUint(m.Header.Get(topology.HeaderDeadSequence), 10, 64)
		out[orig] = m
	}
	return out
}
