package longhorn

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	"github.com/switchback-dev/switchback/dataplane"
)

// The Kubernetes resources moving a node's workloads reads.
var (
	claimsResource       = schema.GroupVersionResource{Version: "v1", Resource: "persistentvolumeclaims"}
	pvsResource          = schema.GroupVersionResource{Version: "v1", Resource: "persistentvolumes"}
	budgetsResource      = schema.GroupVersionResource{Group: "policy", Version: "v1", Resource: "poddisruptionbudgets"}
	replicaSetsResource  = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "replicasets"}
	statefulSetsResource = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "statefulsets"}
	daemonSetsResource   = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "daemonsets"}
)

// Longhorn's DaemonSets on every node (types/deploy.go): the manager, and
// the CSI plugin, whose pods carry app=<name> (csi/deployment.go).
const (
	managerDaemonSet   = "longhorn-manager"
	csiPluginDaemonSet = "longhorn-csi-plugin"
)

// CSIDriver is Longhorn's CSI driver: a PersistentVolume of this driver
// names its Longhorn volume as its volume handle.
const CSIDriver = "driver.longhorn.io"

// Longhorn's share-manager pods (types/types.go GetShareManagerLabels,
// GetShareManagerPodNameFromShareManagerName): share-manager-<volume>, with
// the volume's name as this label.
const (
	shareManagerPodPrefix = "share-manager-"
	shareManagerLabel     = "longhorn.io/share-manager"
)

// mirrorPodAnnotation marks the API's copy of a static pod.
const mirrorPodAnnotation = "kubernetes.io/config.mirror"

// Workloads reads, fresh from the apiserver, what moving node's workloads
// needs (dataplane.Workloads): the pods bound there, the claims they name
// and their Longhorn volumes, the volumes with an attachment ticket for the
// node, the share-manager pods of those served over NFS, and the budgets
// selecting the pods. Reading it lists the node's pods and its volumes'
// objects, not the cluster's.
func (p *Plane) Workloads(ctx context.Context, node string) (dataplane.Workloads, error) {
	w := dataplane.Workloads{Node: node, Budgets: map[string]dataplane.Budget{}}
	pods, err := listAs[corev1.Pod](ctx, p.dyn.Resource(PodsResource), metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return w, fmt.Errorf("list the pods of node %s: %w", node, err)
	}
	r := workloadReader{p: p, ctx: ctx, node: node, claims: map[dataplane.ObjectRef]string{}, pinned: map[string]string{},
		labels: map[dataplane.ObjectRef]labels.Set{}}
	vols := map[string]bool{}
	for i := range pods {
		pod, err := r.pod(&pods[i])
		if err != nil {
			return w, err
		}
		for _, c := range pod.Claims {
			ref := dataplane.ObjectRef{Namespace: pod.Namespace, Name: c}
			if v := r.claims[ref]; v != "" {
				vols[v] = true
			}
		}
		w.Pods = append(w.Pods, pod)
	}
	for ref, v := range r.claims {
		if v != "" {
			w.Claims = append(w.Claims, dataplane.Claim{ObjectRef: ref, Volume: v})
		}
	}
	tickets, err := p.tickets(ctx)
	if err != nil {
		return w, err
	}
	for v, ts := range tickets {
		if slices.ContainsFunc(ts, func(t dataplane.Ticket) bool { return t.Node == node }) {
			vols[v] = true
		}
	}
	for name := range vols {
		v, err := p.Volume(ctx, name)
		if errors.Is(err, dataplane.ErrNotFound) {
			continue
		}
		if err != nil {
			return w, err
		}
		v.Tickets = tickets[name]
		w.Volumes = append(w.Volumes, v)
		if v.ShareManager && v.AttachedNode == node {
			sm, err := r.shareManager(name)
			if err != nil {
				return w, err
			}
			if sm != nil && sm.Node != node {
				w.Pods = append(w.Pods, *sm)
			}
		}
	}
	if err := r.budgets(&w); err != nil {
		return w, err
	}
	if w.CSIPluginNotReady, err = p.csiPluginNotReady(ctx, node); err != nil {
		return w, err
	}
	if w.RolloutPending, err = p.rolloutPending(ctx); err != nil {
		return w, err
	}
	sortWorkloads(&w)
	return w, nil
}

