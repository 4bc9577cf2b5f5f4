package longhorn_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/longhorn"
	"github.com/switchback-dev/switchback/sim"
)

// TestEvictPodThroughTheEvictionAPI: on the real apiserver an eviction a
// budget refuses is ErrDisruptionBudget with the apiserver's words, one it
// allows deletes the pod (gracefully: no kubelet finishes it here), an
// eviction of a pod recreated under the same name (another uid) or of a pod
// gone is a no-op, and a malformed name is refused.
func TestEvictPodThroughTheEvictionAPI(t *testing.T) {
	s := sim.New(sim.Config{LonghornVersion: "v1.12.1"})
	require.NoError(t, s.AddNode("ev1"))
	c := newCluster(t, s)
	k := kube{c}
	pods := c.dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "pods"}).Namespace(c.ns)
	budgets := schema.GroupVersionResource{Group: "policy", Version: "v1", Resource: "poddisruptionbudgets"}
	running := func(name string) string {
		t.Helper()
		k.pod(name, "ev1", nil, func(p *corev1.Pod) { p.Labels = map[string]string{"app": "db"} })
		u, err := pods.Get(c.ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		// A Running, Ready pod: the eviction API checks the budget only for
		// those.
		require.NoError(t, unstructured.SetNestedField(u.Object, map[string]any{"phase": "Running",
			"conditions": []any{map[string]any{"type": "Ready", "status": "True"}}}, "status"))
		_, err = pods.UpdateStatus(c.ctx, u, metav1.UpdateOptions{})
		require.NoError(t, err)
		return string(u.GetUID())
	}
	one := intstr.FromInt32(1)
	pdb := k.create(budgets, true, &policyv1.PodDisruptionBudget{TypeMeta: metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"},
		ObjectMeta: metav1.ObjectMeta{Name: "db"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}}})
	status := func(allowed int64) {
		t.Helper()
		require.NoError(t, unstructured.SetNestedField(pdb.Object, map[string]any{"observedGeneration": pdb.GetGeneration(), "disruptionsAllowed": allowed,
			"currentHealthy": int64(1), "desiredHealthy": int64(1), "expectedPods": int64(1)}, "status"))
		var err error
		pdb, err = c.dyn.Resource(budgets).Namespace(c.ns).UpdateStatus(c.ctx, pdb, metav1.UpdateOptions{})
		require.NoError(t, err)
	}

	uid := running("db-0")
	status(0)
	err := c.plane.EvictPod(c.ctx, c.ns+"/db-0", uid)
	require.ErrorIs(t, err, dataplane.ErrDisruptionBudget)
	assert.Contains(t, err.Error(), "disruption budget", "the apiserver's words")

	status(1)
	require.NoError(t, c.plane.EvictPod(c.ctx, c.ns+"/db-0", "not-its-uid"), "another pod of that name: a no-op")
	u, err := pods.Get(c.ctx, "db-0", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Nil(t, u.GetDeletionTimestamp(), "not evicted: the uid did not match")
	got, err := c.dyn.Resource(budgets).Namespace(c.ns).Get(c.ctx, "db", metav1.GetOptions{})
	require.NoError(t, err)
	allowed, _, _ := unstructured.NestedInt64(got.Object, "status", "disruptionsAllowed")
	assert.Equal(t, int64(1), allowed, "and the budget's disruption not spent on it")

	require.NoError(t, c.plane.EvictPod(c.ctx, c.ns+"/db-0", uid))
	u, err = pods.Get(c.ctx, "db-0", metav1.GetOptions{})
	require.NoError(t, err)
	assert.NotNil(t, u.GetDeletionTimestamp(), "evicted: deleted gracefully, a kubelet would finish it")

	require.NoError(t, c.plane.EvictPod(c.ctx, c.ns+"/gone", "x"), "a pod gone is a no-op")
	assert.ErrorIs(t, c.plane.EvictPod(c.ctx, "no-namespace", "x"), dataplane.ErrRefused)
}

// TestTaintNodeKeepsTheOtherTaints: the move's taint is added once and
// removed alone; the node's other taints (with their timeAdded) stay as
// the apiserver serves them, and the adapter reads the taint back.
func TestTaintNodeKeepsTheOtherTaints(t *testing.T) {
	c, other, taints := nodeWithATaint(t, "tn1")
	tainted := func() bool {
		n, err := c.plane.Node(c.ctx, "tn1")
		require.NoError(t, err)
		return n.WorkloadTainted
	}
	require.NoError(t, c.plane.TaintNode(c.ctx, "tn1"))
	require.NoError(t, c.plane.TaintNode(c.ctx, "tn1"), "again: a no-op")
	assert.Equal(t, []any{other, map[string]any{"key": dataplane.WorkloadTaintKey, "effect": "NoSchedule"}}, taints())
	require.Eventually(t, tainted, 10e9, 10e6, "the adapter reads the taint")

	require.NoError(t, c.plane.UntaintNode(c.ctx, "tn1"))
	require.NoError(t, c.plane.UntaintNode(c.ctx, "tn1"), "again: a no-op")
	assert.Equal(t, []any{other}, taints(), "the other taint untouched")
	require.Eventually(t, func() bool { return !tainted() }, 10e9, 10e6)
	assert.ErrorIs(t, c.plane.TaintNode(c.ctx, "no-such-node"), dataplane.ErrNotFound)
}

