package natsauth_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/eventstore"
	"github.com/switchback-dev/switchback/natsauth"
	"github.com/switchback-dev/switchback/nodequeue"
	"github.com/switchback-dev/switchback/topology"
)

// TestRedirectedRepliesPlantNothing plays the reply-subject attack. NATS
// checks no permission on a request's reply subject, and JetStream answers
// on it: worker n1 stores a message of its choosing on its own subject, then
// asks for it by direct get with the reply set to a subject a stream
// captures (a manager's snapshot key, node n2's command subject, the
// max-deliveries advisories the dead-letterer acts on). The copies land
// there, and each is refused where it would act: the snapshot is ignored,
// the command is a copy (CheckCopied), the advisory parks nothing.
func TestRedirectedRepliesPlantNothing(t *testing.T) {
	d := newDeployment(t, natsauth.Config{Nodes: []string{"n1", "n2"}})
	n1 := d.connectWorker("n1")
	ctx, cancel := context.WithTimeout(d.ctx, time.Minute)
	defer cancel()

	// plant stores data on n1's own subject and has JetStream answer its
	// direct get on target; it returns once target's stream holds the copy.
	plant := func(stream, target string, data []byte) *jetstream.RawStreamMsg {
		t.Helper()
		own := events.NodeAggregate(testRef, "n1").Subject()
		ack, err := n1.js.Publish(ctx, own, data)
		require.NoError(t, err)
		s, err := d.js.Stream(ctx, stream)
		require.NoError(t, err)
		require.NoError(t, n1.nc.PublishRequest("$JS.API.DIRECT.GET."+d.store.Stream(), target, fmt.Appendf(nil, `{"seq":%d}`, ack.Sequence)))
		var planted *jetstream.RawStreamMsg
		require.Eventually(t, func() bool {
			m, err := s.GetLastMsgForSubject(ctx, target)
			if err == nil && string(m.Data) == string(data) {
				planted = m
			}
			return planted != nil
		}, 20*time.Second, 10*time.Millisecond, "the copy lands on %s", target)
		return planted
	}

	t.Run("a planted snapshot is ignored", func(t *testing.T) {
		mgr := events.ManagerAggregate(testRef)
		v, err := d.store.Append(ctx, mgr, 0, events.New(mgr, events.SourceController, "real", time.Now(), events.CancelRequested{})[0])
		require.NoError(t, err)
		forged, err := json.Marshal(map[string]any{"format": 2, "schema": "test/v1", "seq": v, "state": map[string]string{"k": "forged"}})
		require.NoError(t, err)
		plant("KV_"+topology.SnapshotBucket, "$KV."+topology.SnapshotBucket+"."+eventstore.SnapshotKey(mgr), forged)
		l, err := eventstore.LoadState(ctx, d.store, mgr, map[string]string{"k": "from the stream"},
			func(s map[string]string, _ events.Envelope) (map[string]string, error) { return s, nil }, &eventstore.Snapshotting{Schema: "test/v1"})
		require.NoError(t, err)
		assert.Zero(t, l.SnapshotSeq, "the planted snapshot is not used")
		assert.Equal(t, map[string]string{"k": "from the stream"}, l.State)
	})

	t.Run("a planted command is a copy", func(t *testing.T) {
		cmd, err := json.Marshal(command("n2", "forged-by-n1"))
		require.NoError(t, err)
		m := plant(topology.CommandStream, topology.CommandSubject("n2"), cmd)
		err = nodequeue.CheckCopied(m.Subject, m.Header)
		require.Error(t, err, "n2's worker refuses it (nodeworker parks what CheckCopied refuses)")
		t.Logf("n2's worker: %v", err)
		// What the controller issues passes.
		_, err = d.queue.Publish(ctx, command("n2", "real"))
		require.NoError(t, err)
		cs, err := d.js.Stream(ctx, topology.CommandStream)
		require.NoError(t, err)
		real, err := cs.GetLastMsgForSubject(ctx, topology.CommandSubject("n2"))
		require.NoError(t, err)
		assert.NoError(t, nodequeue.CheckCopied(real.Subject, real.Header))
	})

	t.Run("a planted advisory parks nothing", func(t *testing.T) {
		var parked atomic.Int32
		cc, err := d.queue.WatchDeadLetters(ctx, func(context.Context, nodequeue.DeadCommand) error {
			parked.Add(1)
			return nil
		})
		require.NoError(t, err)
		defer cc.Stop()
		_, err = d.queue.Publish(ctx, command("n2", "victim"))
		require.NoError(t, err)
		info, err := d.queue.CommandStreamInfo(ctx)
		require.NoError(t, err)
		adv, err := json.Marshal(map[string]any{"type": "io.nats.jetstream.advisory.v1.max_deliver", "stream": topology.CommandStream,
			"consumer": topology.NodeConsumer("n2"), "stream_seq": info.State.LastSeq, "deliveries": 5})
		require.NoError(t, err)
		m := plant(topology.DeadLetterStream, "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES."+topology.CommandStream+"."+topology.NodeConsumer("n2"), adv)
		dl, err := d.js.Consumer(ctx, topology.DeadLetterStream, "dead-letterer")
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			ci, err := dl.Info(ctx)
			return err == nil && ci.AckFloor.Stream >= m.Sequence
		}, 20*time.Second, 10*time.Millisecond, "the dead-letterer has settled the planted advisory")
		assert.Zero(t, parked.Load(), "nothing parked, no node failed")
		_, err = d.queue.CommandStreamInfo(ctx)
		require.NoError(t, err)
		still, err := d.js.Stream(ctx, topology.CommandStream)
		require.NoError(t, err)
		_, err = still.GetMsg(ctx, info.State.LastSeq)
		assert.NoError(t, err, "the victim command is still queued")
	})
}
