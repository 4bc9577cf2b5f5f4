package deploy

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
)

// TestControllersRunOnTrustedNodesOnly: a controller holds the callout's
// issuer key, which root on its node can read, so the scheduler may place
// one on a control-plane node or a node labelled switchback.dev/controller
// only, as the scheduler's own node-affinity and taint checks decide; the
// workers still run on every untainted node.
func TestControllersRunOnTrustedNodesOnly(t *testing.T) {
	m := render(t, repoPath(t, "deploy"))
	controlPlaneTaint := corev1.Taint{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}
	storageTaint := corev1.Taint{Key: "storage", Value: "longhorn", Effect: corev1.TaintEffectNoSchedule}
	cases := []struct {
		name       string
		labels     map[string]string
		taints     []corev1.Taint
		controller bool
	}{
		{"a control-plane node", map[string]string{"node-role.kubernetes.io/control-plane": ""}, []corev1.Taint{controlPlaneTaint}, true},
		{"an untainted control-plane node", map[string]string{"node-role.kubernetes.io/control-plane": ""}, nil, true},
		{"a labelled node", map[string]string{"switchback.dev/controller": ""}, nil, true},
		{"a worker node", map[string]string{"kubernetes.io/hostname": "n1"}, nil, false},
		{"a tainted storage node", nil, []corev1.Taint{storageTaint}, false},
		{"a labelled, tainted storage node", map[string]string{"switchback.dev/controller": ""}, []corev1.Taint{storageTaint}, false},
	}
	for _, c := range cases {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node", Labels: c.labels}, Spec: corev1.NodeSpec{Taints: c.taints}}
		assert.Equal(t, c.controller, schedulable(t, m.workload(t, "switchback-controller").pod.Spec, node), "controller on %s", c.name)
		if len(c.taints) == 0 {
			assert.True(t, schedulable(t, m.workload(t, "switchback-worker").pod.Spec, node), "a worker on %s", c.name)
		}
	}
}

// schedulable reports whether the scheduler's node-affinity and taint
// filters let pod onto node.
func schedulable(t *testing.T, pod corev1.PodSpec, node *corev1.Node) bool {
	t.Helper()
	p := &corev1.Pod{Spec: pod}
	ok, err := nodeaffinity.GetRequiredNodeAffinity(p).Match(node)
	require.NoError(t, err)
	_, untolerated := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), node.Spec.Taints, pod.Tolerations, func(t *corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
	}, false)
	return ok && !untolerated
}
