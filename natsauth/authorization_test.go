package natsauth_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/eventstore"
	"github.com/switchback-dev/switchback/natsauth"
	"github.com/switchback-dev/switchback/sim"
	"github.com/switchback-dev/switchback/workqueue"
)

var testRef = events.ManagerRef{Namespace: "longhorn-system", Name: "upgrade-v2", UID: "3f0c9d1e-uid"}

// started is a valid first event of node's upgrade under testRef.
func started(node, causation string) events.Envelope {
	return events.New(events.NodeAggregate(testRef, node), events.SourceWorker+"/"+node, causation, time.Now(),
		events.NodeUpgradeStarted{Node: node, DataEngine: "v2", InstanceManagerImage: sim.NewIMImage, Attempt: 1})[0]
}

func command(node, id string) workqueue.Command {
	return workqueue.Command{ID: id, Kind: workqueue.Advance, Manager: testRef, Node: node, Attempt: 1,
		Step: events.NodePending, DataEngine: "v2", InstanceManagerImage: sim.NewIMImage, IssuedAt: time.Now()}
}

// matrixRow is one line of the permission matrix printed by the test.
type matrixRow struct{ who, action, result string }

// TestWorkerPermissions proves, on a server running the generated
// authorization, what a worker may do (its own node's commands and events)
// and what it may not (anything of another node, any stream or consumer
// administration), and that every refusal is a permissions violation naming
// the subject.
func TestWorkerPermissions(t *testing.T) {
	d := newDeployment(t, natsauth.Config{Nodes: []string{"n1", "n2"}})
	n1 := d.connectWorker("n1")
	n2 := d.connectWorker("n2")
	ctx := d.ctx
	var matrix []matrixRow
	allowed := func(who, action string) { matrix = append(matrix, matrixRow{who, action, "allowed"}) }
	refused := func(who, action string, err error) {
		t.Logf("%s: %s: %v", who, action, err)
		matrix = append(matrix, matrixRow{who, action, "DENIED"})
	}

	// --- What the worker must be able to do. ---
	_, err := d.queue.Publish(ctx, command("n1", "cmd-n1-1"))
	require.NoError(t, err)
	own, err := n1.js.Consumer(ctx, workqueue.CommandStream, workqueue.ConsumerName("n1"))
	require.NoError(t, err, "consumer info on its own consumer")
	batch, err := own.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	require.NoError(t, err)
	var msgs []jetstream.Msg
	for m := range batch.Messages() {
		msgs = append(msgs, m)
	}
	require.Len(t, msgs, 1, "pulls its own node's command")
	require.NoError(t, msgs[0].DoubleAck(ctx), "acks its own node's command")
	allowed("worker n1", "pull + ack its node's commands (worker-n1)")

	agg1 := events.NodeAggregate(testRef, "n1")
	v, err := n1.store.Append(ctx, agg1, 0, started("n1", "own"))
	require.NoError(t, err, "appends its own node's event")
	h, err := n1.store.Load(ctx, agg1)
	require.NoError(t, err, "loads its node's history (direct batch get)")
	require.Len(t, h.Events, 1)
	require.Equal(t, v, h.Version)
	allowed("worker n1", "append + load its node's events (sb.evt.*.*.*.node.n1)")

	require.NoError(t, n1.store.SaveSnapshot(ctx, agg1, "test/v1", v, map[string]string{"k": "v"}), "writes a snapshot")
	l, err := eventstore.LoadState(ctx, n1.store, agg1, map[string]string{}, func(s map[string]string, _ events.Envelope) (map[string]string, error) { return s, nil },
		&eventstore.Snapshotting{Schema: "test/v1"})
	require.NoError(t, err, "reads a snapshot")
	require.Equal(t, v, l.SnapshotSeq, "the snapshot was used")
	allowed("worker n1", "get snapshots, put its node's (KV switchback-snapshots node.n1.*)")

	// A conflict makes the store ask the stream leader for the subject's
	// last message: a worker must be able to, or it could never recover
	// from one.
	_, err = n1.store.Append(ctx, agg1, 0, started("n1", "stale"))
	var conflict *eventstore.ConflictError
	require.ErrorAs(t, err, &conflict, "a stale append is a clean conflict, not a timeout")
	allowed("worker n1", "resolve an append conflict (STREAM.MSG.GET on the event stream)")

	_, err = d.queue.Publish(ctx, command("n1", "cmd-n1-bad"))
	require.NoError(t, err)
	info, err := d.queue.CommandStreamInfo(ctx)
	require.NoError(t, err)
	dead, ok, err := n1.queue.DeadLetterCommand(ctx, info.State.LastSeq, workqueue.ConsumerName("n1"), 1, "test")
	require.NoError(t, err, "parks a command of its node in the dead-letter stream")
	require.True(t, ok)
	require.Equal(t, "cmd-n1-bad", dead.Command.ID)
	require.NoError(t, d.queue.RemoveCommand(ctx, info.State.LastSeq))
	allowed("worker n1", "dead-letter a bad command on its queue (sb.dlq.cmd.*)")

	// --- What it must not be able to do. ---
	before := streamState(t, d)

	// Pull n2's commands.
	_, err = d.queue.Publish(ctx, command("n2", "cmd-n2-1"))
	require.NoError(t, err)
	next := "$JS.API.CONSUMER.MSG.NEXT." + workqueue.CommandStream + "." + workqueue.ConsumerName("n2")
	refused("worker n1", "pull node n2's commands", denied(t, n1.viol, next, func(ctx context.Context) error {
		_, err := n1.nc.RequestWithContext(ctx, next, []byte(`{"batch":1,"expires":200000000}`))
		return err
	}))
	infoSubj := "$JS.API.CONSUMER.INFO." + workqueue.CommandStream + "." + workqueue.ConsumerName("n2")
	refused("worker n1", "look up node n2's consumer", denied(t, n1.viol, infoSubj, func(ctx context.Context) error {
		_, err := n1.js.Consumer(ctx, workqueue.CommandStream, workqueue.ConsumerName("n2"))
		return err
	}))

	// Ack n2's command: n2 pulls it and does not ack; n1 tries with the
	// delivery's ack subject. The command must come back to n2.
	c2, err := n2.js.Consumer(ctx, workqueue.CommandStream, workqueue.ConsumerName("n2"))
	require.NoError(t, err)
	b2, err := c2.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	require.NoError(t, err)
	var pending jetstream.Msg
	for m := range b2.Messages() {
		pending = m
	}
	require.NotNil(t, pending, "n2 got its command")
	ackSubj := pending.Reply()
	require.True(t, strings.HasPrefix(ackSubj, "$JS.ACK."+workqueue.CommandStream+"."+workqueue.ConsumerName("n2")+"."))
	refused("worker n1", "ack node n2's command", denied(t, n1.viol, ackSubj, func(ctx context.Context) error {
		_, err := n1.nc.RequestWithContext(ctx, ackSubj, []byte("+ACK"))
		return err
	}))
	redelivered, err := c2.Fetch(1, jetstream.FetchMaxWait(3*queueConfig.AckWait))
	require.NoError(t, err)
	var again jetstream.Msg
	for m := range redelivered.Messages() {
		again = m
	}
	require.NotNil(t, again, "the command n1 tried to ack came back to n2 after AckWait: nothing was acked")
	meta, err := again.Metadata()
	require.NoError(t, err)
	assert.Equal(t, uint64(2), meta.NumDelivered)
	require.NoError(t, again.DoubleAck(ctx))

	// Publish n2's events, a manager's events, commands.
	agg2 := events.NodeAggregate(testRef, "n2")
	refused("worker n1", "append node n2's events", denied(t, n1.viol, agg2.Subject(), func(ctx context.Context) error {
		_, err := n1.store.Append(ctx, agg2, 0, started("n2", "forged"))
		return err
	}))
	mgrSubj := events.ManagerAggregate(testRef).Subject()
	refused("worker n1", "append a manager's events", denied(t, n1.viol, mgrSubj, func(ctx context.Context) error {
		_, err := n1.js.Publish(ctx, mgrSubj, []byte("{}"))
		return err
	}))
	for _, node := range []string{"n2", "n1"} {
		subj := workqueue.Subject(node)
		refused("worker n1", "issue a command to "+node, denied(t, n1.viol, subj, func(ctx context.Context) error {
			_, err := n1.js.Publish(ctx, subj, []byte("{}"))
			return err
		}))
	}
	// The max-deliveries advisories are what makes the controller fail a
	// node: forging one must be impossible.
	adv := "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES." + workqueue.CommandStream + "." + workqueue.ConsumerName("n2")
	refused("worker n1", "forge a max-deliveries advisory", denied(t, n1.viol, adv, func(ctx context.Context) error {
		_, err := n1.js.Publish(ctx, adv, []byte(`{"stream_seq":1}`))
		return err
	}))
	snapOther := "$KV." + eventstore.DefaultSnapshotBucket + ".other.key"
	refused("worker n1", "write a KV key outside the snapshot keys", denied(t, n1.viol, snapOther, func(ctx context.Context) error {
		_, err := n1.js.Publish(ctx, snapOther, []byte("x"))
		return err
	}))

	// Administration: streams and consumers.
	for _, c := range []struct {
		action, subject string
		op              func(ctx context.Context) error
	}{
		{"create a stream", "$JS.API.STREAM.CREATE.EVIL", func(ctx context.Context) error {
			_, err := n1.js.CreateStream(ctx, jetstream.StreamConfig{Name: "EVIL", Subjects: []string{"evil.>"}})
			return err
		}},
		{"update the event stream (e.g. MaxMsgs=1)", "$JS.API.STREAM.UPDATE." + eventstore.DefaultStream, func(ctx context.Context) error {
			cfg := eventstore.Config{}.StreamConfig()
			cfg.MaxMsgs = 1
			_, err := n1.js.UpdateStream(ctx, cfg)
			return err
		}},
		{"delete the event stream", "$JS.API.STREAM.DELETE." + eventstore.DefaultStream, func(ctx context.Context) error {
			return n1.js.DeleteStream(ctx, eventstore.DefaultStream)
		}},
		{"purge the command stream", "$JS.API.STREAM.PURGE." + workqueue.CommandStream, func(ctx context.Context) error {
			s, err := n1.js.Stream(ctx, workqueue.CommandStream)
			if err != nil {
				return err
			}
			return s.Purge(ctx)
		}},
		{"delete a command", "$JS.API.STREAM.MSG.DELETE." + workqueue.CommandStream, func(ctx context.Context) error {
			s, err := n1.js.Stream(ctx, workqueue.CommandStream)
			if err != nil {
				return err
			}
			return s.DeleteMsg(ctx, 1)
		}},
		{"create a consumer on node n2's commands", "$JS.API.CONSUMER.CREATE." + workqueue.CommandStream + ".thief." + workqueue.Subject("n2"), func(ctx context.Context) error {
			_, err := n1.js.CreateOrUpdateConsumer(ctx, workqueue.CommandStream, jetstream.ConsumerConfig{Durable: "thief", FilterSubject: workqueue.Subject("n2"), AckPolicy: jetstream.AckExplicitPolicy})
			return err
		}},
		{"create (or update) even its own consumer", "$JS.API.CONSUMER.CREATE." + workqueue.CommandStream + "." + workqueue.ConsumerName("n1") + "." + workqueue.Subject("n1"), func(ctx context.Context) error {
			_, err := n1.js.CreateOrUpdateConsumer(ctx, workqueue.CommandStream, jetstream.ConsumerConfig{Durable: workqueue.ConsumerName("n1"), FilterSubject: workqueue.Subject("n1"), AckPolicy: jetstream.AckExplicitPolicy, MaxDeliver: 1000})
			return err
		}},
		{"create an ephemeral consumer on the event stream", "$JS.API.CONSUMER.CREATE." + eventstore.DefaultStream + ".peek", func(ctx context.Context) error {
			_, err := n1.js.CreateConsumer(ctx, eventstore.DefaultStream, jetstream.ConsumerConfig{Name: "peek", AckPolicy: jetstream.AckNonePolicy})
			return err
		}},
		{"delete node n2's consumer", "$JS.API.CONSUMER.DELETE." + workqueue.CommandStream + "." + workqueue.ConsumerName("n2"), func(ctx context.Context) error {
			return n1.js.DeleteConsumer(ctx, workqueue.CommandStream, workqueue.ConsumerName("n2"))
		}},
	} {
		refused("worker n1", c.action, denied(t, n1.viol, c.subject, c.op))
	}

	// Subscriptions outside its inbox.
	for _, subj := range []string{"sb.evt.>", "sb.cmd.>", "_INBOX.>", natsauth.InboxPrefix("n2") + ".>"} {
		sub, err := n1.nc.SubscribeSync(subj)
		require.NoError(t, err, "the client API accepts the subscription; the server refuses it")
		refused("worker n1", "subscribe to "+subj, denied(t, n1.viol, subj, func(ctx context.Context) error {
			_, err := sub.NextMsgWithContext(ctx)
			return err
		}))
	}

	// Nothing of the above changed anything.
	after := streamState(t, d)
	assert.Equal(t, before.eventsLast, after.eventsLast, "no event was stored by the refused appends")
	assert.Equal(t, before.eventsCfg.MaxMsgs, after.eventsCfg.MaxMsgs, "the event stream's limits are intact")
	assert.Equal(t, before.consumers, after.consumers, "no consumer was created or deleted")
	assert.Equal(t, before.streams, after.streams, "no stream was created or deleted")
	assert.Empty(t, n2.viol.All(), "n2 did nothing it may not")

	// The controller, by contrast, administers everything.
	_, err = d.js.CreateOrUpdateConsumer(ctx, workqueue.CommandStream, jetstream.ConsumerConfig{Durable: "ctl-probe", FilterSubject: workqueue.Subject("n3"), AckPolicy: jetstream.AckExplicitPolicy})
	require.NoError(t, err)
	require.NoError(t, d.js.DeleteConsumer(ctx, workqueue.CommandStream, "ctl-probe"))
	_, err = d.store.Append(ctx, agg2, 0, started("n2", "controller"))
	require.NoError(t, err, "the controller writes node aggregates (cancel and dead-letter paths)")
	assert.Empty(t, d.viol.All(), "the controller was refused nothing")
	matrix = append(matrix,
		matrixRow{"controller", "create/delete consumers, append to any aggregate", "allowed"},
	)

	var b strings.Builder
	fmt.Fprintf(&b, "\n%-11s | %-66s | %s\n%s\n", "user", "action", "result", strings.Repeat("-", 92))
	for _, r := range matrix {
		fmt.Fprintf(&b, "%-11s | %-66s | %s\n", r.who, r.action, r.result)
	}
	t.Log(b.String())
}

