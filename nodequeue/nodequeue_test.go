package nodequeue_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/natsembed/natstest"
	"github.com/switchback-dev/switchback/nodequeue"
	"github.com/switchback-dev/switchback/topology"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var mgr = events.ManagerRef{Namespace: "ns", Name: "m", UID: "u"}

func cmd(node, id string) nodequeue.Command {
	return nodequeue.Command{ID: id, Kind: nodequeue.Advance, Manager: mgr, Node: node, Attempt: 1, Step: events.NodePending, DataEngine: "v2", InstanceManagerImage: "im:2"}
}

func open(t *testing.T, cfg nodequeue.Config) (*nodequeue.Queue, jetstream.JetStream, context.Context) {
	srv := natstest.Start(t)
	_, js := natstest.Connect(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	q, err := nodequeue.Open(ctx, js, cfg)
	require.NoError(t, err)
	return q, js, ctx
}

func TestPublishDedupAndPerNodeConsumers(t *testing.T) {
	q, _, ctx := open(t, nodequeue.Config{})
	dup, err := q.Publish(ctx, cmd("node.a", "c1"))
	require.NoError(t, err)
	assert.False(t, dup)
	dup, err = q.Publish(ctx, cmd("node.a", "c1"))
	require.NoError(t, err)
	assert.True(t, dup, "a re-issued command is stored once")
	_, err = q.Publish(ctx, cmd("node-b", "c2"))
	require.NoError(t, err)

	a, err := q.NodeConsumer(ctx, "node.a")
	require.NoError(t, err)
	b, err := q.NodeConsumer(ctx, "node-b")
	require.NoError(t, err)
	for node, c := range map[string]jetstream.Consumer{"node.a": a, "node-b": b} {
		batch, err := c.Fetch(10, jetstream.FetchMaxWait(time.Second))
		require.NoError(t, err)
		var got []nodequeue.Command
		for m := range batch.Messages() {
			c, err := nodequeue.DecodeCommand(m.Data())
			require.NoError(t, err)
			got = append(got, c)
			require.NoError(t, m.Ack())
		}
		require.Len(t, got, 1, node)
		assert.Equal(t, node, got[0].Node)
	}
}

// TestAckedCommandsAreKeptNotRedelivered: an acknowledged command stays in
// the stream as a record, and neither a new fetch nor the controller
// creating the consumer again (as it does on every start) delivers it again.
func TestAckedCommandsAreKeptNotRedelivered(t *testing.T) {
	q, js, ctx := open(t, nodequeue.Config{})
	_, err := q.Publish(ctx, cmd("n1", "c1"))
	require.NoError(t, err)
	c, err := q.NodeConsumer(ctx, "n1")
	require.NoError(t, err)
	n, err := q.Outstanding(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(1), n, "waiting for its worker")
	batch, err := c.Fetch(1, jetstream.FetchMaxWait(time.Second))
	require.NoError(t, err)
	for m := range batch.Messages() {
		require.NoError(t, m.DoubleAck(ctx))
	}
	n, err = q.Outstanding(ctx)
	require.NoError(t, err)
	assert.Zero(t, n, "done")

	c, err = q.NodeConsumer(ctx, "n1")
	require.NoError(t, err)
	batch, err = c.Fetch(1, jetstream.FetchMaxWait(200*time.Millisecond))
	require.NoError(t, err)
	for m := range batch.Messages() {
		t.Fatalf("delivered again after its ack: %s", m.Subject())
	}
	info, err := c.Info(ctx)
	require.NoError(t, err)
	assert.Zero(t, info.NumPending+uint64(info.NumAckPending), "nothing left to do")
	st, err := js.Stream(ctx, topology.CommandStream)
	require.NoError(t, err)
	kept, err := st.GetLastMsgForSubject(ctx, topology.CommandSubject("n1"))
	require.NoError(t, err)
	got, err := nodequeue.DecodeCommand(kept.Data)
	require.NoError(t, err)
	assert.Equal(t, "c1", got.ID, "the command is kept as a record")
	assert.Equal(t, int64(topology.CommandsKeptPerNode), st.CachedInfo().Config.MaxMsgsPerSubject)
}

// TestOpenExplainsAWorkQueueStream: a command stream left with work-queue
// retention cannot be changed in place; Open says so and what to do.
func TestOpenExplainsAWorkQueueStream(t *testing.T) {
	srv := natstest.Start(t)
	_, js := natstest.Connect(t, srv)
	ctx := t.Context()
	_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: topology.CommandStream, Subjects: []string{topology.CommandSubjects}, Retention: jetstream.WorkQueuePolicy})
	require.NoError(t, err)
	_, err = nodequeue.Open(ctx, js, nodequeue.Config{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "work-queue retention")
	assert.Contains(t, err.Error(), "nats stream rm "+topology.CommandStream)
}

