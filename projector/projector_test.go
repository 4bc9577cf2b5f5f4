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
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/switchback-dev/switchback/aggregate/manager"
	"github.com/switchback-dev/switchback/aggregate/nodeupgrade"
	"github.com/switchback-dev/switchback/api/v1beta2"
	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/internal/enginetest"
	"github.com/switchback-dev/switchback/kubeclient"
	"github.com/switchback-dev/switchback/metrics"
	"github.com/switchback-dev/switchback/projector"
	"github.com/switchback-dev/switchback/sim"
	"github.com/switchback-dev/switchback/topology"
)

type managerState = manager.State

var prechecks = []string{
	v1beta2.ConditionDataEngineSupported, v1beta2.ConditionNodesKnown, v1beta2.ConditionAtLeastTwoNodes,
	v1beta2.ConditionSingleActiveUpgrade, v1beta2.ConditionNoOtherUpgrader, v1beta2.ConditionDefaultImageOnAllNodesReady,
	v1beta2.ConditionNoVersionDrift, v1beta2.ConditionVolumesHealthy,
}

func TestUpgradeIsProjected(t *testing.T) {
	// A generous StallAfter: a clean upgrade must show no Warning, even on
	// a loaded machine where a step may take a while.
	h := newHarness(t, threeNodes(t, sim.Config{Profile: dataplane.ProfileInPlace}), enginetest.Options{StallAfter: 10 * time.Second})
	ref := h.createManager("upgrade-all")
	sequences := h.watchSequences(ref.Name)
	r := h.startProjector(nil)

	// A user waits for the upgrade the generic way, from before it starts.
	waited := make(chan error, 1)
	go func() {
		_, stderr, err := h.env.Kubectl(h.ctx, nil, "wait", "--for=condition=Ready", "-n", h.ns, "lhum/"+ref.Name, "--timeout=60s")
		if err != nil {
			err = fmt.Errorf("%w: %s", err, stderr)
		}
		waited <- err
	}()
	h.e.Request(ref)
	obj := h.waitCaughtUp(ref, 30*time.Second)
	select {
	case err := <-waited:
		require.NoError(t, err, "kubectl wait --for=condition=Ready returns once completed")
	case <-time.After(30 * time.Second):
		t.Fatal("kubectl wait did not return")
	}

	st := obj.Status
	assert.Equal(t, v1beta2.UpgradeStateCompleted, st.State)
	assert.Equal(t, obj.Generation, st.ObservedGeneration)
	assert.Equal(t, sim.NewIMImage, st.InstanceManagerImage)
	assert.Empty(t, st.UpgradingNode)
	assert.Equal(t, int32(3), st.TotalNodes)
	assert.Equal(t, int32(3), st.CompletedNodes)
	assert.Contains(t, st.Message, "upgraded 3 node(s)")
	for _, n := range []string{"n1", "n2", "n3"} {
		assert.Equal(t, v1beta2.NodeUpgradeStateCompleted, st.UpgradeNodes[n].State, "node %s", n)
	}
	for _, c := range st.Conditions {
		assert.Equal(t, obj.Generation, c.ObservedGeneration, "condition %s", c.Type)
	}
	for _, check := range prechecks {
		c := meta.FindStatusCondition(st.Conditions, check)
		if assert.NotNil(t, c, "precheck condition %s", check) {
			assert.Equal(t, metav1.ConditionTrue, c.Status, check)
			assert.Equal(t, v1beta2.ReasonChecksPassed, c.Reason, check)
		}
	}
	assertCondition(t, st.Conditions, v1beta2.ConditionReady, metav1.ConditionTrue, v1beta2.ReasonCompleted)
	assertCondition(t, st.Conditions, v1beta2.ConditionProgressing, metav1.ConditionFalse, v1beta2.ReasonCompleted)
	assertCondition(t, st.Conditions, v1beta2.ConditionStalled, metav1.ConditionFalse, v1beta2.ReasonCompleted)
	assertCondition(t, st.Conditions, v1beta2.ConditionDegraded, metav1.ConditionFalse, v1beta2.ReasonCompleted)

	nodes := h.nodeUpgrades(ref.Name)
	require.Len(t, nodes, 3)
	for _, nu := range nodes {
		node := nu.Spec.NodeID
		assert.Equal(t, projector.NodeUpgradeName(ref.Name, node), nu.Name)
		assert.Equal(t, node, nu.Labels[v1beta2.LabelNode])
		owner := metav1.GetControllerOf(&nu)
		if assert.NotNil(t, owner, "%s is controlled by its manager", nu.Name) {
			assert.Equal(t, types.UID(ref.UID), owner.UID)
			assert.Equal(t, "DataEngineUpgradeManager", owner.Kind)
			assert.True(t, owner.BlockOwnerDeletion != nil && *owner.BlockOwnerDeletion)
		}
		assert.Equal(t, v1beta2.NodeDataEngineUpgradeSpec{NodeID: node, DataEngine: v1beta2.DataEngineTypeV2,
			InstanceManagerImage: sim.NewIMImage, DataEngineUpgradeManager: ref.Name}, nu.Spec)
		assert.Equal(t, v1beta2.NodeUpgradeStateCompleted, nu.Status.State, node)
		assert.NotEmpty(t, nu.Status.Volumes, node)
		assert.Equal(t, int32(len(nu.Status.Volumes)), nu.Status.VolumeCount)
		for vol, vs := range nu.Status.Volumes {
			assert.Equal(t, v1beta2.VolumeUpgradeStateCompleted, vs.State, "volume %s on %s", vol, node)
		}
		assert.NotZero(t, nu.Status.StreamSequence)
		assert.Equal(t, nu.Generation, nu.Status.ObservedGeneration)
		assertCondition(t, nu.Status.Conditions, v1beta2.ConditionReady, metav1.ConditionTrue, v1beta2.ReasonCompleted)
	}
	h.assertMatchesReplay(ref)

	out, stderr, err := h.env.Kubectl(h.ctx, nil, "get", "lhum,lhnu", "-n", h.ns)
	require.NoError(t, err, stderr)
	t.Logf("kubectl get lhum,lhnu:\n%s", out)
	for _, col := range []string{"STATE", "UPGRADING NODE", "COMPLETED", "TOTAL", "NODE", "VOLUMES"} {
		assert.Contains(t, out, col)
	}
	assert.Regexp(t, `(?m)^dataengineupgrademanager\S*/upgrade-all\s+completed\s+3\s+3\s`, out)
	for _, nu := range nodes {
		assert.Regexp(t, fmt.Sprintf(`(?m)^nodedataengineupgrade\S*/%s\s+%s\s+completed\s+%d\s`, nu.Name, nu.Spec.NodeID, nu.Status.VolumeCount), out)
	}

	// Every transition is an Event: on the manager, on each node upgrade,
	// and on each core Node (which does not even exist here).
	want := []eventKey{}
	for _, reason := range []string{"UpgradeRequested", "PrecheckPassed", "UpgradePlanned", "NodeScheduled", "NodeUpgradeStarted",
		"NodeInitializing", "NodeSwitchingOver", "NodeSwitchingBack", "VolumeRecorded", "VolumeSwitchedOver", "VolumeCompleted",
		"NodeUpgradeCompleted", "NodeFinished", "UpgradeCompleted"} {
		want = append(want, eventKey{"Normal", reason, "DataEngineUpgradeManager", ref.Name})
	}
	for _, nu := range nodes {
		want = append(want,
			eventKey{"Normal", "NodeUpgradeStarted", "NodeDataEngineUpgrade", nu.Name},
			eventKey{"Normal", "NodeUpgradeCompleted", "NodeDataEngineUpgrade", nu.Name},
			eventKey{"Normal", "VolumeCompleted", "NodeDataEngineUpgrade", nu.Name},
			eventKey{"Normal", "NodeScheduled", "Node", nu.Spec.NodeID},
			eventKey{"Normal", "NodeUpgradeCompleted", "Node", nu.Spec.NodeID})
	}
	evs := eventually(t, 20*time.Second, "an Event for every transition", h.k8sEvents, hasEvents(want...))
	for _, ev := range evs {
		assert.Equal(t, "Normal", ev.Type, "a clean upgrade has no warning: %s %s", ev.Reason, ev.Note)
		assert.Equal(t, projector.ReportingController, ev.ReportingController)
		assert.NotEmpty(t, ev.Note)
	}

	seen := sequences()
	require.NotEmpty(t, seen)
	for i := 1; i < len(seen); i++ {
		require.GreaterOrEqual(t, seen[i], seen[i-1], "streamSequence never goes backwards: %v", seen)
	}
	assert.Equal(t, 3.0, series(t, "switchback_nodes", map[string]string{"manager": h.ns + "/" + ref.Name, "state": "completed"}), "Prometheus: nodes by state")
	assert.Zero(t, series(t, "switchback_nodes", map[string]string{"manager": h.ns + "/" + ref.Name, "state": "pending"}))
	m := r.p.Metrics()
	assert.NotZero(t, m.Projected)
	assert.Zero(t, m.Poison)
	assert.Zero(t, m.Rejected)
	assert.Zero(t, m.WriteFailures)
	assert.NotZero(t, m.EventsRecorded)
}

