package deadletter_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"

	"github.com/switchback-dev/switchback/deadletter"
	"github.com/switchback-dev/switchback/topology"
)

// TestMessage: a dead letter carries the original data and headers, but
// none of JetStream's own (the original id is kept aside), and says why and
// where from.
func TestMessage(t *testing.T) {
	for name, tc := range map[string]struct {
		l    deadletter.Letter
		want map[string]string
		none []string
	}{
		"a command past its deliveries": {
			l: deadletter.Letter{Subject: topology.DeadCommandSubject("n1"), Data: []byte("{}"),
				Header: nats.Header{jetstream.MsgIDHeader: {"cmd-1"}, "Sb-Command-Kind": {"advance"}},
				Reason: "max deliveries exceeded", Stream: topology.CommandStream, Sequence: 7, OriginalSubject: topology.CommandSubject("n1"),
				Consumer: topology.NodeConsumer("n1"), Deliveries: 8, ID: "dead-SWITCHBACK_COMMANDS-7", What: "command"},
			want: map[string]string{jetstream.MsgIDHeader: "dead-SWITCHBACK_COMMANDS-7", topology.HeaderDeadMsgID: "cmd-1",
				"Sb-Command-Kind": "advance", topology.HeaderDeadReason: "max deliveries exceeded", topology.HeaderDeadStream: topology.CommandStream,
				topology.HeaderDeadSequence: "7", topology.HeaderDeadSubject: "sb.cmd.node.n1", topology.HeaderDeadConsumer: "worker-n1",
				topology.HeaderDeadDelivered: "8"},
			none: []string{topology.HeaderDeadKind},
		},
		"a poison event": {
			l: deadletter.Letter{Subject: topology.DeadEventSubject("sb.evt.ns.m.u.mgr"), Data: []byte("x"),
				Header: nats.Header{"Nats-Expected-Last-Subject-Sequence": {"3"}, "Ce-Id": {"e1"}},
				Reason: "bad\nheader", Kind: "bad-header", Stream: topology.EventStream, Sequence: 9, OriginalSubject: "sb.evt.ns.m.u.mgr",
				Consumer: topology.ProjectorConsumer, ID: "dead-evt-9", What: "event"},
			want: map[string]string{jetstream.MsgIDHeader: "dead-evt-9", "Ce-Id": "e1", topology.HeaderDeadReason: "bad header",
				topology.HeaderDeadKind: "bad-header", topology.HeaderDeadSequence: "9"},
			none: []string{"Nats-Expected-Last-Subject-Sequence", topology.HeaderDeadDelivered, topology.HeaderDeadMsgID},
		},
	} {
		t.Run(name, func(t *testing.T) {
			m := tc.l.Message()
			assert.Equal(t, tc.l.Subject, m.Subject)
			assert.Equal(t, tc.l.Data, m.Data)
			for k, v := range tc.want {
				assert.Equal(t, v, m.Header.Get(k), k)
			}
			for _, k := range tc.none {
				assert.Empty(t, m.Header.Values(k), k)
			}
		})
	}
}

func TestHeaderSafe(t *testing.T) {
	assert.Equal(t, "a  b c", deadletter.HeaderSafe("a\r\nb\nc"), "one line")
	long := strings.Repeat("é", 2000) // 4000 bytes
	got := deadletter.HeaderSafe(long)
	assert.LessOrEqual(t, len(got), 2048)
	assert.True(t, utf8.ValidString(got), "cut on a rune boundary")
}
