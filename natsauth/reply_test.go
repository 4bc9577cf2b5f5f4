package natsauth_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
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

	// A stream source with a subject transform copies n1's own events onto
	// n2's command subject (the stream update is the controller's to make:
	// here d.js plays whoever made it). The copy carries the source header.
	t.Run("a sourced command is a copy", func(t *testing.T) {
		cmd, err := json.Marshal(command("n2", "sourced-from-n1"))
		require.NoError(t, err)
		own := events.NodeAggregate(testRef, "n1").Subject()
		_, err = n1.js.Publish(ctx, own, cmd)
		require.NoError(t, err)
		cs, err := d.js.Stream(ctx, topology.CommandStream)
		require.NoError(t, err)
		es, err := d.js.Stream(ctx, d.store.Stream())
		require.NoError(t, err)
		before := cs.CachedInfo().Config
		cfg := before
		cfg.MaxMsgSize = es.CachedInfo().Config.MaxMsgSize // a source may not be larger than its target
		cfg.Sources = []*jetstream.StreamSource{{Name: d.store.Stream(), SubjectTransforms: []jetstream.SubjectTransformConfig{{Source: own, Destination: topology.CommandSubject("n2")}}}}
		_, err = d.js.UpdateStream(ctx, cfg)
		require.NoError(t, err)
		var m *jetstream.RawStreamMsg
		require.Eventually(t, func() bool {
			m, err = cs.GetLastMsgForSubject(ctx, topology.CommandSubject("n2"))
			return err == nil && string(m.Data) == string(cmd)
		}, 20*time.Second, 10*time.Millisecond, "the copy lands on n2's command subject")
		err = nodequeue.CheckCopied(m.Subject, m.Header)
		require.Error(t, err, "n2's worker refuses it")
		assert.ErrorContains(t, err, "Nats-Stream-Source")
		_, err = d.js.UpdateStream(ctx, before)
		require.NoError(t, err)
	})

	// parksNothing runs the dead-letterer, queues a command of n2's, has
	// forge draw an advisory about it (returning the advisory's sequence in
	// the dead-letter stream), and checks that once the dead-letterer has
	// settled it nothing was parked and the command is still queued.
	parksNothing := func(t *testing.T, forge func(victim uint64) uint64) {
		var parked atomic.Int32
		cc, err := d.queue.WatchDeadLetters(ctx, func(context.Context, nodequeue.DeadCommand) error {
			parked.Add(1)
			return nil
		})
		require.NoError(t, err)
		defer cc.Stop()
		_, err = d.queue.Publish(ctx, command("n2", "victim-"+t.Name()))
		require.NoError(t, err)
		info, err := d.queue.CommandStreamInfo(ctx)
		require.NoError(t, err)
		victim := info.State.LastSeq
		adv := forge(victim)
		dl, err := d.js.Consumer(ctx, topology.DeadLetterStream, "dead-letterer")
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			ci, err := dl.Info(ctx)
			return err == nil && ci.AckFloor.Stream >= adv
		}, 20*time.Second, 10*time.Millisecond, "the dead-letterer has settled the advisory")
		assert.Zero(t, parked.Load(), "nothing parked, no node failed")
		still, err := d.js.Stream(ctx, topology.CommandStream)
		require.NoError(t, err)
		_, err = still.GetMsg(ctx, victim)
		assert.NoError(t, err, "the victim command is still queued")
	}

	t.Run("a planted advisory parks nothing", func(t *testing.T) {
		parksNothing(t, func(victim uint64) uint64 {
			adv, err := json.Marshal(map[string]any{"type": "io.nats.jetstream.advisory.v1.max_deliver", "stream": topology.CommandStream,
				"consumer": topology.NodeConsumer("n2"), "stream_seq": victim, "deliveries": 5})
			require.NoError(t, err)
			return plant(topology.DeadLetterStream, "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES."+topology.CommandStream+"."+topology.NodeConsumer("n2"), adv).Sequence
		})
	})

	// An ack subject names the stream sequence it settles: n1 may publish
	// on its own consumer's ack subjects, and a +TERM naming n2's command
	// there draws JetStream's terminated advisory (consumer n1's) for it.
	t.Run("a terminate naming another node's command parks nothing", func(t *testing.T) {
		parksNothing(t, func(victim uint64) uint64 {
			ack := fmt.Sprintf("%s%s.%s.1.%d.1.%d.0", topology.AckPrefix, topology.CommandStream, topology.NodeConsumer("n1"), victim, time.Now().UnixNano())
			require.NoError(t, n1.nc.Publish(ack, []byte("+TERM forged by n1")))
			require.NoError(t, n1.nc.Flush())
			dlqs, err := d.js.Stream(ctx, topology.DeadLetterStream)
			require.NoError(t, err)
			var adv *jetstream.RawStreamMsg
			require.Eventually(t, func() bool {
				adv, err = dlqs.GetLastMsgForSubject(ctx, strings.TrimSuffix(topology.TerminatedAdvisories(topology.CommandStream), "*")+topology.NodeConsumer("n1"))
				return err == nil && strings.Contains(string(adv.Data), "forged by n1")
			}, 20*time.Second, 10*time.Millisecond, "JetStream sends the terminated advisory")
			return adv.Sequence
		})
	})
}
