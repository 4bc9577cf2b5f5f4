package longhorn_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/longhorn"
	"github.com/switchback-dev/switchback/sim"
	"github.com/switchback-dev/switchback/test/harness/testenv"
	"github.com/switchback-dev/switchback/test/harness/webhooktest"
)

// TestWorkerPolicyScopesTheWorkloadMove runs the writes of moving node n1's
// workloads as n1's worker, under deploy/rbac (RBAC and the admission
// policy) and the eviction scope of deploy/webhook/worker-evictions.yaml:
// the reads of what holds the node succeed; the taint goes on and off n1,
// the pod on n1 is evicted by its uid, the share-manager pod on n1 is
// deleted. The same on n2's objects, other taints, labels, a plain pod's
// delete and an eviction without a uid are refused with a message naming
// the rule.
func TestWorkerPolicyScopesTheWorkloadMove(t *testing.T) {
	s := sim.New(sim.Config{LonghornVersion: "v1.12.1"})
	for _, n := range []string{"n1", "n2"} {
		require.NoError(t, s.AddNode(n))
	}
	c := newCluster(t, s)
	sc := underWorkerPolicy(t, c)
	ctx := c.ctx
	tok := sc.podToken(t, "n1")
	n1 := sc.plane(t, tok, testLog())
	raw := sc.dynamic(t, tok)
	webhooktest.ServeEvictionScope(t, testenv.Get(t).Config, tokenConfig(t, tok), c.ns, c.plane)

	k := kube{c}
	shareManager := func(p *corev1.Pod) { p.Labels = map[string]string{"longhorn.io/component": "share-manager"} }
	k.pod("app-n1", "n1", nil, nil)
	k.pod("app-n2", "n2", nil, nil)
	k.pod("plain-n1", "n1", nil, nil)
	k.pod("share-manager-a", "n1", nil, shareManager)
	k.pod("share-manager-b", "n2", nil, shareManager)
	pods := c.dyn.Resource(longhorn.PodsResource).Namespace(c.ns)
	uid := func(name string) string {
		t.Helper()
		u, err := pods.Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		return string(u.GetUID())
	}
	deleting := func(name string) bool {
		t.Helper()
		u, err := pods.Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		return u.GetDeletionTimestamp() != nil
	}
	refused := func(err error, rule string) {
		t.Helper()
		require.Error(t, err)
		assert.True(t, apierrors.IsForbidden(err), "a denial is Forbidden: %v", err)
		assert.Contains(t, err.Error(), rule)
	}

	w, err := n1.Workloads(ctx, "n1")
	require.NoError(t, err, "the worker's RBAC reads what holds its node")
	assert.NotEmpty(t, w.Pods)

	// The taint: on and off its own node only, and nothing else of it.
	require.NoError(t, n1.TaintNode(ctx, "n1"))
	u, err := c.dyn.Resource(longhorn.KubeNodesResource).Get(ctx, "n1", metav1.GetOptions{})
	require.NoError(t, err)
	taints, _, _ := unstructured.NestedSlice(u.Object, "spec", "taints")
	assert.Contains(t, taints, map[string]any{"key": dataplane.WorkloadTaintKey, "effect": "NoSchedule"})
	require.NoError(t, n1.UntaintNode(ctx, "n1"))
	refused(n1.TaintNode(ctx, "n2"), `a worker changes only its own node ("n1")`)
	edit := func(change func(u *unstructured.Unstructured)) error {
		u, err := raw.Resource(longhorn.KubeNodesResource).Get(ctx, "n1", metav1.GetOptions{})
		require.NoError(t, err)
		change(u)
		_, err = raw.Resource(longhorn.KubeNodesResource).Update(ctx, u, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	}
	refused(edit(func(u *unstructured.Unstructured) {
		require.NoError(t, unstructured.SetNestedSlice(u.Object, []any{map[string]any{"key": "other", "effect": "NoSchedule"}}, "spec", "taints"))
	}), "it changes no other taint")
	refused(edit(func(u *unstructured.Unstructured) {
		require.NoError(t, unstructured.SetNestedSlice(u.Object, []any{map[string]any{"key": dataplane.WorkloadTaintKey, "effect": "NoExecute"}}, "spec", "taints"))
	}), "only puts the NoSchedule taint")
	refused(edit(func(u *unstructured.Unstructured) { u.SetLabels(map[string]string{"x": "y"}) }), "it changes metadata.labels")
	refused(edit(func(u *unstructured.Unstructured) {
		require.NoError(t, unstructured.SetNestedField(u.Object, true, "spec", "unschedulable"))
	}), "no other spec field")

	// Evictions: a pod of its own node, by its uid.
	refused(n1.EvictPod(ctx, c.ns+"/app-n2", uid("app-n2")), `it is bound to node "n2" (spec.nodeName)`)
	assert.False(t, deleting("app-n2"))
	eviction := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "policy/v1", "kind": "Eviction",
		"metadata": map[string]any{"name": "app-n1", "namespace": c.ns}}}
	_, err = raw.Resource(longhorn.PodsResource).Namespace(c.ns).Create(ctx, eviction, metav1.CreateOptions{}, "eviction")
	refused(err, "the eviction names no uid")
	assert.False(t, deleting("app-n1"))
	require.NoError(t, n1.EvictPod(ctx, c.ns+"/app-n1", uid("app-n1")))
	assert.True(t, deleting("app-n1"), "evicted")

	// Deletes: a share-manager pod of its own node only.
	refused(n1.RestartShareManager(ctx, c.ns+"/share-manager-b", uid("share-manager-b")), `it is a share-manager pod bound to node "n2"`)
	refused(raw.Resource(longhorn.PodsResource).Namespace(c.ns).Delete(ctx, "plain-n1", metav1.DeleteOptions{}),
		`it is not a share-manager pod (label longhorn.io/component "")`)
	assert.False(t, deleting("share-manager-b"))
	assert.False(t, deleting("plain-n1"))
	require.NoError(t, n1.RestartShareManager(ctx, c.ns+"/share-manager-a", uid("share-manager-a")))
	assert.True(t, deleting("share-manager-a"), "deleted")
}
