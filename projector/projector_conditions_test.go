package projector_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/switchback-dev/switchback/aggregate/nodeupgrade"
	"github.com/switchback-dev/switchback/api/v1beta2"
	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/projector"
	"github.com/switchback-dev/switchback/sim"
	"github.com/switchback-dev/switchback/test/harness/enginetest"
)

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
