package projector_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/switchback-dev/switchback/api/v1beta2"
	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/kubeclient"
	"github.com/switchback-dev/switchback/projector"
	"github.com/switchback-dev/switchback/sim"
	"github.com/switchback-dev/switchback/test/harness/enginetest"
	"github.com/switchback-dev/switchback/topology"
)

func TestRestartMidUpgradeConverges(t *testing.T) {
	h := newHarness(t, threeNodes(t, slow), enginetest.Options{})
	ref := h.createManager("restarted")
	sequences := h.watchSequences(ref.Name)
	first := h.startProjector(nil)
	h.e.Request(ref)

	mid := eventually(t, 20*time.Second, "projection mid-upgrade", h.getManager(ref.Name), func(o *v1beta2.DataEngineUpgradeManager) bool {
		return o.Status.UpgradingNode != "" && o.Status.CompletedNodes == 0
	})
	first.stop()
	// The engine goes on while no projector runs.
	eventually(t, 20*time.Second, "history moved on", func() (uint64, error) {
		hist := h.history(ref)
		return hist[len(hist)-1].Sequence, nil
	}, func(last uint64) bool { return last > mid.Status.StreamSequence+20 })
	second := h.startProjector(nil)
	obj := h.waitCaughtUp(ref, 30*time.Second)

	assert.Equal(t, v1beta2.UpgradeStateCompleted, obj.Status.State)
	h.assertMatchesReplay(ref)
	h.assertObjectsMatchLive(ref)
	seen := sequences()
	for i := 1; i < len(seen); i++ {
		require.GreaterOrEqual(t, seen[i], seen[i-1], "streamSequence never goes backwards: %v", seen)
	}
	assert.NotZero(t, second.p.Metrics().CatchUps, "the second projector caught up from the stream")
	assert.NotZero(t, second.p.Metrics().Projected)

	// No transition was announced twice across the restart.
	once := []string{"NodeScheduled", "NodeUpgradeStarted", "NodeUpgradeCompleted", "NodeFinished", "UpgradePlanned", "UpgradeCompleted"}
	evs := eventually(t, 20*time.Second, "the last Events", h.k8sEvents, hasEvents(eventKey{"Normal", "UpgradeCompleted", "DataEngineUpgradeManager", ref.Name}))
	count := map[string]int{}
	for _, ev := range evs {
		if ev.Regarding.Kind != "DataEngineUpgradeManager" || !contains(once, ev.Reason) {
			continue
		}
		related := ""
		if ev.Related != nil {
			related = ev.Related.Name
		}
		n := 1
		if ev.Series != nil {
			n = int(ev.Series.Count)
		}
		count[ev.Reason+" "+related] += n
	}
	for k, n := range count {
		assert.Equal(t, 1, n, "%s announced once", k)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestReplayFromSequenceOneRebuildsIdenticalStatus(t *testing.T) {
	h := newHarness(t, threeNodes(t, sim.Config{Profile: dataplane.ProfileInPlace}), enginetest.Options{})
	ref := h.createManager("replayed")
	first := h.startProjector(nil)
	h.e.Request(ref)
	before := h.waitCaughtUp(ref, 30*time.Second)
	nodesBefore := h.nodeUpgrades(ref.Name)
	require.Len(t, nodesBefore, 3)
	first.stop()

	// Wipe every status and the consumer's position.
	wiped := before.DeepCopy()
	wiped.Status = v1beta2.DataEngineUpgradeManagerStatus{}
	_, err := h.kc.Managers(h.ns).UpdateStatus(h.ctx, wiped)
	require.NoError(t, err)
	for _, nu := range nodesBefore {
		w := nu.DeepCopy()
		w.Status = v1beta2.NodeDataEngineUpgradeStatus{}
		_, err := h.kc.NodeUpgrades(h.ns).UpdateStatus(h.ctx, w)
		require.NoError(t, err)
	}
	require.NoError(t, h.e.JS.DeleteConsumer(h.ctx, h.e.Store.Stream(), topology.ProjectorConsumer))
	after, err := h.kc.Managers(h.ns).Get(h.ctx, ref.Name)
	require.NoError(t, err)
	require.Zero(t, after.Status.StreamSequence, "wiped")

	second := h.startProjector(nil)
	after = eventually(t, 30*time.Second, "replayed to the same sequence", h.getManager(ref.Name), func(o *v1beta2.DataEngineUpgradeManager) bool {
		return o.Status.StreamSequence == before.Status.StreamSequence
	})
	assert.JSONEq(t, toJSON(before.Status), toJSON(after.Status), "identical status after a replay from sequence 1")
	for _, nu := range nodesBefore {
		got, err := h.kc.NodeUpgrades(h.ns).Get(h.ctx, nu.Name)
		require.NoError(t, err)
		assert.JSONEq(t, toJSON(nu.Status), toJSON(got.Status), "identical node upgrade %s", nu.Name)
		assert.Equal(t, nu.UID, got.UID, "the same object, not a new one")
	}
	assert.Equal(t, uint64(len(h.history(ref))), second.p.Metrics().Projected, "every event was folded again, from sequence 1")
}

func TestPoisonMessagesAreDeadLetteredAndProjectionContinues(t *testing.T) {
	h := newHarness(t, threeNodes(t, sim.Config{Profile: dataplane.ProfileInPlace}), enginetest.Options{})
	ref := h.createManager("poisoned")
	r := h.startProjector(nil)

	deadBefore := series(t, "switchback_dead_letters_total", map[string]string{"kind": "event"})
	mgrSubject := events.ManagerAggregate(ref).Subject()
	nodeSubject := events.NodeAggregate(ref, "n2").Subject()
	// Garbage on the manager's own subject: no CloudEvents headers at all.
	garbage, err := h.e.JS.Publish(h.ctx, mgrSubject, []byte("garbage"))
	require.NoError(t, err)
	// A well-formed CloudEvent of a type this release does not know.
	unknown := nats.NewMsg(nodeSubject)
	unknown.Data = []byte(`{}`)
	for k, v := range map[string]string{
		"ce-specversion": "1.0", "ce-id": "bogus-1", "ce-source": "someone/else", "ce-type": "io.switchback.node.bogus.v9",
		"ce-subject": events.NodeAggregate(ref, "n2").String(), "ce-time": time.Now().UTC().Format(time.RFC3339Nano),
		"ce-causationid": "by-hand", "ce-correlationid": ref.UID, "content-type": events.ContentType,
	} {
		unknown.Header.Set(k, v)
	}
	unknownAck, err := h.e.JS.PublishMsg(h.ctx, unknown)
	require.NoError(t, err)
	// And a subject that names no aggregate.
	stray, err := h.e.JS.Publish(h.ctx, "sb.evt.nonsense", []byte("{}"))
	require.NoError(t, err)

	h.e.Request(ref)
	obj := h.waitCaughtUp(ref, 30*time.Second)
	assert.Equal(t, v1beta2.UpgradeStateCompleted, obj.Status.State, "projection went on past the poison")
	h.assertMatchesReplay(ref)

	dlq, err := h.e.JS.Stream(h.ctx, topology.DeadLetterStream)
	require.NoError(t, err)
	for _, c := range []struct {
		subject string
		seq     uint64
		kind    string
	}{
		{mgrSubject, garbage.Sequence, "bad-header"},
		{nodeSubject, unknownAck.Sequence, "unknown-type"},
		{"sb.evt.nonsense", stray.Sequence, "bad-header"},
	} {
		dead, err := dlq.GetLastMsgForSubject(h.ctx, topology.DeadEventSubject(c.subject))
		if !assert.NoError(t, err, "dead letter of %s", c.subject) {
			continue
		}
		assert.True(t, strings.HasPrefix(dead.Subject, "sb.dlq.evt."), dead.Subject)
		assert.Equal(t, c.subject, dead.Header.Get(topology.HeaderDeadSubject))
		assert.Equal(t, strconv.FormatUint(c.seq, 10), dead.Header.Get(topology.HeaderDeadSequence))
		assert.Equal(t, topology.EventStream, dead.Header.Get(topology.HeaderDeadStream))
		assert.Equal(t, topology.ProjectorConsumer, dead.Header.Get(topology.HeaderDeadConsumer))
		assert.Equal(t, c.kind, dead.Header.Get(topology.HeaderDeadKind))
		assert.NotEmpty(t, dead.Header.Get(topology.HeaderDeadReason))
		assert.Equal(t, fmt.Sprintf("dead-evt-%d", c.seq), dead.Header.Get(jetstream.MsgIDHeader))
	}
	assert.Equal(t, "sb.dlq.evt."+strings.TrimPrefix(mgrSubject, "sb.evt."), topology.DeadEventSubject(mgrSubject))

	evs := eventually(t, 20*time.Second, "Warning Events for the poison", h.k8sEvents, func(evs []eventsv1.Event) bool {
		return countEvents(evs, eventKey{"Warning", projector.ReasonEventDeadLettered, "DataEngineUpgradeManager", ref.Name}) == 2
	})
	for _, ev := range evs {
		if ev.Reason == projector.ReasonEventDeadLettered {
			assert.Contains(t, ev.Note, topology.DeadLetterStream)
		}
	}
	assert.Equal(t, uint64(3), r.p.Metrics().Poison)
	assert.Equal(t, deadBefore+3, series(t, "switchback_dead_letters_total", map[string]string{"kind": "event"}), "Prometheus: dead letters")
}

func countEvents(evs []eventsv1.Event, k eventKey) int {
	n := 0
	for _, ev := range evs {
		if keyOf(ev) == k {
			n++
		}
	}
	return n
}

func TestHistoryWithoutItsManagerIsNotProjected(t *testing.T) {
	h := newHarness(t, threeNodes(t, sim.Config{Profile: dataplane.ProfileInPlace}), enginetest.Options{})
	real := h.createManager("real") // never requested
	r := h.startProjector(nil)
	ghost := events.ManagerRef{Namespace: h.ns, Name: "ghost", UID: "uid-ghost"}        // no object at all
	older := events.ManagerRef{Namespace: h.ns, Name: "real", UID: "uid-of-an-old-one"} // another incarnation
	var total int
	for _, ref := range []events.ManagerRef{ghost, older} {
		// An unknown node makes each fail its prechecks at once: a short
		// history that never touches the cluster.
		h.e.Request(ref, "n1", "unknown-node")
		h.e.WaitManager(ref, 20*time.Second, "a terminal state", func(s managerState) bool { return s.Terminal() })
		total += len(h.history(ref))
	}
	last, err := h.e.Store.LastSequence(h.ctx)
	require.NoError(t, err)
	eventually(t, 20*time.Second, "the projector read everything", func() (projector.Metrics, error) { return r.p.Metrics(), nil },
		func(m projector.Metrics) bool { return m.LastSequence == last })
	assert.Equal(t, uint64(total), r.p.Metrics().Ignored)
	obj, err := h.kc.Managers(h.ns).Get(h.ctx, real.Name)
	require.NoError(t, err)
	assert.Zero(t, obj.Status.StreamSequence, "another incarnation's history is not written")
	assert.Empty(t, obj.Status.State)
	list, err := h.kc.NodeUpgrades(h.ns).List(h.ctx, metav1.ListOptions{})
	require.NoError(t, err)
	assert.Empty(t, list.Items)
}

func TestConflictsAndOutagesAreRetriedAndNothingIsLost(t *testing.T) {
	h := newHarness(t, threeNodes(t, slow), enginetest.Options{})
	ref := h.createManager("flaky")
	f := &faults{}
	f.conflictEvery.Store(4) // every fourth status write answers 409
	cfg := rest.CopyConfig(h.env.Config)
	cfg.WrapTransport = f.wrap
	flaky, err := kubeclient.New(cfg)
	require.NoError(t, err)
	const ackWait = time.Second
	r := h.startProjector(func(c *projector.Config) {
		c.Client = flaky
		c.AckWait = ackWait
		c.RetryMax = 100 * time.Millisecond
	})

	// Someone else keeps updating the object between the projector's read
	// and write: real conflicts, on top of the injected ones.
	pokeCtx, stopPoking := context.WithCancel(h.ctx)
	poked := make(chan int)
	go func() {
		n := 0
		for pokeCtx.Err() == nil {
			patch := fmt.Sprintf(`{"metadata":{"annotations":{"test/poke":"%d"}}}`, n)
			if _, err := h.kc.Managers(h.ns).Patch(pokeCtx, ref.Name, types.MergePatchType, []byte(patch), ""); err == nil {
				n++
			}
			select {
			case <-pokeCtx.Done():
			case <-time.After(25 * time.Millisecond):
			}
		}
		poked <- n
	}()

	h.e.Request(ref)
	eventually(t, 20*time.Second, "projection started", h.getManager(ref.Name), func(o *v1beta2.DataEngineUpgradeManager) bool {
		return o.Status.StreamSequence > 0
	})
	// The apiserver becomes unreachable for the projector, for longer than
	// AckWait, while the engine goes on.
	f.down.Store(true)
	downAt := time.Now()
	retriesBefore := r.p.Metrics().WriteRetries
	eventually(t, 30*time.Second, "the projector retried through the outage", func() (projector.Metrics, error) { return r.p.Metrics(), nil },
		func(m projector.Metrics) bool { return f.refused.Load() >= 30 && m.WriteRetries >= retriesBefore+30 })
	f.down.Store(false)
	t.Logf("apiserver unreachable for %s", time.Since(downAt).Round(time.Millisecond))
	upAt := time.Now()

	obj := h.waitCaughtUp(ref, 30*time.Second)
	t.Logf("caught up %s after the outage; %+v, %d injected 409s", time.Since(upAt).Round(time.Millisecond), r.p.Metrics(), f.injected.Load())
	stopPoking()
	assert.NotZero(t, <-poked, "the object was updated concurrently")
	assert.Equal(t, v1beta2.UpgradeStateCompleted, obj.Status.State)
	h.assertMatchesReplay(ref)

	m := r.p.Metrics()
	assert.NotZero(t, f.injected.Load(), "409s were injected")
	assert.Greater(t, m.WriteRetries, uint64(30))
	assert.Zero(t, m.WriteFailures)
	assert.Zero(t, m.Redelivered, "InProgress kept every message in hand from being redelivered during the outage")
	cons, err := h.e.JS.Consumer(h.ctx, h.e.Store.Stream(), topology.ProjectorConsumer)
	require.NoError(t, err)
	ci := eventually(t, 10*time.Second, "every message acked", func() (*jetstream.ConsumerInfo, error) { return cons.Info(h.ctx) },
		func(ci *jetstream.ConsumerInfo) bool { return ci.NumAckPending == 0 })
	assert.Zero(t, ci.NumRedelivered)
}