func assertCondition(t *testing.T, conds []metav1.Condition, typ string, status metav1.ConditionStatus, reason string) *metav1.Condition {
	t.Helper()
	c := meta.FindStatusCondition(conds, typ)
	if !assert.NotNil(t, c, "condition %s", typ) {
		return nil
	}
	assert.Equal(t, status, c.Status, "condition %s: %s", typ, c.Message)
	if reason != "" {
		assert.Equal(t, reason, c.Reason, "condition %s", typ)
	}
	return c
}

func TestFailedPrecheckIsVisibleThreeWays(t *testing.T) {
	cluster := threeNodes(t, sim.Config{Profile: dataplane.ProfileInPlace})
	require.NoError(t, cluster.AddVolume("lonely", sim.EngineV2, []string{"n1"}, "n1"))
	h := newHarness(t, cluster, enginetest.Options{})
	ref := h.createManager("refused")
	h.startProjector(nil)
	h.e.Request(ref)
	obj := h.waitCaughtUp(ref, 20*time.Second)

	st := obj.Status
	assert.Equal(t, v1beta2.UpgradeStateError, st.State)
	// 1. status.message
	assert.Contains(t, st.Message, v1beta2.ConditionVolumesHealthy)
	assert.Contains(t, st.Message, "lonely")
	// 2. conditions: the precheck, and the summaries
	c := assertCondition(t, st.Conditions, v1beta2.ConditionVolumesHealthy, metav1.ConditionFalse, v1beta2.ReasonSingleReplica)
	if c != nil {
		assert.Contains(t, c.Message, "lonely")
	}
	assertCondition(t, st.Conditions, v1beta2.ConditionDegraded, metav1.ConditionTrue, "PrecheckFailed")
	assertCondition(t, st.Conditions, v1beta2.ConditionReady, metav1.ConditionFalse, v1beta2.ReasonFailed)
	assertCondition(t, st.Conditions, v1beta2.ConditionProgressing, metav1.ConditionFalse, v1beta2.ReasonFailed)
	assertCondition(t, st.Conditions, v1beta2.ConditionNodesKnown, metav1.ConditionTrue, v1beta2.ReasonChecksPassed)
	assert.Empty(t, h.nodeUpgrades(ref.Name), "no node was touched")
	// 3. Warning Events
	evs := eventually(t, 20*time.Second, "Warning Events", h.k8sEvents, hasEvents(
		eventKey{"Warning", "PrecheckFailed", "DataEngineUpgradeManager", ref.Name},
		eventKey{"Warning", "UpgradeFailed", "DataEngineUpgradeManager", ref.Name}))
	for _, ev := range evs {
		if ev.Reason == "PrecheckFailed" {
			assert.Contains(t, ev.Note, "lonely")
			assert.Equal(t, "Check"+v1beta2.ConditionVolumesHealthy, ev.Action)
		}
	}
	h.assertMatchesReplay(ref)
}

