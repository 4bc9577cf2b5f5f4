package natsauth_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
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
	"github.com/switchback-dev/switchback/nodequeue"
	"github.com/switchback-dev/switchback/replay"
	"github.com/switchback-dev/switchback/test/harness/consumertest"
	"github.com/switchback-dev/switchback/topology"
)

// user is one column of the permission matrix: a connection as one NATS
// user, its JetStream context unwrapped (what a hostile client would use)
// and a store bound the way its command binds it.
type user struct {
	who   string
	nc    *nats.Conn
	js    jetstream.JetStream
	store *eventstore.Store
	viol  *natsauth.Violations
}

// matrix is the permission matrix TestPermissions prints: what each user
// was allowed or refused, "·" where it was not tried.
type matrix struct {
	t       *testing.T
	users   []string
	actions []string
	cells   map[[2]string]string
}

func (m *matrix) set(who, action, result string) {
	if !slices.Contains(m.actions, action) {
		m.actions = append(m.actions, action)
	}
	m.cells[[2]string{who, action}] = result
}

func (m *matrix) allowed(who, action string) { m.set(who, action, "allowed") }

func (m *matrix) refused(who, action string, err error) {
	m.t.Logf("%s: %s: %v", who, action, err)
	m.set(who, action, "DENIED")
}

func (m *matrix) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n%-70s", "action")
	for _, u := range m.users {
		fmt.Fprintf(&b, " | %-10s", u)
	}
	fmt.Fprintf(&b, "\n%s\n", strings.Repeat("-", 70+13*len(m.users)))
	for _, a := range m.actions {
		fmt.Fprintf(&b, "%-70s", a)
		for _, u := range m.users {
			fmt.Fprintf(&b, " | %-10s", cmp.Or(m.cells[[2]string{u, a}], "·"))
		}
		b.WriteString("\n")
	}
	return b.String()
}