type state struct {
	eventsLast uint64
	eventsCfg  jetstream.StreamConfig
	consumers  map[string][]string
	streams    []string
}

func streamState(t *testing.T, d *deployment) state {
	t.Helper()
	s, err := d.js.Stream(d.ctx, eventstore.DefaultStream)
	require.NoError(t, err)
	info, err := s.Info(d.ctx)
	require.NoError(t, err)
	out := state{eventsLast: info.State.LastSeq, eventsCfg: info.Config, consumers: map[string][]string{}}
	names := d.js.StreamNames(d.ctx)
	for n := range names.Name() {
		out.streams = append(out.streams, n)
		st, err := d.js.Stream(d.ctx, n)
		require.NoError(t, err)
		cs := st.ConsumerNames(d.ctx)
		for c := range cs.Name() {
			out.consumers[n] = append(out.consumers[n], c)
		}
	}
	require.NoError(t, names.Err())
	return out
}

// TestWorkerWithoutBindOnlyFailsClearly shows why the worker command must
// bind rather than create: eventstore.Open's create-or-update is a stream
// update, which the worker may not do, and the violation says so.
func TestWorkerWithoutBindOnlyFailsClearly(t *testing.T) {
	d := newDeployment(t, natsauth.Config{Nodes: []string{"n1"}})
	u, _ := d.auth.Worker("n1")
	nc, v := d.connect(u)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	subj := "$JS.API.STREAM.UPDATE." + eventstore.DefaultStream
	err = denied(t, v, subj, func(ctx context.Context) error {
		_, err := eventstore.Open(ctx, js, eventstore.Config{})
		return err
	})
	assert.ErrorIs(t, err, nats.ErrPermissionViolation)
	assert.ErrorIs(t, err, context.DeadlineExceeded, "on its own, the error is only a timeout: Explain adds the cause")
	t.Logf("what the worker reports: %v", err)
}