func TestStalledNodeSurfacesAndHeals(t *testing.T) {
	cluster := threeNodes(t, sim.Config{Profile: dataplane.ProfileInPlace})
	// vol-0 is attached to n1 with its target there: n1's switch-over hangs.
	require.NoError(t, cluster.InjectTargetMoveFailure("vol-0"))
	h := newHarness(t, cluster, enginetest.Options{})
	ref := h.createManager("stuck", "n1", "n2", "n3")
	h.startProjector(nil)
	h.e.Request(ref)

	stalled := eventually(t, 30*time.Second, "Stalled=True", h.getManager(ref.Name), func(o *v1beta2.DataEngineUpgradeManager) bool {
		return meta.IsStatusConditionTrue(o.Status.Conditions, v1beta2.ConditionStalled)
	})
	st := stalled.Status
	c := assertCondition(t, st.Conditions, v1beta2.ConditionStalled, metav1.ConditionTrue, v1beta2.ReasonVolumeBlocked)
	if c != nil {
		assert.Contains(t, c.Message, "vol-0", "the condition names the volume")
		assert.Contains(t, c.Message, "n1")
	}
	assert.Equal(t, v1beta2.UpgradeStateUpgrading, st.State, "stuck is not error")
	assert.Equal(t, "n1", st.UpgradingNode)
	assert.Contains(t, st.Message, "vol-0", "status.message says what blocks")
	assertCondition(t, st.Conditions, v1beta2.ConditionProgressing, metav1.ConditionTrue, v1beta2.ReasonUpgrading)
	assertCondition(t, st.Conditions, v1beta2.ConditionReady, metav1.ConditionFalse, v1beta2.ReasonUpgrading)
	assertCondition(t, st.Conditions, v1beta2.ConditionDegraded, metav1.ConditionFalse, "")
	n1 := projector.NodeUpgradeName(ref.Name, "n1")
	nu := eventually(t, 10*time.Second, "n1's node upgrade stalled", func() (*v1beta2.NodeDataEngineUpgrade, error) {
		return h.kc.NodeUpgrades(h.ns).Get(h.ctx, n1)
	}, func(nu *v1beta2.NodeDataEngineUpgrade) bool {
		return meta.IsStatusConditionTrue(nu.Status.Conditions, v1beta2.ConditionStalled)
	})
	assert.Equal(t, v1beta2.NodeUpgradeStateSwitchingOver, nu.Status.State)
	assert.Contains(t, nu.Status.Message, "vol-0")
	assert.Equal(t, v1beta2.VolumeUpgradeStateSwitchingOver, nu.Status.Volumes["vol-0"].State)
	eventually(t, 20*time.Second, "a Warning Event for the stall", h.k8sEvents, hasEvents(
		eventKey{"Warning", "NodeStalled", "DataEngineUpgradeManager", ref.Name},
		eventKey{"Warning", "NodeStalled", "NodeDataEngineUpgrade", n1},
		eventKey{"Warning", "NodeStalled", "Node", "n1"}))

	// The user fixes the volume: the upgrade goes on by itself.
	require.NoError(t, cluster.HealTargetMoveFailure("vol-0"))
	obj := h.waitCaughtUp(ref, 30*time.Second)
	assert.Equal(t, v1beta2.UpgradeStateCompleted, obj.Status.State)
	assertCondition(t, obj.Status.Conditions, v1beta2.ConditionStalled, metav1.ConditionFalse, v1beta2.ReasonCompleted)
	assertCondition(t, obj.Status.Conditions, v1beta2.ConditionReady, metav1.ConditionTrue, v1beta2.ReasonCompleted)
	healed, err := h.kc.NodeUpgrades(h.ns).Get(h.ctx, n1)
	require.NoError(t, err)
	assertCondition(t, healed.Status.Conditions, v1beta2.ConditionStalled, metav1.ConditionFalse, v1beta2.ReasonCompleted)
	eventually(t, 20*time.Second, "the resume is an Event", h.k8sEvents, hasEvents(
		eventKey{"Normal", "NodeResumed", "DataEngineUpgradeManager", ref.Name}))
	h.assertMatchesReplay(ref)
}

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