// TestPermissions proves, on a server running the generated authorization,
// what a worker may do (its own node's commands and events) and what it may
// not (anything of another node, any stream or consumer administration);
// what the reader may do (read the event and dead-letter streams) and what
// it may not (write anything, administer anything, touch the command stream
// or the snapshots); and that every refusal is a permissions violation
// naming the subject. `go test -v -run TestPermissions` prints the matrix.
func TestPermissions(t *testing.T) {
	d := newDeployment(t, natsauth.Config{Nodes: []string{"n1", "n2"}})
	n1 := d.connectWorker("n1")
	n2 := d.connectWorker("n2")
	r := d.connectReader()
	worker := user{"worker n1", n1.nc, n1.js, n1.store, n1.viol}
	rd := user{"reader", r.nc, r.js, r.store, r.viol}
	both := []user{worker, rd}
	ctx := d.ctx
	m := &matrix{t: t, users: []string{worker.who, rd.who, "controller"}, cells: map[[2]string]string{}}

	// --- What the worker must be able to do, and the reader mostly not. ---
	_, err := d.queue.Publish(ctx, command("n1", "cmd-n1-1"))
	require.NoError(t, err)
	own, err := n1.js.Consumer(ctx, topology.CommandStream, topology.NodeConsumer("n1"))
	require.NoError(t, err, "consumer info on its own consumer")
	msgs := consumertest.Fetch(t, own, 1, 5*time.Second)
	require.Len(t, msgs, 1, "pulls its own node's command")
	require.NoError(t, msgs[0].DoubleAck(ctx), "acks its own node's command")
	const pullN1 = "pull + ack node n1's commands (worker-n1)"
	m.allowed(worker.who, pullN1)
	nextN1 := "$JS.API.CONSUMER.MSG.NEXT." + topology.CommandStream + "." + topology.NodeConsumer("n1")
	m.refused(rd.who, pullN1, denied(t, r.viol, nextN1, func(ctx context.Context) error {
		_, err := r.nc.RequestWithContext(ctx, nextN1, []byte(`{"batch":1,"expires":200000000}`))
		return err
	}))

	agg1 := events.NodeAggregate(testRef, "n1")
	v, err := n1.store.Append(ctx, agg1, 0, started("n1", "own"))
	require.NoError(t, err, "appends its own node's event")
	const appendN1 = "append node n1's events (sb.evt.*.*.*.node.n1)"
	m.allowed(worker.who, appendN1)
	m.refused(rd.who, appendN1, denied(t, r.viol, agg1.Subject(), func(ctx context.Context) error {
		_, err := r.store.Append(ctx, agg1, v, started("n1", "reader"))
		return err
	}))
	for _, u := range both {
		h, err := u.store.Load(ctx, agg1)
		require.NoError(t, err, "%s loads a node's history (direct batch get)", u.who)
		require.Len(t, h.Events, 1)
		require.Equal(t, v, h.Version)
		m.allowed(u.who, "load a node's history (direct batch get)")
	}

	// The controller writes snapshots; a worker reads them and writes none
	// (a writer of the bucket could roll it up: purge every key).
	require.NoError(t, d.store.SaveSnapshot(ctx, agg1, "test/v1", v, map[string]string{"k": "v"}), "the controller writes a snapshot")
	l, err := eventstore.LoadState(ctx, n1.store, agg1, map[string]string{}, func(s map[string]string, _ events.Envelope) (map[string]string, error) { return s, nil },
		&eventstore.Snapshotting{Schema: "test/v1"})
	require.NoError(t, err, "reads a snapshot")
	require.Equal(t, v, l.SnapshotSeq, "the snapshot was used")
	const getSnap, putSnap = "get a snapshot (KV switchback-snapshots)", "put a snapshot, even its node's (KV switchback-snapshots)"
	m.allowed(worker.who, getSnap)
	key := eventstore.SnapshotKey(agg1)
	wkv, err := n1.js.KeyValue(ctx, topology.SnapshotBucket)
	require.NoError(t, err)
	m.refused(worker.who, putSnap, denied(t, n1.viol, "$KV."+topology.SnapshotBucket+"."+key, func(ctx context.Context) error {
		_, err := wkv.Put(ctx, key, []byte("{}"))
		return err
	}))
	kv, err := r.js.KeyValue(ctx, topology.SnapshotBucket)
	require.NoError(t, err, "the reader binds the bucket (eventstore.Open does)")
	m.refused(rd.who, getSnap, denied(t, r.viol, "$JS.API.DIRECT.GET.KV_"+topology.SnapshotBucket+".$KV."+topology.SnapshotBucket+"."+key, func(ctx context.Context) error {
		_, err := kv.Get(ctx, key)
		return err
	}))
	m.refused(rd.who, putSnap, denied(t, r.viol, "$KV."+topology.SnapshotBucket+"."+key, func(ctx context.Context) error {
		_, err := kv.Put(ctx, key, []byte("{}"))
		return err
	}))

	// A conflict makes the store ask the stream leader for the subject's
	// last message: a worker must be able to, or it could never recover
	// from one.
	_, err = n1.store.Append(ctx, agg1, 0, started("n1", "stale"))
	var conflict *eventstore.ConflictError
	require.ErrorAs(t, err, &conflict, "a stale append is a clean conflict, not a timeout")
	m.allowed(worker.who, "resolve an append conflict (STREAM.MSG.GET on the event stream)")

	// A bad command is refused with Terminate (an ack subject of its own
	// consumer); the controller parks it from JetStream's advisory. Neither
	// the worker nor the reader reads commands by sequence or writes the
	// dead-letter stream.
	_, err = d.queue.Publish(ctx, command("n1", "cmd-n1-bad"))
	require.NoError(t, err)
	msgs = consumertest.Fetch(t, own, 1, 5*time.Second)
	require.Len(t, msgs, 1)
	require.NoError(t, nodequeue.Terminate(msgs[0], errors.New("test")), "refuses its node's command")
	m.allowed(worker.who, "refuse node n1's command (+TERM on worker-n1)")
	info, err := d.queue.CommandStreamInfo(ctx)
	require.NoError(t, err)
	const readCmd, park = "read a command by sequence (STREAM.MSG.GET on the command stream)", "dead-letter a command (sb.dlq.cmd.*)"
	cmdGet := "$JS.API.STREAM.MSG.GET." + topology.CommandStream
	for _, u := range []struct {
		user
		viol *natsauth.Violations
	}{{worker, n1.viol}, {rd, r.viol}} {
		m.refused(u.who, readCmd, denied(t, u.viol, cmdGet, func(ctx context.Context) error {
			_, err := u.nc.RequestWithContext(ctx, cmdGet, fmt.Appendf(nil, `{"seq":%d}`, info.State.LastSeq))
			return err
		}))
		m.refused(u.who, park, denied(t, u.viol, "sb.dlq.cmd.n1", func(ctx context.Context) error {
			_, err := u.js.Publish(ctx, "sb.dlq.cmd.n1", []byte("{}"))
			return err
		}))
	}
	require.NoError(t, d.queue.RemoveCommand(ctx, info.State.LastSeq))

	// --- What the reader must be able to do: what history and replay do,
	// and the nats CLI's reads (TestReaderWithTheNATSCLI). ---
	refusedSoFar := len(r.viol.All())
	for _, s := range []string{topology.EventStream, topology.DeadLetterStream} {
		_, err := r.js.Stream(ctx, s)
		require.NoError(t, err, "stream info on %s", s)
	}
	m.allowed(rd.who, "look up the event and dead-letter streams (stream info)")
	res, err := replay.Run(ctx, r.store, replay.Options{})
	require.NoError(t, err)
	require.Len(t, res.Upgrades, 1, "the replay folds n1's upgrade")
	m.allowed(rd.who, "replay the event stream (replay.Run: an ordered read)")
	for _, s := range []string{topology.EventStream, topology.DeadLetterStream} {
		got := orderedRead(t, r.js, s, 1)
		require.NotEmpty(t, got[0], "an ordered consumer on %s delivers", s)
		m.allowed(rd.who, "ordered consumer on "+s)
	}
	for _, s := range []string{topology.EventStream, topology.DeadLetterStream} {
		msg, err := r.nc.RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET."+s, []byte(`{"seq":1}`))
		require.NoError(t, err)
		require.Contains(t, string(msg.Data), `"seq":1`, "message get on %s", s)
	}
	m.allowed(rd.who, "get a message by sequence (STREAM.MSG.GET on both streams)")
	evs, err := r.js.Stream(ctx, topology.EventStream)
	require.NoError(t, err)
	last, err := evs.GetLastMsgForSubject(ctx, agg1.Subject())
	require.NoError(t, err, "direct get, last by subject")
	require.Equal(t, v, last.Sequence)
	m.allowed(rd.who, "get the last message of a subject (DIRECT.GET on the event stream)")
	assert.Empty(t, r.viol.All()[refusedSoFar:], "the reader was refused nothing it needs")

	// --- What neither may do. ---
	before := streamState(t, d)

	// Pull n2's commands.
	_, err = d.queue.Publish(ctx, command("n2", "cmd-n2-1"))
	require.NoError(t, err)
	next := "$JS.API.CONSUMER.MSG.NEXT." + topology.CommandStream + "." + topology.NodeConsumer("n2")
	infoSubj := "$JS.API.CONSUMER.INFO." + topology.CommandStream + "." + topology.NodeConsumer("n2")
	for _, u := range both {
		m.refused(u.who, "pull node n2's commands", denied(t, u.viol, next, func(ctx context.Context) error {
			_, err := u.nc.RequestWithContext(ctx, next, []byte(`{"batch":1,"expires":200000000}`))
			return err
		}))
		m.refused(u.who, "look up node n2's consumer", denied(t, u.viol, infoSubj, func(ctx context.Context) error {
			_, err := u.js.Consumer(ctx, topology.CommandStream, topology.NodeConsumer("n2"))
			return err
		}))
	}

	// Ack n2's command: n2 pulls it and does not ack; the others try with
	// the delivery's ack subject. The command must come back to n2.
	c2, err := n2.js.Consumer(ctx, topology.CommandStream, topology.NodeConsumer("n2"))
	require.NoError(t, err)
	got := consumertest.Fetch(t, c2, 1, 5*time.Second)
	require.NotEmpty(t, got, "n2 got its command")
	pending := got[len(got)-1]
	ackSubj := pending.Reply()
	require.True(t, strings.HasPrefix(ackSubj, "$JS.ACK."+topology.CommandStream+"."+topology.NodeConsumer("n2")+"."))
	for _, u := range both {
		m.refused(u.who, "ack node n2's command", denied(t, u.viol, ackSubj, func(ctx context.Context) error {
			_, err := u.nc.RequestWithContext(ctx, ackSubj, []byte("+ACK"))
			return err
		}))
	}
	redelivered := consumertest.Fetch(t, c2, 1, 3*queueConfig.AckWait)
	require.NotEmpty(t, redelivered, "the command the others tried to ack came back to n2 after AckWait: nothing was acked")
	again := redelivered[len(redelivered)-1]
	meta, err := again.Metadata()
	require.NoError(t, err)
	assert.Equal(t, uint64(2), meta.NumDelivered)
	require.NoError(t, again.DoubleAck(ctx))

	// Publish n2's events, a manager's events, commands, advisories, KV.
	agg2 := events.NodeAggregate(testRef, "n2")
	mgrSubj := events.ManagerAggregate(testRef).Subject()
	// The max-deliveries advisories are what makes the controller fail a
	// node: forging one must be impossible.
	adv := "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES." + topology.CommandStream + "." + topology.NodeConsumer("n2")
	snapOther := "$KV." + topology.SnapshotBucket + ".other.key"
	for _, u := range both {
		m.refused(u.who, "append node n2's events", denied(t, u.viol, agg2.Subject(), func(ctx context.Context) error {
			_, err := u.store.Append(ctx, agg2, 0, started("n2", "forged"))
			return err
		}))
		for _, c := range []struct{ action, subject string }{
			{"append a manager's events", mgrSubj},
			{"issue a command to n2", topology.CommandSubject("n2")},
			{"issue a command to n1", topology.CommandSubject("n1")},
			{"forge a max-deliveries advisory", adv},
			{"write a KV key outside the snapshot keys", snapOther},
		} {
			m.refused(u.who, c.action, denied(t, u.viol, c.subject, func(ctx context.Context) error {
				_, err := u.js.Publish(ctx, c.subject, []byte(`{"stream_seq":1}`))
				return err
			}))
		}
	}

	// Administration: streams and consumers. readerMay marks the one call
	// the reader is allowed: an ephemeral consumer on the event stream, as
	// every ordered read creates.
	for _, c := range []struct {
		action, subject string
		readerMay       bool
		op              func(ctx context.Context, u user) error
	}{
		{action: "create a stream", subject: "$JS.API.STREAM.CREATE.EVIL", op: func(ctx context.Context, u user) error {
			_, err := u.js.CreateStream(ctx, jetstream.StreamConfig{Name: "EVIL", Subjects: []string{"evil.>"}})
			return err
		}},
		{action: "update the event stream (e.g. MaxMsgs=1)", subject: "$JS.API.STREAM.UPDATE." + topology.EventStream, op: func(ctx context.Context, u user) error {
			cfg := eventstore.Config{}.StreamConfig()
			cfg.MaxMsgs = 1
			_, err := u.js.UpdateStream(ctx, cfg)
			return err
		}},
		{action: "delete the event stream", subject: "$JS.API.STREAM.DELETE." + topology.EventStream, op: func(ctx context.Context, u user) error {
			return u.js.DeleteStream(ctx, topology.EventStream)
		}},
		{action: "delete the dead-letter stream", subject: "$JS.API.STREAM.DELETE." + topology.DeadLetterStream, op: func(ctx context.Context, u user) error {
			return u.js.DeleteStream(ctx, topology.DeadLetterStream)
		}},
		{action: "purge the dead-letter stream", subject: "$JS.API.STREAM.PURGE." + topology.DeadLetterStream, op: func(ctx context.Context, u user) error {
			_, err := u.nc.RequestWithContext(ctx, "$JS.API.STREAM.PURGE."+topology.DeadLetterStream, nil)
			return err
		}},
		{action: "purge the command stream", subject: "$JS.API.STREAM.PURGE." + topology.CommandStream, op: func(ctx context.Context, u user) error {
			_, err := u.nc.RequestWithContext(ctx, "$JS.API.STREAM.PURGE."+topology.CommandStream, nil)
			return err
		}},
		{action: "delete a command", subject: "$JS.API.STREAM.MSG.DELETE." + topology.CommandStream, op: func(ctx context.Context, u user) error {
			_, err := u.nc.RequestWithContext(ctx, "$JS.API.STREAM.MSG.DELETE."+topology.CommandStream, []byte(`{"seq":1}`))
			return err
		}},
		{action: "create a consumer on node n2's commands", subject: "$JS.API.CONSUMER.CREATE." + topology.CommandStream + ".thief." + topology.CommandSubject("n2"), op: func(ctx context.Context, u user) error {
			_, err := u.js.CreateOrUpdateConsumer(ctx, topology.CommandStream, jetstream.ConsumerConfig{Durable: "thief", FilterSubject: topology.CommandSubject("n2"), AckPolicy: jetstream.AckExplicitPolicy})
			return err
		}},
		{action: "create (or update) node n1's consumer", subject: "$JS.API.CONSUMER.CREATE." + topology.CommandStream + "." + topology.NodeConsumer("n1") + "." + topology.CommandSubject("n1"), op: func(ctx context.Context, u user) error {
			_, err := u.js.CreateOrUpdateConsumer(ctx, topology.CommandStream, jetstream.ConsumerConfig{Durable: topology.NodeConsumer("n1"), FilterSubject: topology.CommandSubject("n1"), AckPolicy: jetstream.AckExplicitPolicy, MaxDeliver: 1000})
			return err
		}},
		{action: "create an ephemeral consumer on the command stream", subject: "$JS.API.CONSUMER.CREATE." + topology.CommandStream + ".peek", op: func(ctx context.Context, u user) error {
			_, err := u.js.CreateConsumer(ctx, topology.CommandStream, jetstream.ConsumerConfig{Name: "peek", AckPolicy: jetstream.AckNonePolicy})
			return err
		}},
		{action: "create (and delete) an ephemeral consumer on the event stream", subject: "$JS.API.CONSUMER.CREATE." + topology.EventStream + ".peek", readerMay: true, op: func(ctx context.Context, u user) error {
			if _, err := u.js.CreateConsumer(ctx, topology.EventStream, jetstream.ConsumerConfig{Name: "peek", AckPolicy: jetstream.AckNonePolicy}); err != nil {
				return err
			}
			return u.js.DeleteConsumer(ctx, topology.EventStream, "peek")
		}},
		{action: "delete node n2's consumer", subject: "$JS.API.CONSUMER.DELETE." + topology.CommandStream + "." + topology.NodeConsumer("n2"), op: func(ctx context.Context, u user) error {
			return u.js.DeleteConsumer(ctx, topology.CommandStream, topology.NodeConsumer("n2"))
		}},
	} {
		for _, u := range both {
			if c.readerMay && u.who == rd.who {
				require.NoError(t, c.op(ctx, u), "%s: %s", u.who, c.action)
				m.allowed(u.who, c.action)
				continue
			}
			m.refused(u.who, c.action, denied(t, u.viol, c.subject, func(ctx context.Context) error { return c.op(ctx, u) }))
		}
	}

	// Subscriptions outside its inbox.
	for _, u := range both {
		for _, subj := range []string{"sb.evt.>", "sb.cmd.>", "_INBOX.>", natsauth.InboxPrefix("n2") + ".>"} {
			sub, err := u.nc.SubscribeSync(subj)
			require.NoError(t, err, "the client API accepts the subscription; the server refuses it")
			m.refused(u.who, "subscribe to "+subj, denied(t, u.viol, subj, func(ctx context.Context) error {
				_, err := sub.NextMsgWithContext(ctx)
				return err
			}))
		}
	}

	// Nothing of the above changed anything.
	after := streamState(t, d)
	assert.Equal(t, before.eventsLast, after.eventsLast, "no event was stored by the refused appends")
	assert.Equal(t, before.eventsCfg.MaxMsgs, after.eventsCfg.MaxMsgs, "the event stream's limits are intact")
	assert.Equal(t, before.consumers, after.consumers, "no consumer was created or deleted")
	assert.Equal(t, before.streams, after.streams, "no stream was created or deleted")
	assert.Equal(t, before.dlqLast, after.dlqLast, "the dead-letter stream is intact")
	assert.Empty(t, n2.viol.All(), "n2 did nothing it may not")

	// The controller, by contrast, administers everything.
	_, err = d.js.CreateOrUpdateConsumer(ctx, topology.CommandStream, jetstream.ConsumerConfig{Durable: "ctl-probe", FilterSubject: topology.CommandSubject("n3"), AckPolicy: jetstream.AckExplicitPolicy})
	require.NoError(t, err)
	require.NoError(t, d.js.DeleteConsumer(ctx, topology.CommandStream, "ctl-probe"))
	_, err = d.store.Append(ctx, agg2, 0, started("n2", "controller"))
	require.NoError(t, err, "the controller writes node aggregates (cancel and dead-letter paths)")
	assert.Empty(t, d.viol.All(), "the controller was refused nothing")
	m.allowed("controller", "create/delete consumers, append to any aggregate")
	t.Log(m.String())
}