// csiPluginNotReady says why the node's longhorn-csi-plugin pod could not
// unmount an evicted pod's volumes now, "" when it runs Ready.
func (p *Plane) csiPluginNotReady(ctx context.Context, node string) (string, error) {
	pods, err := listAs[corev1.Pod](ctx, p.dyn.Resource(PodsResource).Namespace(p.ns),
		metav1.ListOptions{LabelSelector: "app=" + csiPluginDaemonSet, FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return "", fmt.Errorf("list the %s pods of node %s: %w", csiPluginDaemonSet, node, err)
	}
	for i := range pods {
		if pods[i].DeletionTimestamp == nil && podReady(&pods[i]) {
			return "", nil
		}
	}
	if len(pods) == 0 {
		return fmt.Sprintf("no %s pod runs on node %s", csiPluginDaemonSet, node), nil
	}
	return fmt.Sprintf("the %s pod %s/%s on node %s is not Ready", csiPluginDaemonSet, p.ns, pods[0].Name, node), nil
}

// rolloutPending names the first of Longhorn's DaemonSets whose rollout is
// not done (its controller has not seen its latest spec, or not every
// scheduled pod runs it), "" when none is; a DaemonSet that is not there
// is none.
func (p *Plane) rolloutPending(ctx context.Context) (string, error) {
	for _, name := range []string{managerDaemonSet, csiPluginDaemonSet} {
		ds, err := getAs[appsv1.DaemonSet](ctx, p.dyn.Resource(daemonSetsResource).Namespace(p.ns), name)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("read DaemonSet %s: %w", name, err)
		}
		st := ds.Status
		switch {
		case st.ObservedGeneration < ds.Generation:
			return fmt.Sprintf("DaemonSet %s/%s has a new spec its controller has not rolled out yet", p.ns, name), nil
		case st.UpdatedNumberScheduled < st.DesiredNumberScheduled || st.NumberUnavailable > 0:
			return fmt.Sprintf("DaemonSet %s/%s is rolling out: %d of %d pods updated, %d unavailable",
				p.ns, name, st.UpdatedNumberScheduled, st.DesiredNumberScheduled, st.NumberUnavailable), nil
		}
	}
	return "", nil
}

// workloadReader is one Workloads read.
type workloadReader struct {
	p    *Plane
	ctx  context.Context
	node string
	// claims maps each claim read to its Longhorn volume ("" for any other).
	claims map[dataplane.ObjectRef]string
	// pinned caches, per controller (kind/namespace/name), what pins its
	// pods to one node.
	pinned map[string]string
	// labels are the labels of each pod read, for its budgets.
	labels map[dataplane.ObjectRef]labels.Set
}

// pod maps one pod, reading the claims it names.
func (r *workloadReader) pod(k *corev1.Pod) (dataplane.Pod, error) {
	out := dataplane.Pod{
		ObjectRef:      dataplane.ObjectRef{Namespace: k.Namespace, Name: k.Name},
		UID:            string(k.UID),
		Node:           k.Spec.NodeName,
		Terminal:       k.Status.Phase == corev1.PodSucceeded || k.Status.Phase == corev1.PodFailed,
		Deleting:       k.DeletionTimestamp != nil,
		Ready:          podReady(k),
		Mirror:         k.Annotations[mirrorPodAnnotation] != "",
		ToleratesTaint: toleratesMove(k.Spec.Tolerations),
		ShareManagerOf: r.shareManagerOf(k),
	}
	r.labels[out.ObjectRef] = k.Labels
	if c := metav1.GetControllerOf(k); c != nil {
		out.Controller = c.Kind
	}
	for _, v := range k.Spec.Volumes {
		if v.PersistentVolumeClaim == nil {
			continue
		}
		out.Claims = append(out.Claims, v.PersistentVolumeClaim.ClaimName)
		if err := r.claim(dataplane.ObjectRef{Namespace: k.Namespace, Name: v.PersistentVolumeClaim.ClaimName}); err != nil {
			return out, err
		}
	}
	pinned, err := r.pinnedBy(k)
	out.PinnedBy = pinned
	return out, err
}