func TestCancelIsProjected(t *testing.T) {
	h := newHarness(t, threeNodes(t, slow), enginetest.Options{})
	ref := h.createManager("cancelled")
	h.startProjector(nil)
	h.e.Request(ref)
	first := h.e.WaitManager(ref, 20*time.Second, "a node in flight", func(s managerState) bool { return s.UpgradingNode != "" }).UpgradingNode
	h.e.WaitNode(ref, first, 20*time.Second, "switching over", func(n nodeupgrade.State) bool {
		return n.Exists && n.State == events.NodeSwitchingOver
	})
	// What the intake records when the object is deleted (the finalizer
	// keeps it until the cancel reaches its safe point).
	h.e.Cancel(ref)
	obj := h.waitCaughtUp(ref, 30*time.Second)

	st := obj.Status
	assert.Equal(t, v1beta2.UpgradeStateCancelled, st.State)
	assertCondition(t, st.Conditions, v1beta2.ConditionReady, metav1.ConditionFalse, v1beta2.ReasonCancelled)
	assertCondition(t, st.Conditions, v1beta2.ConditionProgressing, metav1.ConditionFalse, v1beta2.ReasonCancelled)
	assertCondition(t, st.Conditions, v1beta2.ConditionDegraded, metav1.ConditionFalse, v1beta2.ReasonCancelled)
	assert.Equal(t, v1beta2.NodeUpgradeStateCancelled, st.UpgradeNodes[first].State, "the node in flight reached its safe point")
	for node, ns := range st.UpgradeNodes {
		assert.Contains(t, []v1beta2.NodeUpgradeState{v1beta2.NodeUpgradeStateCompleted, v1beta2.NodeUpgradeStateCancelled}, ns.State, "node %s", node)
	}
	nu, err := h.kc.NodeUpgrades(h.ns).Get(h.ctx, projector.NodeUpgradeName(ref.Name, first))
	require.NoError(t, err)
	assert.Equal(t, v1beta2.NodeUpgradeStateCancelled, nu.Status.State)
	h.assertMatchesReplay(ref)
	eventually(t, 20*time.Second, "the cancel is in the Events", h.k8sEvents, hasEvents(
		eventKey{"Normal", "CancelRequested", "DataEngineUpgradeManager", ref.Name},
		eventKey{"Normal", "NodeUpgradeCancelled", "NodeDataEngineUpgrade", nu.Name},
		eventKey{"Normal", "UpgradeCancelled", "DataEngineUpgradeManager", ref.Name}))
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

func TestNames(t *testing.T) {
	assert.Regexp(t, `^up-n1-[0-9a-f]{10}$`, projector.NodeUpgradeName("up", "n1"), "readable, with a hash")
	assert.Regexp(t, `^up-node\.example\.com-[0-9a-f]{10}$`, projector.NodeUpgradeName("up", "node.example.com"))
	assert.NotEqual(t, projector.NodeUpgradeName("a-b", "c"), projector.NodeUpgradeName("a", "b-c"),
		"manager a-b's node c and manager a's node b-c have names of their own")
	long := strings.Repeat("a", 200)
	n := projector.NodeUpgradeName(long, strings.Repeat("b", 100))
	assert.LessOrEqual(t, len(n), projector.MaxNodeUpgradeNameLength)
	assert.NotEqual(t, n, projector.NodeUpgradeName(long, strings.Repeat("b", 99)), "distinct nodes, distinct names")
	assert.Equal(t, n, projector.NodeUpgradeName(long, strings.Repeat("b", 100)), "deterministic")
	assert.Regexp(t, `^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`, n)
	assert.Equal(t, "sb.dlq.evt.ns.name.uid.node.n1", topology.DeadEventSubject("sb.evt.ns.name.uid.node.n1"))
	assert.Equal(t, "sb.dlq.evt."+events.EncodeToken("weird.subject"), topology.DeadEventSubject("weird.subject"))
}

// series reads one series of Switchback's Prometheus registry (gauge or
// counter; 0 when absent).
func series(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	next:
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if want, ok := labels[l.GetName()]; ok && want != l.GetValue() {
					continue next
				}
			}
			return m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	return 0
}

