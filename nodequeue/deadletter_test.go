package nodequeue_test

import (
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/nodequeue"
	"github.com/switchback-dev/switchback/topology"
)

// TestDeadLetterCannotBeHiddenByATakenID: every worker may publish dead
// letters, and a parked command's Nats-Msg-Id is deterministic. A worker that
// publishes junk under the id of another node's next dead letter must not hide
// it: the real record is stored (under a fresh id), and parking it again
// stores nothing twice.
func TestDeadLetterCannotBeHiddenByATakenID(t *testing.T) {
	q, js, ctx := open(t, nodequeue.Config{})
	_, err := q.Publish(ctx, cmd("n2", "c1"))
	require.NoError(t, err)
	cmds, err := js.Stream(ctx, topology.CommandStream)
	require.NoError(t, err)
	info, err := cmds.Info(ctx)
	require.NoError(t, err)
	seq := info.State.LastSeq

	junk := nats.NewMsg("sb.dlq.cmd.n1")
	junk.Data = []byte("junk")
	junk.Header.Set(jetstream.MsgIDHeader, fmt.Sprintf("dead-%s-%d", topology.CommandStream, seq))
	_, err = js.PublishMsg(ctx, junk)
	require.NoError(t, err)

	for range 2 { // parked twice: a redelivered advisory
		dead, ok, err := q.DeadLetterCommand(ctx, seq, topology.NodeConsumer("n2"), 5, "max deliveries")
		require.NoError(t, err)
		require.True(t, ok)
		assert.Equal(t, "n2", dead.Command.Node)
	}
	dlq, err := js.Stream(ctx, topology.DeadLetterStream)
	require.NoError(t, err)
	dinfo, err := dlq.Info(ctx, jetstream.WithSubjectFilter("sb.dlq.cmd.>"))
	require.NoError(t, err)
	assert.Equal(t, map[string]uint64{"sb.dlq.cmd.n1": 1, "sb.dlq.cmd.n2": 1}, dinfo.State.Subjects, "the junk and exactly one real record")
	m, err := dlq.GetLastMsgForSubject(ctx, "sb.dlq.cmd.n2")
	require.NoError(t, err)
	assert.Equal(t, "max deliveries", m.Header.Get(topology.HeaderDeadReason))
}

// TestDeadLetterOnlyFromTheQueuesConsumer: an advisory parks a command only
// when it names the consumer of the queue the command is on; a misrouted
// command (another node's body) is still that queue's to park.
func TestDeadLetterOnlyFromTheQueuesConsumer(t *testing.T) {
	q, js, ctx := open(t, nodequeue.Config{})
	_, err := q.Publish(ctx, cmd("n2", "c1"))
	require.NoError(t, err)
	misrouted, err := js.Publish(ctx, topology.CommandSubject("n1"), []byte(`{"id":"m1","kind":"advance","node":"n2"}`))
	require.NoError(t, err)
	cmds, err := js.Stream(ctx, topology.CommandStream)
	require.NoError(t, err)
	m, err := cmds.GetLastMsgForSubject(ctx, topology.CommandSubject("n2"))
	require.NoError(t, err)

	for _, c := range []struct {
		name     string
		seq      uint64
		consumer string
		parked   bool
	}{
		{"another node's consumer", m.Sequence, topology.NodeConsumer("n1"), false},
		{"no consumer", m.Sequence, "", false},
		{"the dead-letterer's", m.Sequence, "dead-letterer", false},
		{"the queue's own consumer", m.Sequence, topology.NodeConsumer("n2"), true},
		{"misrouted, the queue's consumer", misrouted.Sequence, topology.NodeConsumer("n1"), true},
		{"misrouted, the node its body names", misrouted.Sequence, topology.NodeConsumer("n2"), false},
	} {
		_, ok, err := q.DeadLetterCommand(ctx, c.seq, c.consumer, 1, "refused")
		if c.parked {
			assert.NoError(t, err, c.name)
			assert.True(t, ok, c.name)
			continue
		}
		assert.ErrorIs(t, err, nodequeue.ErrForeignAdvisory, c.name)
		assert.False(t, ok, c.name)
	}
}
