package longhorn_test

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/longhorn"
	"github.com/switchback-dev/switchback/sim"
	"github.com/switchback-dev/switchback/workloadmove"
)

// kube writes Kubernetes objects of one test on the package's apiserver.
type kube struct {
	c *cluster
}

func (k kube) create(gvr schema.GroupVersionResource, namespaced bool, obj runtime.Object) *unstructured.Unstructured {
	k.c.t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	require.NoError(k.c.t, err)
	u := &unstructured.Unstructured{Object: m}
	ri := k.c.dyn.Resource(gvr)
	var out *unstructured.Unstructured
	if namespaced {
		out, err = ri.Namespace(k.c.ns).Create(k.c.ctx, u, metav1.CreateOptions{})
	} else {
		out, err = ri.Create(k.c.ctx, u, metav1.CreateOptions{})
	}
	require.NoError(k.c.t, err, "create %s %s", gvr.Resource, u.GetName())
	return out
}

// claim makes a PersistentVolume of Longhorn's CSI driver for volume and a
// claim bound to it, named after the volume.
func (k kube) claim(volume string) {
	pv := k.c.ns + "-" + volume
	storage := corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}
	k.create(schema.GroupVersionResource{Version: "v1", Resource: "persistentvolumes"}, false, &corev1.PersistentVolume{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolume"},
		ObjectMeta: metav1.ObjectMeta{Name: pv},
		Spec: corev1.PersistentVolumeSpec{Capacity: storage, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: longhorn.CSIDriver, VolumeHandle: volume}}},
	})
	k.create(schema.GroupVersionResource{Version: "v1", Resource: "persistentvolumeclaims"}, true, &corev1.PersistentVolumeClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
		ObjectMeta: metav1.ObjectMeta{Name: volume},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: storage}, VolumeName: pv},
	})
}

// owner makes a workload controller whose pod template sets nodeName, and
// returns the controller reference its pods carry.
func (k kube) owner(kind, name, nodeName string) metav1.OwnerReference {
	labels := map[string]string{"app": name}
	tmpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec: corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	var obj runtime.Object
	res := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "replicasets"}
	switch kind {
	case "ReplicaSet":
		obj = &appsv1.ReplicaSet{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: kind}, ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: tmpl}}
	case "StatefulSet":
		res.Resource = "statefulsets"
		obj = &appsv1.StatefulSet{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: kind}, ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: appsv1.StatefulSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: tmpl}}
	}
	u := k.create(res, true, obj)
	return *metav1.NewControllerRef(u, schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: kind})
}

// pod makes a pod bound to node using claims, edited by edit.
func (k kube) pod(name, node string, claims []string, edit func(*corev1.Pod)) {
	p := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	for _, c := range claims {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: c,
			VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: c}}})
	}
	if edit != nil {
		edit(p)
	}
	k.create(schema.GroupVersionResource{Version: "v1", Resource: "pods"}, true, p)
}

// ticket writes volume's Longhorn VolumeAttachment with one ticket.
func (k kube) ticket(volume, typ, node string) {
	k.c.t.Helper()
	va := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "longhorn.io/v1beta2", "kind": "VolumeAttachment",
		"metadata": map[string]any{"name": volume},
		"spec": map[string]any{"volume": volume, "attachmentTickets": map[string]any{
			typ + "-" + volume: map[string]any{"id": typ + "-" + volume, "type": typ, "nodeID": node, "generation": int64(0)},
		}},
	}}
	_, err := k.c.dyn.Resource(longhorn.VolumeAttachmentsResource).Namespace(k.c.ns).Create(k.c.ctx, va, metav1.CreateOptions{})
	require.NoError(k.c.t, err)
}