// shareManagerOf is the volume whose share-manager k is, "" for any other
// pod.
func (r *workloadReader) shareManagerOf(k *corev1.Pod) string {
	if k.Namespace != r.p.ns {
		return ""
	}
	return k.Labels[shareManagerLabel]
}

// claim reads which Longhorn volume a claim is bound to, once.
func (r *workloadReader) claim(ref dataplane.ObjectRef) error {
	if _, seen := r.claims[ref]; seen {
		return nil
	}
	r.claims[ref] = ""
	pvc, err := getAs[corev1.PersistentVolumeClaim](r.ctx, r.p.dyn.Resource(claimsResource).Namespace(ref.Namespace), ref.Name)
	if apierrors.IsNotFound(err) || (err == nil && pvc.Spec.VolumeName == "") {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read claim %s: %w", ref, err)
	}
	pv, err := getAs[corev1.PersistentVolume](r.ctx, r.p.dyn.Resource(pvsResource), pvc.Spec.VolumeName)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read the persistent volume of claim %s: %w", ref, err)
	}
	if csi := pv.Spec.CSI; csi != nil && csi.Driver == CSIDriver {
		r.claims[ref] = csi.VolumeHandle
	}
	return nil
}

// pinnedBy says what makes r.node the only node that may run k: a nodeName
// its controller's template sets, or a node selector or required node
// affinity that no other node satisfies.
func (r *workloadReader) pinnedBy(k *corev1.Pod) (string, error) {
	if c := metav1.GetControllerOf(k); c != nil {
		name, err := r.templateNodeName(k.Namespace, c)
		if err != nil || name != "" {
			return name, err
		}
	}
	if len(k.Spec.NodeSelector) == 0 && (k.Spec.Affinity == nil || k.Spec.Affinity.NodeAffinity == nil ||
		k.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil) {
		return "", nil
	}
	required := nodeaffinity.GetRequiredNodeAffinity(k)
	for _, n := range list[KubeNode](r.p.kubeNodes) {
		if n.Name == r.node {
			continue
		}
		if ok, _ := required.Match(&corev1.Node{ObjectMeta: n.ObjectMeta}); ok {
			return "", nil
		}
	}
	return "its node selector or required node affinity matches no other node", nil
}

// templateNodeName reads whether the pod template of k's controller (a
// ReplicaSet or StatefulSet) sets spec.nodeName, once per controller.
func (r *workloadReader) templateNodeName(ns string, c *metav1.OwnerReference) (string, error) {
	var res schema.GroupVersionResource
	switch {
	case c.Kind == "ReplicaSet" && c.APIVersion == "apps/v1":
		res = replicaSetsResource
	case c.Kind == "StatefulSet" && c.APIVersion == "apps/v1":
		res = statefulSetsResource
	default:
		return "", nil
	}
	key := c.Kind + "/" + ns + "/" + c.Name
	if v, seen := r.pinned[key]; seen {
		return v, nil
	}
	u, err := r.p.dyn.Resource(res).Namespace(ns).Get(r.ctx, c.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		r.pinned[key] = ""
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read %s %s/%s: %w", c.Kind, ns, c.Name, err)
	}
	name, _, _ := unstructured.NestedString(u.Object, "spec", "template", "spec", "nodeName")
	out := ""
	if name != "" {
		out = fmt.Sprintf("its %s's pod template sets nodeName %s", c.Kind, name)
	}
	r.pinned[key] = out
	return out, nil
}

// shareManager reads the share-manager pod of volume, nil when it has none.
func (r *workloadReader) shareManager(volume string) (*dataplane.Pod, error) {
	k, err := getAs[corev1.Pod](r.ctx, r.p.dyn.Resource(PodsResource).Namespace(r.p.ns), shareManagerPodPrefix+volume)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the share-manager pod of volume %s: %w", volume, err)
	}
	pod, err := r.pod(k)
	return &pod, err
}

