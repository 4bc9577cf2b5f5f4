package natsauth_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/eventstore"
	"github.com/switchback-dev/switchback/natsauth"
	"github.com/switchback-dev/switchback/nodequeue"
	"github.com/switchback-dev/switchback/topology"
)

// wallAPIPrefix is where a node account's imports put JetStream's API:
// apart from "$JS.API.", which every account without JetStream imports
// from the system account.
const wallAPIPrefix = "$SB.API."

// wallConfig is a server configuration with the streams in account SB and
// each node's worker alone in an account of its own without JetStream,
// importing from SB only its own node's subjects and the reads every
// worker makes.
func wallConfig(nodes []string) string {
	var b strings.Builder
	var accounts []string
	for _, n := range nodes {
		accounts = append(accounts, "N_"+n)
	}
	shared := []string{"$JS.API.INFO",
		"$JS.API.STREAM.INFO." + topology.EventStream, "$JS.API.STREAM.INFO." + topology.CommandStream,
		"$JS.API.STREAM.INFO." + topology.DeadLetterStream, "$JS.API.STREAM.INFO." + topology.KVStream(topology.SnapshotBucket),
		"$JS.API.STREAM.MSG.GET." + topology.EventStream, "$JS.API.DIRECT.GET." + topology.KVStream(topology.SnapshotBucket) + ".>"}
	streamed := []string{"$JS.API.DIRECT.GET." + topology.EventStream}
	b.WriteString("accounts {\n SB {\n  jetstream: enabled\n  users: [{user: controller, password: controller}]\n  exports: [\n")
	for _, s := range shared {
		fmt.Fprintf(&b, "   {service: %q, accounts: [%s]}\n", s, strings.Join(accounts, ", "))
	}
	for _, s := range streamed {
		fmt.Fprintf(&b, "   {service: %q, accounts: [%s], response: stream, response_threshold: \"1m\"}\n", s, strings.Join(accounts, ", "))
	}
	own := func(n string) (services, streamedServices []string) {
		c := topology.NodeConsumer(n)
		return []string{"$JS.API.CONSUMER.INFO." + topology.CommandStream + "." + c, topology.Acks(topology.CommandStream, c), events.NodeSubjects(n)},
			[]string{"$JS.API.CONSUMER.MSG.NEXT." + topology.CommandStream + "." + c}
	}
	for _, n := range nodes {
		services, streamedServices := own(n)
		for _, s := range services {
			fmt.Fprintf(&b, "   {service: %q, accounts: [N_%s]}\n", s, n)
		}
		for _, s := range streamedServices {
			fmt.Fprintf(&b, "   {service: %q, accounts: [N_%s], response: stream, response_threshold: \"1m\"}\n", s, n)
		}
		fmt.Fprintf(&b, "   {stream: %q, accounts: [N_%s]}\n", events.NodeSubjects(n), n)
	}
	b.WriteString("  ]\n }\n")
	for _, n := range nodes {
		fmt.Fprintf(&b, " N_%s {\n  users: [{user: %s, password: %s}]\n  imports: [\n", n, n, n)
		services, streamedServices := own(n)
		for _, s := range append(append(append(shared, streamed...), services...), streamedServices...) {
			fmt.Fprintf(&b, "   {service: {account: SB, subject: %q}, to: %q}\n", s, strings.Replace(s, topology.JSAPI, wallAPIPrefix, 1))
		}
		fmt.Fprintf(&b, "   {stream: {account: SB, subject: %q}}\n", events.NodeSubjects(n))
		b.WriteString("  ]\n }\n")
	}
	b.WriteString("}\n")
	return b.String()
}

// TestNodeAccountsReachOnlyTheirImports proves the server behaviour an
// account per worker rests on, on a single server and on an R3 cluster
// (where multi-event appends are atomic batches): through its imports a
// worker binds the streams, appends its node's events with the store's
// expectations (a stale one refused with 10071), loads them by direct batch
// get, pulls and acks every command of its queue, and wakes on its node's
// events; and a reply it redirects onto JetStream's API lands in its own
// account, where nothing acts on it, the streams left as they were.
func TestNodeAccountsReachOnlyTheirImports(t *testing.T) {
	for _, n := range []int{1, 3} {
		t.Run(fmt.Sprintf("R%d", n), func(t *testing.T) { nodeAccounts(t, n) })
	}
}