// Longhorn's own upgrader switched on mid-upgrade, seen three ways: the
// NoOtherUpgrader condition turns False and Stalled True with the reason,
// status.message says the upgrade is held, and Warning/Normal Events mark
// the hold and the release; the upgrade then completes.
func TestHeldUpgradeSurfacesAndResumes(t *testing.T) {
	cluster := threeNodes(t, sim.Config{Profile: dataplane.ProfileInPlace, TargetMoveLatency: 50 * time.Millisecond})
	h := newHarness(t, cluster, enginetest.Options{})
	ref := h.createManager("held", "n1", "n2", "n3")
	// Every attached volume's switch-over fails until healed: the first
	// node waits in switching-over while the setting is switched on.
	vols, err := cluster.Volumes(h.ctx)
	require.NoError(t, err)
	for _, v := range vols {
		if v.Attached() {
			require.NoError(t, cluster.InjectTargetMoveFailure(v.Name))
		}
	}
	h.startProjector(nil)
	h.e.Request(ref)
	first := h.e.WaitManager(ref, 20*time.Second, "a node in flight", func(s managerState) bool { return s.UpgradingNode != "" }).UpgradingNode
	h.e.WaitNode(ref, first, 20*time.Second, "stuck switching over", func(n nodeupgrade.State) bool { return n.Stalled })
	cluster.SetLonghornUpgrader(dataplane.LonghornUpgrader{Settings: map[string]string{dataplane.SettingV2IMAutoUpgrade: "true"}})
	for _, v := range vols {
		if v.Attached() {
			require.NoError(t, cluster.HealTargetMoveFailure(v.Name))
		}
	}

	held := eventually(t, 30*time.Second, "NoOtherUpgrader=False", h.getManager(ref.Name), func(o *v1beta2.DataEngineUpgradeManager) bool {
		return meta.IsStatusConditionFalse(o.Status.Conditions, v1beta2.ConditionNoOtherUpgrader) && o.Status.UpgradingNode == ""
	})
	st := held.Status
	assert.Equal(t, v1beta2.UpgradeStateUpgrading, st.State, "held is not error")
	c := assertCondition(t, st.Conditions, v1beta2.ConditionNoOtherUpgrader, metav1.ConditionFalse, v1beta2.ReasonOtherUpgraderActive)
	if c != nil {
		assert.Contains(t, c.Message, `setting allow-v2-instance-manager-automatic-upgrade is "true": set it to "false"`)
		assert.Equal(t, held.Generation, c.ObservedGeneration)
	}
	assertCondition(t, st.Conditions, v1beta2.ConditionStalled, metav1.ConditionTrue, v1beta2.ReasonOtherUpgraderActive)
	assert.Contains(t, st.Message, "held, no new node starts: Longhorn's own instance-manager upgrader would race this upgrade")
	eventually(t, 20*time.Second, "a Warning Event for the hold", h.k8sEvents, hasEvents(
		eventKey{"Warning", "UpgradeHeld", "DataEngineUpgradeManager", ref.Name}))

	cluster.SetLonghornUpgrader(dataplane.LonghornUpgrader{Settings: map[string]string{dataplane.SettingV2IMAutoUpgrade: "false"}})
	obj := h.waitCaughtUp(ref, 30*time.Second)
	assert.Equal(t, v1beta2.UpgradeStateCompleted, obj.Status.State)
	assertCondition(t, obj.Status.Conditions, v1beta2.ConditionNoOtherUpgrader, metav1.ConditionTrue, v1beta2.ReasonChecksPassed)
	assertCondition(t, obj.Status.Conditions, v1beta2.ConditionStalled, metav1.ConditionFalse, v1beta2.ReasonCompleted)
	eventually(t, 20*time.Second, "the release is an Event", h.k8sEvents, hasEvents(
		eventKey{"Normal", "UpgradeReleased", "DataEngineUpgradeManager", ref.Name}))
	h.assertMatchesReplay(ref)
}
