package natsauth_test

import (
	"context"
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
	"github.com/switchback-dev/switchback/sim"
	"github.com/switchback-dev/switchback/topology"
)

var testRef = events.ManagerRef{Namespace: "longhorn-system", Name: "upgrade-v2", UID: "3f0c9d1e-uid"}

// started is a valid first event of node's upgrade under testRef.
func started(node, causation string) events.Envelope { return startedOf(testRef, node, causation) }

// startedOf is a valid first event of node's upgrade under ref.
func startedOf(ref events.ManagerRef, node, causation string) events.Envelope {
	return events.New(events.NodeAggregate(ref, node), events.SourceWorker+"/"+node, causation, time.Now(),
		events.NodeUpgradeStarted{Node: node, DataEngine: "v2", InstanceManagerImage: sim.NewIMImage, Attempt: 1})[0]
}

func command(node, id string) nodequeue.Command {
	return nodequeue.Command{ID: id, Kind: nodequeue.Advance, Manager: testRef, Node: node, Attempt: 1,
		Step: events.NodePending, DataEngine: "v2", InstanceManagerImage: sim.NewIMImage, IssuedAt: time.Now()}
}

// orderedRead reads at least n messages of stream s through a nats.go
// ordered consumer (what the nats CLI and most tools use), returning their
// subjects; the consumer is deleted when it stops.
func orderedRead(t *testing.T, js jetstream.JetStream, s string, n int) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := js.OrderedConsumer(ctx, s, jetstream.OrderedConsumerConfig{})
	require.NoError(t, err, "ordered consumer on %s", s)
	var subjects []string
	for len(subjects) < n {
		b, err := c.Fetch(n-len(subjects), jetstream.FetchMaxWait(5*time.Second))
		require.NoError(t, err, "fetch from %s", s)
		for msg := range b.Messages() {
			subjects = append(subjects, msg.Subject())
		}
		require.NoError(t, b.Error(), "fetch from %s", s)
	}
	return subjects
}

type state struct {
	eventsLast uint64
	dlqLast    uint64
	eventsCfg  jetstream.StreamConfig
	consumers  map[string][]string
	streams    []string
}

func streamState(t *testing.T, d *deployment) state {
	t.Helper()
	s, err := d.js.Stream(d.ctx, topology.EventStream)
	require.NoError(t, err)
	info, err := s.Info(d.ctx)
	require.NoError(t, err)
	out := state{eventsLast: info.State.LastSeq, eventsCfg: info.Config, consumers: map[string][]string{}}
	dlq, err := d.js.Stream(d.ctx, topology.DeadLetterStream)
	require.NoError(t, err)
	dinfo, err := dlq.Info(d.ctx)
	require.NoError(t, err)
	out.dlqLast = dinfo.State.LastSeq
	names := d.js.StreamNames(d.ctx)
	for n := range names.Name() {
		out.streams = append(out.streams, n)
		st, err := d.js.Stream(d.ctx, n)
		require.NoError(t, err)
		cs := st.ListConsumers(d.ctx)
		for c := range cs.Info() {
			if isOrderedConsumer(c.Config) {
				continue
			}
			out.consumers[n] = append(out.consumers[n], c.Name)
		}
		require.NoError(t, cs.Err())
	}
	require.NoError(t, names.Err())
	return out
}

// isOrderedConsumer reports whether cfg is the shape of an ordered consumer's
// (nats.go's OrderedConsumer: ephemeral, in memory, no acks), which the
// reader's own reads create and JetStream removes after their inactivity,
// at a time a loaded machine does not fix: not a consumer a refused call
// made.
func isOrderedConsumer(cfg jetstream.ConsumerConfig) bool {
	return cfg.Durable == "" && cfg.MemoryStorage && cfg.AckPolicy == jetstream.AckNonePolicy
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
	subj := "$JS.API.STREAM.UPDATE." + topology.EventStream
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
	require.NoError(t, d.js.DeleteConsumer(d.ctx, topology.CommandStream, topology.NodeConsumer("late")))
	w := d.connectWorker("late")
	_, err = w.queue.NodeConsumer(d.ctx, "late")
	require.ErrorIs(t, err, jetstream.ErrConsumerNotFound)
	assert.Contains(t, err.Error(), "EnsureNodeConsumers")
	require.NoError(t, d.queue.EnsureNodeConsumers(d.ctx, "late"))
	_, err = w.queue.NodeConsumer(d.ctx, "late")
	require.NoError(t, err, "bound once the controller created it")
	assert.Empty(t, w.viol.All())
}

// TestWorkerCannotWriteSnapshots: a worker's user may write no snapshot, not
// even its own node's (a writer of the bucket could roll it up, purging every
// key). Planting a state, or a rollup, the way a hostile client would (a raw
// KV put, not through the store), is refused by the server; the planted
// state never reaches a load, and the worker still reads the snapshots it
// needs (its node's, and the manager's before it starts).
func TestWorkerCannotWriteSnapshots(t *testing.T) {
	d := newDeployment(t, natsauth.Config{Nodes: []string{"n1", "n2"}})
	n1 := d.connectWorker("n1")
	ctx := d.ctx
	kv, err := n1.js.KeyValue(ctx, topology.SnapshotBucket)
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
		{"its own node's", events.NodeAggregate(testRef, "n1")},
	} {
		key := eventstore.SnapshotKey(c.agg)
		subj := "$KV." + topology.SnapshotBucket + "." + key
		err := denied(t, n1.viol, subj, func(ctx context.Context) error {
			_, err := kv.Put(ctx, key, forged)
			return err
		})
		require.ErrorIs(t, err, nats.ErrPermissionViolation, c.what)
		assert.Contains(t, err.Error(), subj, "the error names the key")
		t.Logf("worker n1 writes %s snapshot: %v", c.what, err)
	}
	rollup := eventstore.SnapshotKey(events.NodeAggregate(testRef, "n1"))
	err = denied(t, n1.viol, "$KV."+topology.SnapshotBucket+"."+rollup, func(ctx context.Context) error {
		m := nats.NewMsg("$KV." + topology.SnapshotBucket + "." + rollup)
		m.Header.Set(jetstream.MsgRollup, jetstream.MsgRollupAll)
		_, err := n1.js.PublishMsg(ctx, m)
		return err
	})
	require.ErrorIs(t, err, nats.ErrPermissionViolation, "a rollup of the whole bucket")
	// Through its store, the worker does not even try (a denied write would
	// only time out): SaveSnapshot is a no-op on a worker's store.
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
	assert.Len(t, n1.viol.All(), 5, "only the four forgeries and the rollup were refused")
}