// budgets reads the PodDisruptionBudgets of the pods' namespaces and names
// on each pod those that select it.
func (r *workloadReader) budgets(w *dataplane.Workloads) error {
	byNS := map[string][]policyv1.PodDisruptionBudget{}
	for i := range w.Pods {
		pod := &w.Pods[i]
		if _, read := byNS[pod.Namespace]; !read {
			bs, err := listAs[policyv1.PodDisruptionBudget](r.ctx, r.p.dyn.Resource(budgetsResource).Namespace(pod.Namespace), metav1.ListOptions{})
			if err != nil {
				return fmt.Errorf("list the disruption budgets of namespace %s: %w", pod.Namespace, err)
			}
			byNS[pod.Namespace] = bs
		}
		set := r.labels[pod.ObjectRef]
		for _, b := range byNS[pod.Namespace] {
			sel, err := metav1.LabelSelectorAsSelector(b.Spec.Selector)
			// As the eviction API: a budget with a nil or empty selector
			// selects nothing.
			if err != nil || b.Spec.Selector == nil || sel.Empty() || !sel.Matches(set) {
				continue
			}
			ref := dataplane.ObjectRef{Namespace: b.Namespace, Name: b.Name}
			pod.Budgets = append(pod.Budgets, ref.String())
			w.Budgets[ref.String()] = dataplane.Budget{ObjectRef: ref, Observed: b.Status.ObservedGeneration >= b.Generation,
				DisruptionsAllowed: b.Status.DisruptionsAllowed}
		}
	}
	return nil
}

// tickets reads every Longhorn VolumeAttachment's tickets, by volume.
func (p *Plane) tickets(ctx context.Context) (map[string][]dataplane.Ticket, error) {
	vas, err := listAs[VolumeAttachment](ctx, p.dyn.Resource(VolumeAttachmentsResource).Namespace(p.ns), metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list Longhorn's volume attachments: %w", err)
	}
	out := map[string][]dataplane.Ticket{}
	for _, va := range vas {
		vol := va.Spec.Volume
		if vol == "" {
			vol = va.Name
		}
		for id, t := range va.Spec.AttachmentTickets {
			out[vol] = append(out[vol], dataplane.Ticket{ID: id, Type: t.Type, Node: t.NodeID})
		}
		slices.SortFunc(out[vol], func(a, b dataplane.Ticket) int { return cmp.Compare(a.ID, b.ID) })
	}
	return out, nil
}

func podReady(k *corev1.Pod) bool {
	for _, c := range k.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// toleratesMove reports whether tolerations let the scheduler place a pod
// on a node carrying the move's taint.
func toleratesMove(tolerations []corev1.Toleration) bool {
	taint := corev1.Taint{Key: dataplane.WorkloadTaintKey, Effect: corev1.TaintEffectNoSchedule}
	return slices.ContainsFunc(tolerations, func(t corev1.Toleration) bool { return t.ToleratesTaint(klog.Background(), &taint, false) })
}

// sortWorkloads orders what was read by name.
func sortWorkloads(w *dataplane.Workloads) {
	slices.SortFunc(w.Pods, func(a, b dataplane.Pod) int { return cmp.Compare(a.String(), b.String()) })
	slices.SortFunc(w.Claims, func(a, b dataplane.Claim) int { return cmp.Compare(a.String(), b.String()) })
	slices.SortFunc(w.Volumes, func(a, b dataplane.Volume) int { return cmp.Compare(a.Name, b.Name) })
}

// listAs lists a resource into typed objects.
func listAs[T any](ctx context.Context, ri resourceLister, opts metav1.ListOptions) ([]T, error) {
	l, err := ri.List(ctx, opts)
	if err != nil {
		return nil, err
	}
	out := make([]T, len(l.Items))
	for i := range l.Items {
		if err := FromUnstructured(&l.Items[i], &out[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// getAs reads one object into a typed one.
func getAs[T any](ctx context.Context, ri resourceGetter, name string) (*T, error) {
	u, err := ri.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	var out T
	if err := FromUnstructured(u, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

type resourceLister interface {
	List(ctx context.Context, opts metav1.ListOptions) (*unstructured.UnstructuredList, error)
}

type resourceGetter interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions, subresources ...string) (*unstructured.Unstructured, error)
}