// TestWorkerWaitsForItsConsumer: a worker bound to the streams but started
// before the controller created its consumer fails with an error saying
// what is missing and who creates it.
func TestWorkerWaitsForItsConsumer(t *testing.T) {
	auth, err := natsauth.Generate(natsauth.Config{Nodes: []string{"n1", "late"}})
	require.NoError(t, err)
	d := startDeployment(t, auth)
	require.NoError(t, d.js.DeleteConsumer(d.ctx, workqueue.CommandStream, workqueue.ConsumerName("late")))
	w := d.connectWorker("late")
	_, err = w.queue.NodeConsumer(d.ctx, "late")
	require.ErrorIs(t, err, jetstream.ErrConsumerNotFound)
	assert.Contains(t, err.Error(), "EnsureNodeConsumers")
	require.NoError(t, natsauth.EnsureNodeConsumers(d.ctx, d.queue, "late"))
	_, err = w.queue.NodeConsumer(d.ctx, "late")
	require.NoError(t, err, "bound once the controller created it")
	assert.Empty(t, w.viol.All())
}

// TestWorkerCannotOverwriteAnotherNodesSnapshot: snapshot keys name their
// node, so a worker's user may write its own node's snapshots only. Planting
// another node's or a manager's state, the way a hostile client would (a raw
// KV put, not through the store), is refused by the server; the planted
// state never reaches a load, and the worker still reads the snapshots it
// needs (its node's, and the manager's before it starts).
func TestWorkerCannotOverwriteAnotherNodesSnapshot(t *testing.T) {
	d := newDeployment(t, natsauth.Config{Nodes: []string{"n1", "n2"}})
	n1 := d.connectWorker("n1")
	ctx := d.ctx
	kv, err := n1.js.KeyValue(ctx, eventstore.DefaultSnapshotBucket)
	require.NoError(t, err)
	forged := []byte(`{"format":2,"schema":"test/v1","seq":1099511627776,"state":{"k":"forged"}}`)

	// The controller writes the real snapshots of n2 and of the manager.
	agg2 := events.NodeAggregate(testRef, "n2")
	v2, err := d.store.Append(ctx, agg2, 0, started("n2", "controller"))
	require.NoError(t, err)
	mgr := events.ManagerAggregate(testRef)
	real := map[string]string{"k": "real"}
	for _, agg := range []events.AggregateID{agg2, mgr} {
		require.NoError(t, d.store.SaveSnapshot(ctx, agg, "test/v1", v2, real))
	}

	for _, c := range []struct {
		what string
		agg  events.AggregateID
	}{
		{"node n2's", agg2},
		{"a manager's", mgr},
		{"node n1's under another node's key prefix", events.NodeAggregate(testRef, "n1.n2")},
	} {
		key := eventstore.SnapshotKey(c.agg)
		subj := "$KV." + eventstore.DefaultSnapshotBucket + "." + key
		err := denied(t, n1.viol, subj, func(ctx context.Context) error {
			_, err := kv.Put(ctx, key, forged)
			return err
		})
		require.ErrorIs(t, err, nats.ErrPermissionViolation, c.what)
		assert.Contains(t, err.Error(), subj, "the error names the key")
		t.Logf("worker n1 writes %s snapshot: %v", c.what, err)
	}
	// Through its store, the worker does not even try (a denied write would
	// only time out): SaveSnapshot of an aggregate not its node's is a no-op.
	require.NoError(t, n1.store.SaveSnapshot(ctx, agg2, "test/v1", 1<<40, map[string]string{"k": "forged"}))

	// What every process loads is still the controller's snapshot, read by
	// the worker too.
	for _, agg := range []events.AggregateID{agg2, mgr} {
		l, err := eventstore.LoadState(ctx, n1.store, agg, map[string]string{}, func(s map[string]string, _ events.Envelope) (map[string]string, error) { return s, nil },
			&eventstore.Snapshotting{Schema: "test/v1"})
		require.NoError(t, err, "worker n1 reads %s's snapshot", agg)
		assert.Equal(t, v2, l.SnapshotSeq, agg.String())
		assert.Equal(t, real, l.State, agg.String())
	}
	// Its own node's snapshot it writes and reads.
	agg1 := events.NodeAggregate(testRef, "n1")
	v1, err := n1.store.Append(ctx, agg1, 0, started("n1", "own"))
	require.NoError(t, err)
	_, err = kv.Put(ctx, eventstore.SnapshotKey(agg1), []byte(`{"format":2,"schema":"test/v1","seq":`+fmt.Sprint(v1)+`,"state":{"k":"own"}}`))
	require.NoError(t, err, "a raw put of its own node's key is allowed")
	assert.Len(t, n1.viol.All(), 3, "only the three forgeries were refused")
}
