package projector_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/switchback-dev/switchback/aggregate/manager"
	"github.com/switchback-dev/switchback/api/v1beta2"
	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/metrics"
	"github.com/switchback-dev/switchback/projector"
	"github.com/switchback-dev/switchback/sim"
	"github.com/switchback-dev/switchback/test/harness/enginetest"
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