// TestWorkloadsReadsWhatHoldsTheNodesInitiators: on the real apiserver,
// the pods bound to a node, the claims they name down to their Longhorn
// volumes, the volumes with a ticket for the node, the budgets selecting
// the pods and what pins a pod to the node are read as the move decides on
// them; and the decision on what was read pins the node on every pod that
// would not move, touching nothing.
func TestWorkloadsReadsWhatHoldsTheNodesInitiators(t *testing.T) {
	s := sim.New(sim.Config{LonghornVersion: "v1.12.1"})
	for _, n := range []string{"wl1", "wl2"} {
		require.NoError(t, s.AddNode(n))
	}
	require.NoError(t, s.AddVolume("web-data", sim.EngineV2, []string{"wl1", "wl2"}, "wl1"))
	require.NoError(t, s.AddVolume("db-data", sim.EngineV2, []string{"wl1", "wl2"}, "wl1"))
	require.NoError(t, s.AddVolume("legacy", sim.EngineV1, []string{"wl1", "wl2"}, "wl1"))
	require.NoError(t, s.AddVolume("manual", sim.EngineV2, []string{"wl1", "wl2"}, ""))
	require.NoError(t, s.AddVolume("far", sim.EngineV2, []string{"wl1", "wl2"}, "wl2"))
	c := newCluster(t, s)
	k := kube{c}
	for _, v := range []string{"web-data", "db-data", "legacy", "far"} {
		k.claim(v)
	}
	k.ticket("web-data", dataplane.AttacherCSI, "wl1")
	k.ticket("manual", dataplane.AttacherLonghornAPI, "wl1")

	web := k.owner("ReplicaSet", "web", "")
	db := k.owner("StatefulSet", "db", "wl1")
	k.pod("web-1", "wl1", []string{"web-data"}, func(p *corev1.Pod) {
		p.Labels = map[string]string{"app": "web"}
		p.OwnerReferences = []metav1.OwnerReference{web}
	})
	k.pod("db-0", "wl1", []string{"db-data"}, func(p *corev1.Pod) { p.OwnerReferences = []metav1.OwnerReference{db} })
	k.pod("tolerant", "wl1", []string{"web-data"}, func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{web}
		p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	})
	k.pod("selected", "wl1", []string{"web-data"}, func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{web}
		p.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": "wl1"}
	})
	k.pod("bare", "wl1", []string{"legacy"}, nil)
	k.pod("elsewhere", "wl2", []string{"far"}, nil)

	one := intstr.FromInt32(1)
	pdb := k.create(schema.GroupVersionResource{Group: "policy", Version: "v1", Resource: "poddisruptionbudgets"}, true, &policyv1.PodDisruptionBudget{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"},
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
	})
	// What the disruption controller would write.
	require.NoError(t, unstructured.SetNestedField(pdb.Object, map[string]any{"observedGeneration": pdb.GetGeneration(), "disruptionsAllowed": int64(1),
		"currentHealthy": int64(1), "desiredHealthy": int64(0), "expectedPods": int64(1)}, "status"))
	_, err := c.dyn.Resource(schema.GroupVersionResource{Group: "policy", Version: "v1", Resource: "poddisruptionbudgets"}).Namespace(c.ns).
		UpdateStatus(c.ctx, pdb, metav1.UpdateOptions{})
	require.NoError(t, err)

	var w dataplane.Workloads
	require.EventuallyWithT(t, func(t *assert.CollectT) {
		w, err = c.plane.Workloads(c.ctx, "wl1")
		require.NoError(t, err)
		assert.True(t, slices.ContainsFunc(w.Volumes, func(v dataplane.Volume) bool { return v.Name == "manual" && len(v.Tickets) == 1 }))
	}, 10*time.Second, 20*time.Millisecond, "the adapter's cache shows the volumes")

	pods := map[string]dataplane.Pod{}
	for _, p := range w.Pods {
		if p.Namespace == c.ns {
			pods[p.Name] = p
		}
	}
	require.NotContains(t, pods, "elsewhere", "only the node's pods")
	assert.Equal(t, "ReplicaSet", pods["web-1"].Controller)
	assert.Equal(t, []string{c.ns + "/web"}, pods["web-1"].Budgets)
	assert.Equal(t, dataplane.Budget{ObjectRef: dataplane.ObjectRef{Namespace: c.ns, Name: "web"}, Observed: true, DisruptionsAllowed: 1}, w.Budgets[c.ns+"/web"])
	assert.Contains(t, pods["db-0"].PinnedBy, "nodeName wl1", "its StatefulSet's template names the node")
	assert.Empty(t, pods["web-1"].PinnedBy)
	assert.Contains(t, pods["selected"].PinnedBy, "matches no other node")
	assert.True(t, pods["tolerant"].ToleratesTaint)
	assert.False(t, pods["web-1"].ToleratesTaint)
	assert.Empty(t, pods["bare"].Controller)

	claims := map[string]string{}
	for _, cl := range w.Claims {
		if cl.Namespace == c.ns {
			claims[cl.Name] = cl.Volume
		}
	}
	assert.Equal(t, map[string]string{"web-data": "web-data", "db-data": "db-data", "legacy": "legacy"}, claims)
	var vols []string
	for _, v := range w.Volumes {
		vols = append(vols, v.Name)
	}
	assert.Equal(t, []string{"db-data", "legacy", "manual", "web-data"}, vols, "the claims' volumes and those with a ticket for the node")

	assert.Equal(t, "no longhorn-csi-plugin pod runs on node wl1", w.CSIPluginNotReady)
	assert.Empty(t, w.RolloutPending, "no Longhorn DaemonSet here")

	m := workloadmove.Decide(w, 0)
	assert.Empty(t, m.Evict, "a pinned node is not touched")
	var pins []string
	for _, p := range m.Pins {
		pins = append(pins, p.Reason+" "+p.Object)
	}
	assert.Equal(t, []string{
		workloadmove.PinPodPinnedToNode + " " + c.ns + "/db-0",
		workloadmove.PinPodPinnedToNode + " " + c.ns + "/selected",
		workloadmove.PinPodToleratesTaint + " " + c.ns + "/tolerant",
		workloadmove.PinManualAttachment + " manual",
	}, pins, "bare uses only a v1 volume, which holds no v2 initiator")
}