// TestMarkUpgradePendingKeepsTheOtherTaints: the mark of a node still to
// come is a PreferNoSchedule taint valued with its manager's UID: set
// once, replaced by another manager's, removed alone; the other taints
// stay as served, and the adapter reads the mark back.
func TestMarkUpgradePendingKeepsTheOtherTaints(t *testing.T) {
	c, other, taints := nodeWithATaint(t, "mn1")
	mark := func() string {
		n, err := c.plane.Node(c.ctx, "mn1")
		require.NoError(t, err)
		return n.UpgradePendingMark
	}
	pending := func(uid string) map[string]any {
		return map[string]any{"key": dataplane.UpgradePendingTaintKey, "value": uid, "effect": "PreferNoSchedule"}
	}

	require.NoError(t, c.plane.MarkUpgradePending(c.ctx, "mn1", "uid-a"))
	require.NoError(t, c.plane.MarkUpgradePending(c.ctx, "mn1", "uid-a"), "again: a no-op")
	assert.Equal(t, []any{other, pending("uid-a")}, taints())
	require.Eventually(t, func() bool { return mark() == "uid-a" }, 10e9, 10e6, "the adapter reads the mark")

	require.NoError(t, c.plane.MarkUpgradePending(c.ctx, "mn1", "uid-b"))
	assert.Equal(t, []any{other, pending("uid-b")}, taints(), "replaced in place")

	require.NoError(t, c.plane.MarkUpgradePending(c.ctx, "mn1", ""))
	require.NoError(t, c.plane.MarkUpgradePending(c.ctx, "mn1", ""), "again: a no-op")
	assert.Equal(t, []any{other}, taints(), "the other taint untouched")
	require.Eventually(t, func() bool { return mark() == "" }, 10e9, 10e6)
	assert.ErrorIs(t, c.plane.MarkUpgradePending(c.ctx, "no-such-node", "uid-a"), dataplane.ErrNotFound)
}

// nodeWithATaint is a cluster with Kubernetes node name carrying one taint
// of someone else's (other, as written), and a reader of the node's taints
// as the apiserver serves them.
func nodeWithATaint(t *testing.T, name string) (*cluster, map[string]any, func() []any) {
	t.Helper()
	s := sim.New(sim.Config{LonghornVersion: "v1.12.1"})
	require.NoError(t, s.AddNode(name))
	c := newCluster(t, s)
	nodes := c.dyn.Resource(longhorn.KubeNodesResource)
	u, err := nodes.Get(c.ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	other := map[string]any{"key": "dedicated", "value": "storage", "effect": "NoSchedule", "timeAdded": "2026-12-01T10:00:00Z"}
	require.NoError(t, unstructured.SetNestedSlice(u.Object, []any{other}, "spec", "taints"))
	_, err = nodes.Update(c.ctx, u, metav1.UpdateOptions{})
	require.NoError(t, err)
	return c, other, func() []any {
		t.Helper()
		u, err := nodes.Get(c.ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		ts, _, _ := unstructured.NestedSlice(u.Object, "spec", "taints")
		return ts
	}
}

// TestRestartShareManagerDeletesThatPodOnce: on the real apiserver the
// share-manager pod of the uid asked is deleted; one Longhorn started again
// under the same name (another uid), or one gone, is left alone.
func TestRestartShareManagerDeletesThatPodOnce(t *testing.T) {
	s := sim.New(sim.Config{LonghornVersion: "v1.12.1"})
	require.NoError(t, s.AddNode("sm1"))
	c := newCluster(t, s)
	k := kube{c}
	pods := c.dyn.Resource(longhorn.PodsResource).Namespace(c.ns)
	k.pod("share-manager-shared", "sm1", nil, nil)
	u, err := pods.Get(c.ctx, "share-manager-shared", metav1.GetOptions{})
	require.NoError(t, err)
	key := c.ns + "/share-manager-shared"

	require.NoError(t, c.plane.RestartShareManager(c.ctx, key, "started-again"), "another uid: a no-op")
	u2, err := pods.Get(c.ctx, "share-manager-shared", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Nil(t, u2.GetDeletionTimestamp(), "not deleted: the uid did not match")

	require.NoError(t, c.plane.RestartShareManager(c.ctx, key, string(u.GetUID())))
	u2, err = pods.Get(c.ctx, "share-manager-shared", metav1.GetOptions{})
	require.NoError(t, err)
	assert.NotNil(t, u2.GetDeletionTimestamp(), "deleted gracefully, a kubelet would finish it")

	require.NoError(t, c.plane.RestartShareManager(c.ctx, c.ns+"/gone", "x"), "a pod gone is a no-op")
	assert.ErrorIs(t, c.plane.RestartShareManager(c.ctx, "no-namespace", "x"), dataplane.ErrRefused)
}
