package badinput_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/switchback-dev/switchback/aggregate/manager"
	"github.com/switchback-dev/switchback/aggregate/nodeupgrade"
	"github.com/switchback-dev/switchback/api/v1beta2"
	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/kubeclient"
	"github.com/switchback-dev/switchback/precheck"
	"github.com/switchback-dev/switchback/sim"
	"github.com/switchback-dev/switchback/test/harness/enginetest"
	"github.com/switchback-dev/switchback/webhook"
)

// admit asks the webhook's Admitter about the CREATE of obj, as the
// apiserver would, with the test's namespace as the managed one (the
// apiserver is shared by the package's tests).
func (w *world) admit(obj *v1beta2.DataEngineUpgradeManager) *admissionv1.AdmissionResponse {
	w.t.Helper()
	return admitWith(w.t, w.sim, listedActive(w.kc, w.ns), obj)
}

// listedActive is the admission's active-upgrade check (ActiveFromStore) over
// a store filled by a List at each call: the test admits right after the
// controller wrote a status, before an informer would surely have it.
func listedActive(kc *kubeclient.Client, ns string) webhook.ActiveFunc {
	return func(ctx context.Context, except types.UID) ([]string, error) {
		list, err := kc.Managers(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		store := cache.NewStore(cache.MetaNamespaceKeyFunc)
		for i := range list.Items {
			if err := store.Add(&list.Items[i]); err != nil {
				return nil, err
			}
		}
		return webhook.ActiveFromStore{Store: store, Namespace: ns}.ActiveUpgrades(ctx, except)
	}
}

func admitWith(t *testing.T, cluster dataplane.Reader, active webhook.ActiveUpgrades, obj *v1beta2.DataEngineUpgradeManager) *admissionv1.AdmissionResponse {
	t.Helper()
	a, err := webhook.NewAdmitter(webhook.AdmitterConfig{Namespace: obj.Namespace, Cluster: cluster, Active: active})
	require.NoError(t, err)
	o := obj.DeepCopy()
	o.TypeMeta = metav1.TypeMeta{APIVersion: v1beta2.SchemeGroupVersion.String(), Kind: "DataEngineUpgradeManager"}
	raw, err := json.Marshal(o)
	require.NoError(t, err)
	return a.Admit(context.Background(), &admissionv1.AdmissionRequest{
		UID:       "request-uid",
		Kind:      metav1.GroupVersionKind{Group: v1beta2.GroupName, Version: v1beta2.Version, Kind: "DataEngineUpgradeManager"},
		Resource:  metav1.GroupVersionResource{Group: v1beta2.GroupName, Version: v1beta2.Version, Resource: v1beta2.DataEngineUpgradeManagerResource},
		Name:      o.Name,
		Namespace: o.Namespace,
		Operation: admissionv1.Create,
		Object:    runtime.RawExtension{Raw: raw},
	})
}

func failedCheck(st manager.State, check string) (manager.PrecheckResult, bool) {
	for _, p := range st.Prechecks {
		if p.Check == check && !p.Passed {
			return p, true
		}
	}
	return manager.PrecheckResult{}, false
}

// TestUnknownNodes: spec.nodes names nodes that do not exist. Admission
// refuses it naming them; should it get past admission (webhook down, a
// node removed since), the controller refuses it again before touching
// anything, visibly: status message, condition and a Warning Event.
func TestUnknownNodes(t *testing.T) {
	c := newCase(t, "prechecks: unknown nodes in spec.nodes",
		"webhook refuses naming them; controller: error, NodesKnown=False naming them, Warning Event, nothing touched")
	w := newWorld(t, threeNodes(t), enginetest.Options{})
	ref := w.createManager("ghosts", "n1", "ghost-1", "ghost.2")
	obj, err := w.kc.Managers(w.ns).Get(w.ctx, ref.Name)
	require.NoError(t, err)
	resp := w.admit(obj)
	require.False(t, resp.Allowed)
	assert.Contains(t, resp.Result.Message, "ghost-1, ghost.2")
	assert.Contains(t, resp.Result.Message, "NodesKnown")

	w.startProjector()
	w.e.Request(ref, "n1", "ghost-1", "ghost.2")
	st := w.finish(ref, 20*time.Second)
	require.Equal(t, events.ManagerError, st.State)
	p, ok := failedCheck(st, precheck.NodesKnown)
	require.True(t, ok, "NodesKnown failed")
	assert.Contains(t, p.Message, "ghost-1, ghost.2")
	assert.Empty(t, st.Nodes, "no node was started")
	actions, _ := w.sim.ActionLog()
	assert.Empty(t, actions, "the cluster was not touched")

	got, err := w.kc.Managers(w.ns).Get(w.ctx, ref.Name)
	require.NoError(t, err)
	assert.Equal(t, v1beta2.UpgradeStateError, got.Status.State)
	assert.Contains(t, got.Status.Message, precheck.NodesKnown)
	cond := meta.FindStatusCondition(got.Status.Conditions, v1beta2.ConditionNodesKnown)
	require.NotNil(t, cond)
	assert.Equal(t, metav1.ConditionFalse, cond.Status)
	assert.Contains(t, cond.Message, "ghost-1, ghost.2")
	warnings := waitFor(t, 20*time.Second, "a Warning Event naming the check", w.warnings, func(evs []eventsv1.Event) bool {
		for _, ev := range evs {
			if strings.Contains(ev.Note, "ghost-1") {
				return true
			}
		}
		return false
	})
	w.assertStatusIsReplay(ref)
	c.Got("webhook: %s; status: %s / %s=%s; %d Warning Event(s)", denial(resp.Result.Message), got.Status.State, cond.Type, cond.Status, len(warnings))
}

// denial is the webhook's message without the "DataEngineUpgradeManager
// "ns/name" refused: " preamble, on one line.
func denial(s string) string {
	if _, after, ok := strings.Cut(s, " refused: "); ok {
		s = after
	}
	return strings.Join(strings.Fields(s), " ")
}

// TestOneNodeCluster: a single v2 node cannot be upgraded live (its targets
// have nowhere to go).
func TestOneNodeCluster(t *testing.T) {
	c := newCase(t, "prechecks: 1-node cluster",
		"webhook refuses (AtLeastTwoNodes); controller: error AtLeastTwoNodes, nothing touched")
	solo := sim.New(sim.Config{Profile: dataplane.ProfileInPlace})
	require.NoError(t, solo.AddNode("solo"))
	require.NoError(t, solo.AddVolume("vol", sim.EngineV2, []string{"solo"}, "solo"))
	obj := &v1beta2.DataEngineUpgradeManager{
		ObjectMeta: metav1.ObjectMeta{Name: "solo", Namespace: "longhorn-system", UID: "uid-solo"},
		Spec:       v1beta2.DataEngineUpgradeManagerSpec{DataEngine: v1beta2.DataEngineTypeV2},
	}
	none := webhook.ActiveFunc(func(context.Context, types.UID) ([]string, error) { return nil, nil })
	resp := admitWith(t, solo, none, obj)
	require.False(t, resp.Allowed)
	assert.Contains(t, resp.Result.Message, precheck.AtLeastTwoNodes)

	e := engineOnly(t, solo)
	ref := events.ManagerRef{Namespace: "longhorn-system", Name: "solo", UID: "uid-solo"}
	e.Request(ref)
	st := e.WaitManager(ref, 20*time.Second, "a terminal state", terminal)
	require.Equal(t, events.ManagerError, st.State)
	p, ok := failedCheck(st, precheck.AtLeastTwoNodes)
	require.True(t, ok)
	assert.Empty(t, st.Nodes)
	actions, _ := solo.ActionLog()
	assert.Empty(t, actions, "the cluster was not touched")
	c.Got("webhook: %s; controller: %s, %s: %s", denial(resp.Result.Message), st.State, p.Check, p.Message)
}

// TestSecondActiveManager: while one upgrade runs, another is refused at
// admission and, if it gets through, by the controller; the first one is
// not disturbed and completes.
func TestSecondActiveManager(t *testing.T) {
	c := newCase(t, "prechecks: a second active manager",
		"webhook refuses naming the active one; controller: second fails SingleActiveUpgrade; first completes")
	w, first := stalledUpgrade(t, "first")

	second := w.createManager("second")
	obj, err := w.kc.Managers(w.ns).Get(w.ctx, second.Name)
	require.NoError(t, err)
	resp := w.admit(obj)
	require.False(t, resp.Allowed)
	assert.Contains(t, resp.Result.Message, w.ns+"/first")

	w.e.Request(second)
	st2 := w.finish(second, 20*time.Second)
	require.Equal(t, events.ManagerError, st2.State)
	p, ok := failedCheck(st2, precheck.SingleActiveUpgrade)
	require.True(t, ok)
	assert.Contains(t, p.Message, w.ns+"/first")

	require.NoError(t, w.sim.HealTargetMoveFailure("vol-0"))
	st1 := w.finish(first, 30*time.Second)
	assert.Equal(t, events.ManagerCompleted, st1.State, st1.Message)
	w.onceEach(first)
	assert.Zero(t, w.sim.IOStats().Failed)
	w.assertStatusIsReplay(first)
	w.assertStatusIsReplay(second)
	c.Got("webhook: %s; second: %s (%s); first: %s", denial(resp.Result.Message), st2.State, p.Check, st1.State)
}

// TestNodeRemovedMidUpgrade: the node being upgraded disappears from the
// cluster. Its upgrade fails (a node that is gone cannot be finished), the
// manager fails, and it is visible in the status and as Events.
func TestNodeRemovedMidUpgrade(t *testing.T) {
	c := newCase(t, "cluster: node removed mid-upgrade",
		"node error NodeDeleted, manager error naming it, Warning Event; other volumes safe")
	cluster := threeNodes(t)
	require.NoError(t, cluster.InjectTargetMoveFailure("vol-0")) // hold n1 in switching-over
	w := newWorld(t, cluster, enginetest.Options{})
	w.startProjector()
	ref := w.createManager("node-gone")
	w.e.Request(ref)
	w.e.WaitNode(ref, "n1", 20*time.Second, "switching-over", func(n nodeupgrade.State) bool { return n.State == events.NodeSwitchingOver })
	require.NoError(t, cluster.InjectNodeDeleted("n1"))
	st := w.finish(ref, 20*time.Second)
	require.Equal(t, events.ManagerError, st.State)
	n := w.e.Node(ref, "n1")
	assert.Equal(t, events.NodeError, n.State)
	assert.Equal(t, "NodeDeleted", n.FailReason)
	assert.Contains(t, st.Message, "n1")
	for _, u := range cluster.Unsafe("") {
		assert.True(t, u.Injected, "only what the removal itself broke is unsafe: %+v", u)
	}
	assert.Zero(t, cluster.IOStats().FailedByActions(), "no I/O failed because of an upgrade action")
	got, err := w.kc.Managers(w.ns).Get(w.ctx, ref.Name)
	require.NoError(t, err)
	assert.Equal(t, v1beta2.UpgradeStateError, got.Status.State)
	assert.Equal(t, v1beta2.NodeUpgradeStateError, got.Status.UpgradeNodes["n1"].State)
	waitFor(t, 20*time.Second, "a Warning Event about n1", w.warnings, func(evs []eventsv1.Event) bool {
		for _, ev := range evs {
			if strings.Contains(ev.Note, "removed from the cluster") {
				return true
			}
		}
		return false
	})
	w.assertStatusIsReplay(ref)
	c.Got("node n1: %s (%s); manager: %s %q", n.State, n.FailReason, got.Status.State, got.Status.Message)
}