func nodeAccounts(t *testing.T, replicas int) {
	conf := wallConfig([]string{"n1", "n2"})
	_, connect := startServers(t, replicas, func(o *server.Options) { require.NoError(t, o.ProcessConfigString(conf)) })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	ctl, err := connect(nats.UserInfo("controller", "controller"))
	require.NoError(t, err)
	cjs, err := jetstream.New(ctl)
	require.NoError(t, err)
	var store *eventstore.Store
	eventually(t, 30*time.Second, "the controller creates the event stream", func() bool {
		store, err = eventstore.Open(ctx, cjs, eventstore.Config{Replicas: replicas})
		return err == nil
	})
	q, err := nodequeue.Open(ctx, cjs, nodequeue.Config{Replicas: replicas})
	require.NoError(t, err)
	_, err = q.NodeConsumer(ctx, "n1")
	require.NoError(t, err)

	wc, err := connect(nats.UserInfo("n1", "n1"), nats.CustomInboxPrefix(natsauth.InboxPrefix("n1")))
	require.NoError(t, err)
	wjs, err := jetstream.NewWithAPIPrefix(wc, strings.TrimSuffix(wallAPIPrefix, "."))
	require.NoError(t, err)
	bound := natsauth.BindOnly(wjs)
	wstore, err := eventstore.Open(ctx, bound, eventstore.Config{Replicas: replicas, ReadOnlySnapshots: true})
	require.NoError(t, err, "the worker binds the event stream")
	wq, err := nodequeue.Open(ctx, bound, q.Config())
	require.NoError(t, err, "the worker binds the queue")

	agg := events.NodeAggregate(testRef, "n1")
	woken := make(chan *nats.Msg, 8)
	_, err = wc.ChanSubscribe(agg.Subject(), woken)
	require.NoError(t, err)
	require.NoError(t, wc.Flush())
	resumed := func(id string) events.Envelope {
		return events.New(agg, events.SourceWorker, id, time.Now(), events.NodeResumed{Step: events.NodePending, Message: id})[0]
	}
	v, err := wstore.Append(ctx, agg, 0, resumed("e1"))
	require.NoError(t, err, "an append through the import")
	v, err = wstore.Append(ctx, agg, v, resumed("e2"), resumed("e3"))
	require.NoError(t, err, "a multi-event append through the import")
	_, err = wstore.Append(ctx, agg, 1, resumed("stale"))
	assert.ErrorIs(t, err, eventstore.ErrConflict, "a stale expectation is refused")
	h, err := wstore.Load(ctx, agg)
	require.NoError(t, err)
	assert.Len(t, h.Events, 3)
	assert.Equal(t, v, h.Version)
	_, err = store.Append(ctx, agg, v, events.New(agg, events.SourceController, "cancel", time.Now(), events.NodeCancelRequested{})...)
	require.NoError(t, err)
	select {
	case m := <-woken:
		_ = m // the worker's own appends come back too; any will do
	case <-ctx.Done():
		t.Fatal("the worker never saw its node's events")
	}

	const commands = 5
	for i := range commands {
		_, err := q.Publish(ctx, command("n1", fmt.Sprintf("c%d", i)))
		require.NoError(t, err)
	}
	cons, err := wq.NodeConsumer(ctx, "n1")
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

	// The attack on a worker in the streams' account: a direct get whose
	// reply names STREAM.DELETE. Here the answer comes back to n1's account.
	before, err := cjs.Stream(ctx, topology.EventStream)
	require.NoError(t, err)
	target := topology.JSAPI + "STREAM.DELETE." + topology.EventStream
	landed, err := wc.SubscribeSync(target)
	require.NoError(t, err, "n1 may listen on its own account's subjects")
	require.NoError(t, wc.PublishRequest(wallAPIPrefix+"DIRECT.GET."+topology.EventStream, target, fmt.Appendf(nil, `{"seq":%d}`, h.Version)))
	m, err := landed.NextMsg(10 * time.Second)
	require.NoError(t, err, "the answer lands in n1's account")
	assert.Equal(t, agg.Subject(), m.Header.Get("Nats-Subject"), "the answer is the direct get's")
	after, err := cjs.Stream(ctx, topology.EventStream)
	require.NoError(t, err, "the event stream is still there")
	assert.Equal(t, before.CachedInfo().Created, after.CachedInfo().Created)
	assert.Equal(t, before.CachedInfo().State.LastSeq, after.CachedInfo().State.LastSeq)
	ci, err := q.NodeConsumer(ctx, "n1")
	require.NoError(t, err)
	info, err := ci.Info(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(commands), info.AckFloor.Consumer, "every command acked")
}
