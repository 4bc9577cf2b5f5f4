package natsauth_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/eventstore"
	"github.com/switchback-dev/switchback/natsauth"
)

// TestWorkerFloodLeavesTheControllersAppendsWorking: a worker floods
// everything its user may publish on the event stream (its own node's
// subject under 2,000 made-up managers, messages up to the stream's size
// bound, as fast as the server takes them) while the controller appends
// to its managers and every node's aggregate. Every one of the
// controller's appends succeeds; the flood's messages past the size bound
// and its rollups (which would purge other aggregates' history) are
// refused by the stream, not stored.
func TestWorkerFloodLeavesTheControllersAppendsWorking(t *testing.T) {
	d := newDeployment(t, natsauth.Config{Nodes: []string{"n1", "n2"}, Account: natsauth.DefaultAccount})
	n1 := d.connectWorker("n1")
	ctx, cancel := context.WithTimeout(d.ctx, 2*time.Minute)
	defer cancel()

	// What the stream refuses of a worker whatever its permissions.
	limit := int(eventstore.Config{}.StreamConfig().MaxMsgSize)
	huge := nats.NewMsg(events.NodeAggregate(testRef, "n1").Subject())
	huge.Data = make([]byte, limit+1)
	_, err := n1.js.PublishMsg(ctx, huge)
	var apiErr *jetstream.APIError
	require.ErrorAs(t, err, &apiErr, "a message over the size bound")
	assert.Equal(t, jetstream.JSErrCodeStreamMessageExceedsMaximum, apiErr.ErrorCode)
	rollup := nats.NewMsg(events.NodeAggregate(testRef, "n1").Subject())
	rollup.Header.Set(jetstream.MsgRollup, jetstream.MsgRollupAll)
	_, err = n1.js.PublishMsg(ctx, rollup)
	require.ErrorAs(t, err, &apiErr, "a rollup")
	assert.Contains(t, apiErr.Description, "rollup not permitted")

	const floodMsgs, managers = 20_000, 2_000
	payload := make([]byte, 4<<10)
	var flood sync.WaitGroup
	var stored, refused int
	flood.Go(func() {
		var futs []jetstream.PubAckFuture
		for i := range floodMsgs {
			ref := events.ManagerRef{Namespace: "longhorn-system", Name: fmt.Sprintf("junk-%d", i%managers), UID: fmt.Sprintf("uid-%d", i%managers)}
			m := nats.NewMsg(events.NodeAggregate(ref, "n1").Subject())
			m.Data = payload
			if i%100 == 0 {
				m.Data = make([]byte, limit-1<<10) // near the bound
			}
			f, err := n1.js.PublishMsgAsync(m)
			if err != nil {
				refused++
				continue
			}
			futs = append(futs, f)
		}
		for _, f := range futs {
			select {
			case <-f.Ok():
				stored++
			case <-f.Err():
				refused++
			case <-ctx.Done():
				return
			}
		}
	})

	// The controller meanwhile: a stream of appends to manager and node
	// aggregates, each expected at its version.
	const appends = 300
	versions := map[events.AggregateID]uint64{}
	aggs := []events.AggregateID{events.ManagerAggregate(testRef), events.NodeAggregate(testRef, "n1"), events.NodeAggregate(testRef, "n2")}
	var slowest time.Duration
	for i := range appends {
		agg := aggs[i%len(aggs)]
		var data events.Event = events.NodeResumed{Step: events.NodePending, Message: "under flood"}
		if !agg.IsNode() {
			data = events.CancelRequested{}
		}
		e := events.New(agg, events.SourceController, fmt.Sprintf("flood-%d", i), time.Now(), data)[0]
		start := time.Now()
		v, err := d.store.Append(ctx, agg, versions[agg], e)
		require.NoError(t, err, "controller append %d to %s during the flood", i, agg)
		slowest = max(slowest, time.Since(start))
		versions[agg] = v
	}
	flood.Wait()
	t.Logf("flood: %d stored, %d refused; the controller's %d appends all succeeded, the slowest in %s", stored, refused, appends, slowest)
	assert.Equal(t, floodMsgs, stored+refused, "every flood message was answered")
	for _, agg := range aggs {
		h, err := d.store.Load(ctx, agg)
		require.NoError(t, err)
		assert.Equal(t, versions[agg], h.Version, "%s: the controller's history is whole", agg)
	}
	assert.Empty(t, d.viol.All(), "the controller was refused nothing")
}