// TestWorkloadsReadsWhatLonghornNeedsOnTheNode: the node's CSI plugin pod
// must run Ready for an evicted pod's volumes to be unmounted, and no
// Longhorn DaemonSet may be rolling out (the taint would keep its new pod
// off the node); each is read from the apiserver as the DaemonSet
// controller and the kubelet leave them.
func TestWorkloadsReadsWhatLonghornNeedsOnTheNode(t *testing.T) {
	s := sim.New(sim.Config{LonghornVersion: "v1.12.1"})
	for _, n := range []string{"cs1", "cs2"} {
		require.NoError(t, s.AddNode(n))
	}
	c := newCluster(t, s)
	k := kube{c}
	pods := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	k.pod("longhorn-csi-plugin-abcde", "cs1", nil, func(p *corev1.Pod) { p.Labels = map[string]string{"app": "longhorn-csi-plugin"} })
	w, err := c.plane.Workloads(c.ctx, "cs1")
	require.NoError(t, err)
	assert.Equal(t, "the longhorn-csi-plugin pod "+c.ns+"/longhorn-csi-plugin-abcde on node cs1 is not Ready", w.CSIPluginNotReady)

	u, err := c.dyn.Resource(pods).Namespace(c.ns).Get(c.ctx, "longhorn-csi-plugin-abcde", metav1.GetOptions{})
	require.NoError(t, err)
	require.NoError(t, unstructured.SetNestedSlice(u.Object, []any{map[string]any{"type": "Ready", "status": "True"}}, "status", "conditions"))
	_, err = c.dyn.Resource(pods).Namespace(c.ns).UpdateStatus(c.ctx, u, metav1.UpdateOptions{})
	require.NoError(t, err)
	w, err = c.plane.Workloads(c.ctx, "cs1")
	require.NoError(t, err)
	assert.Empty(t, w.CSIPluginNotReady, "Ready")

	labels := map[string]string{"app": "longhorn-manager"}
	dsRes := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "daemonsets"}
	ds := k.create(dsRes, true, &appsv1.DaemonSet{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"},
		ObjectMeta: metav1.ObjectMeta{Name: "longhorn-manager"},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "m", Image: "longhornio/longhorn-manager:v1.12.1"}}}}}})
	setStatus := func(updated int64) {
		t.Helper()
		require.NoError(t, unstructured.SetNestedField(ds.Object, map[string]any{"observedGeneration": ds.GetGeneration(),
			"desiredNumberScheduled": int64(2), "currentNumberScheduled": int64(2), "numberMisscheduled": int64(0), "numberReady": int64(2),
			"updatedNumberScheduled": updated}, "status"))
		var err error
		ds, err = c.dyn.Resource(dsRes).Namespace(c.ns).UpdateStatus(c.ctx, ds, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
	setStatus(1)
	w, err = c.plane.Workloads(c.ctx, "cs1")
	require.NoError(t, err)
	assert.Equal(t, "DaemonSet "+c.ns+"/longhorn-manager is rolling out: 1 of 2 pods updated, 0 unavailable", w.RolloutPending)
	setStatus(2)
	w, err = c.plane.Workloads(c.ctx, "cs1")
	require.NoError(t, err)
	assert.Empty(t, w.RolloutPending, "rolled out")
}
