package natsauth_test

import (
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

// TestNodeAccountsReachOnlyTheirImports proves what a worker alone in its
// node's account needs of the server, on a single server and on an R3
// cluster (where multi-event appends are atomic batches): through its
// imports it binds the streams, appends its node's events with the store's
// expectations (a stale one refused with 10071), loads them by direct batch
// get, pulls and acks every command of its queue, and wakes on its node's
// events.
func TestNodeAccountsReachOnlyTheirImports(t *testing.T) {
	for _, n := range []int{1, 3} {
		t.Run(fmt.Sprintf("R%d", n), func(t *testing.T) { nodeAccounts(t, n) })
	}
}

func nodeAccounts(t *testing.T, servers int) {
	d := nodeAccountsDeployment(t, servers, "n1", "n2")
	ctx := d.ctx
	w := d.connectWorker("n1")

	agg := events.NodeAggregate(testRef, "n1")
	woken := make(chan *nats.Msg, 8)
	_, err := w.nc.ChanSubscribe(agg.Subject(), woken)
	require.NoError(t, err)
	require.NoError(t, w.nc.Flush())
	resumed := func(id string) events.Envelope {
		return events.New(agg, events.SourceWorker, id, time.Now(), events.NodeResumed{Step: events.NodePending, Message: id})[0]
	}
	v, err := w.store.Append(ctx, agg, 0, resumed("e1"))
	require.NoError(t, err, "an append through the import")
	v, err = w.store.Append(ctx, agg, v, resumed("e2"), resumed("e3"))
	require.NoError(t, err, "a multi-event append through the import")
	_, err = w.store.Append(ctx, agg, 1, resumed("stale"))
	assert.ErrorIs(t, err, eventstore.ErrConflict, "a stale expectation is refused")
	var api *jetstream.APIError
	if assert.ErrorAs(t, err, &api) {
		assert.Contains(t, []jetstream.ErrorCode{jetstream.JSErrCodeStreamWrongLastSequence, jetstream.JSErrCodeStreamWrongLastSequenceConstant}, api.ErrorCode)
	}
	h, err := w.store.Load(ctx, agg)
	require.NoError(t, err)
	assert.Len(t, h.Events, 3)
	assert.Equal(t, v, h.Version)
	_, err = d.store.Append(ctx, agg, v, events.New(agg, events.SourceController, "cancel", time.Now(), events.NodeCancelRequested{})...)
	require.NoError(t, err)
	for seen := false; !seen; {
		select {
		case m := <-woken:
			// The worker's own appends come back too.
			seen = m.Header.Get("ce-source") == string(events.SourceController)
		case <-ctx.Done():
			t.Fatal("the worker never saw the controller's event on its node")
		}
	}

	const commands = 5
	for i := range commands {
		_, err := d.queue.Publish(ctx, command("n1", fmt.Sprintf("c%d", i)))
		require.NoError(t, err)
	}
	cons, err := w.queue.NodeConsumer(ctx, "n1")
	require.NoError(t, err)
	for got := 0; got < commands; {
		b, err := cons.Fetch(commands, jetstream.FetchMaxWait(5*time.Second))
		require.NoError(t, err)
		for m := range b.Messages() {
			require.NoError(t, m.DoubleAck(ctx), "an ack through the import")
			got++
		}
		require.NoError(t, b.Error())
	}
	ci, err := d.queue.NodeConsumer(ctx, "n1")
	require.NoError(t, err)
	info, err := ci.Info(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(commands), info.AckFloor.Consumer, "every command acked")
	assert.Empty(t, w.viol.All(), "the worker was refused nothing")
}