func TestPublishRejectsInvalidCommands(t *testing.T) {
	q, _, ctx := open(t, nodequeue.Config{})
	bad := []nodequeue.Command{
		{},
		func() nodequeue.Command { c := cmd("n", "x"); c.Kind = "explode"; return c }(),
		func() nodequeue.Command { c := cmd("n", "x"); c.Step = "nowhere"; return c }(),
		func() nodequeue.Command { c := cmd("", "x"); return c }(),
		func() nodequeue.Command { c := cmd("n", "x"); c.Attempt = 0; return c }(),
	}
	for _, c := range bad {
		_, err := q.Publish(ctx, c)
		assert.Error(t, err)
	}
	_, err := nodequeue.DecodeCommand([]byte("{nope"))
	assert.ErrorIs(t, err, nodequeue.ErrBadCommand)
}

func TestCommandPastMaxDeliverIsDeadLettered(t *testing.T) {
	q, js, ctx := open(t, nodequeue.Config{AckWait: 100 * time.Millisecond, MaxDeliver: 3})
	var (
		mu   sync.Mutex
		dead []nodequeue.DeadCommand
	)
	cc, err := q.WatchDeadLetters(ctx, func(_ context.Context, d nodequeue.DeadCommand) error {
		mu.Lock()
		defer mu.Unlock()
		dead = append(dead, d)
		return nil
	})
	require.NoError(t, err)
	defer cc.Stop()

	_, err = q.Publish(ctx, cmd("n1", "doomed"))
	require.NoError(t, err)
	c, err := q.NodeConsumer(ctx, "n1")
	require.NoError(t, err)
	// A worker that fails every delivery.
	deliveries := 0
	for deliveries < 3 {
		batch, err := c.Fetch(1, jetstream.FetchMaxWait(2*time.Second))
		require.NoError(t, err)
		for m := range batch.Messages() {
			deliveries++
			require.NoError(t, m.Nak())
		}
	}
	// The worker keeps pulling, as a live one does; the server then finds the
	// message past MaxDeliver and emits the advisory instead of delivering it.
	var delivered []string
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		batch, err := c.Fetch(1, jetstream.FetchMaxWait(200*time.Millisecond))
		require.NoError(ct, err)
		for m := range batch.Messages() {
			delivered = append(delivered, m.Subject())
		}
		mu.Lock()
		defer mu.Unlock()
		assert.Len(ct, dead, 1)
	}, 10*time.Second, 10*time.Millisecond)
	assert.Empty(t, delivered, "nothing is delivered past MaxDeliver")
	assert.Equal(t, "doomed", dead[0].Command.ID)
	assert.Equal(t, 3, dead[0].Deliveries)

	dlq, err := js.Stream(ctx, topology.DeadLetterStream)
	require.NoError(t, err)
	m, err := dlq.GetLastMsgForSubject(ctx, "sb.dlq.cmd.n1")
	require.NoError(t, err)
	assert.Equal(t, "max deliveries exceeded", m.Header.Get(topology.HeaderDeadReason))
	got, err := nodequeue.DecodeCommand(m.Data)
	require.NoError(t, err)
	assert.Equal(t, "doomed", got.ID)

	cmdStream, err := js.Stream(ctx, topology.CommandStream)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		info, err := cmdStream.Info(ctx)
		return err == nil && info.State.Msgs == 0
	}, 5*time.Second, 10*time.Millisecond, "the dead command left the work queue")
}
