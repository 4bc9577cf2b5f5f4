// Package kubelets stands in, on a real apiserver, for the parts of a node
// that a test of moving workloads needs and a test cluster lacks: the
// kubelet of every node, Longhorn's CSI plugin on it, and the bit of the
// node lifecycle controller that lifts the not-ready taint.
//
// What it does, each round (on every change it watches):
//   - a Node whose Ready condition is True loses the
//     node.kubernetes.io/not-ready taint the apiserver's TaintNodesByCondition
//     admission put on it at creation;
//   - a pod bound to a node asks for its Longhorn volumes there, as the CSI
//     attacher would: a csi-attacher ticket on the volume's Longhorn
//     VolumeAttachment, with the id Longhorn's CSI plugin gives it; once every
//     such volume is attached to the node (status.currentNodeID, state
//     attached), or, for an RWX volume, attached anywhere (served over NFS
//     by its share-manager pod), the pod is Running and Ready, as a kubelet
//     reports it after the mounts;
//   - a pod being deleted gives its tickets back (the volume is unmounted)
//     and its deletion is finished, by uid, as a kubelet does once the
//     containers stopped.
//
// Pods without Longhorn claims are simply started. Nothing runs: there are
// no containers, probes or restarts. Longhorn's side (a volume attached as
// its tickets say) is longhornsim's, with Options.VolumeAttachments.
package kubelets

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/longhorn"
)

// notReadyTaint is the taint TaintNodesByCondition puts on a new Node.
const notReadyTaint = "node.kubernetes.io/not-ready"

// Options tune Start.
type Options struct {
	// LonghornNamespace holds Longhorn's volumes and VolumeAttachments;
	// default longhorn.DefaultNamespace.
	LonghornNamespace string
	// Log receives what is done; default: discarded.
	Log *slog.Logger
	// Interval is the longest time between rounds; default 50ms.
	Interval time.Duration
}

// Kubelets is a running stand-in.
type Kubelets struct {
	cs   kubernetes.Interface
	dyn  dynamic.Interface
	ns   string
	log  *slog.Logger
	opts Options

	pods, nodes, claims, pvs, volumes, attachments cache.SharedIndexInformer

	kick   chan struct{}
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

// Start watches the apiserver of cfg and acts for every node until Close.
// It returns once its caches are synced.
func Start(ctx context.Context, cfg *rest.Config, opts Options) (*Kubelets, error) {
	if opts.LonghornNamespace == "" {
		opts.LonghornNamespace = longhorn.DefaultNamespace
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.Interval <= 0 {
		opts.Interval = 50 * time.Millisecond
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubelets: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubelets: %w", err)
	}
	k := &Kubelets{cs: cs, dyn: dyn, ns: opts.LonghornNamespace, log: opts.Log.With("component", "kubelets"), opts: opts,
		kick: make(chan struct{}, 1), done: make(chan struct{})}
	core := informers.NewSharedInformerFactory(cs, 0).Core().V1()
	lh := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, 0, k.ns, nil)
	k.pods, k.nodes = core.Pods().Informer(), core.Nodes().Informer()
	k.claims, k.pvs = core.PersistentVolumeClaims().Informer(), core.PersistentVolumes().Informer()
	k.volumes = lh.ForResource(longhorn.VolumesResource).Informer()
	k.attachments = lh.ForResource(longhorn.VolumeAttachmentsResource).Informer()
	runCtx, cancel := context.WithCancel(context.Background())
	k.cancel = cancel
	all := []cache.SharedIndexInformer{k.pods, k.nodes, k.claims, k.pvs, k.volumes, k.attachments}
	synced := make([]cache.InformerSynced, 0, len(all))
	for _, inf := range all {
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: func(any) { k.Kick() }, UpdateFunc: func(any, any) { k.Kick() }, DeleteFunc: func(any) { k.Kick() },
		}); err != nil {
			cancel()
			return nil, fmt.Errorf("kubelets: %w", err)
		}
		go inf.RunWithContext(runCtx)
		synced = append(synced, inf.HasSynced)
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		cancel()
		return nil, fmt.Errorf("kubelets: caches not synced: %w", ctx.Err())
	}
	go k.loop(runCtx)
	return k, nil
}

// Kick asks for a round now.
func (k *Kubelets) Kick() {
	select {
	case k.kick <- struct{}{}:
	default:
	}
}

// Close stops the stand-in; what it started stays as it is.
func (k *Kubelets) Close() {
	k.once.Do(func() {
		k.cancel()
		<-k.done
	})
}

func (k *Kubelets) loop(ctx context.Context) {
	defer close(k.done)
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		timer.Reset(k.opts.Interval)
		select {
		case <-ctx.Done():
			return
		case <-k.kick:
		case <-timer.C:
		}
		if err := k.round(ctx); err != nil && ctx.Err() == nil {
			k.log.Warn("round failed; retrying", "error", err)
		}
	}
}

func (k *Kubelets) round(ctx context.Context) error {
	var errs []error
	for _, o := range k.nodes.GetStore().List() {
		errs = append(errs, k.liftNotReady(ctx, o.(*corev1.Node)))
	}
	tickets := k.wantedTickets()
	for _, o := range k.pods.GetStore().List() {
		p := o.(*corev1.Pod)
		if p.Spec.NodeName == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if p.DeletionTimestamp != nil {
			errs = append(errs, k.finishDeletion(ctx, p))
			continue
		}
		errs = append(errs, k.start(ctx, p))
	}
	errs = append(errs, k.syncTickets(ctx, tickets))
	return errors.Join(errs...)
}

// liftNotReady removes the not-ready taint of a Ready node, as the node
// lifecycle controller does.
func (k *Kubelets) liftNotReady(ctx context.Context, n *corev1.Node) error {
	ready := false
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			ready = c.Status == corev1.ConditionTrue
		}
	}
	if !ready {
		return nil
	}
	var keep []corev1.Taint
	for _, t := range n.Spec.Taints {
		if t.Key != notReadyTaint {
			keep = append(keep, t)
		}
	}
	if len(keep) == len(n.Spec.Taints) {
		return nil
	}
	n = n.DeepCopy()
	n.Spec.Taints = keep
	_, err := k.cs.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return nil // the next round sees the node as it is now
	}
	return err
}

// volumesOf names the Longhorn volumes of p's claims that are bound: PVC
// → PV → the CSI volume handle of Longhorn's driver.
func (k *Kubelets) volumesOf(p *corev1.Pod) []string {
	var out []string
	for _, v := range p.Spec.Volumes {
		if v.PersistentVolumeClaim == nil {
			continue
		}
		o, ok, _ := k.claims.GetStore().GetByKey(p.Namespace + "/" + v.PersistentVolumeClaim.ClaimName)
		if !ok || o.(*corev1.PersistentVolumeClaim).Spec.VolumeName == "" {
			continue
		}
		o, ok, _ = k.pvs.GetStore().GetByKey(o.(*corev1.PersistentVolumeClaim).Spec.VolumeName)
		if !ok {
			continue
		}
		if csi := o.(*corev1.PersistentVolume).Spec.CSI; csi != nil && csi.Driver == longhorn.CSIDriver {
			out = append(out, csi.VolumeHandle)
		}
	}
	return out
}

// servedOn reports whether a pod on node can mount volume: Longhorn shows
// it attached there, or, for an RWX volume, attached anywhere (its
// share-manager serves it over NFS).
func (k *Kubelets) servedOn(volume, node string) bool {
	o, ok, _ := k.volumes.GetStore().GetByKey(k.ns + "/" + volume)
	if !ok {
		return false
	}
	var v longhorn.Volume
	if err := longhorn.FromUnstructured(o.(*unstructured.Unstructured), &v); err != nil {
		return false
	}
	if v.Status.State != "attached" {
		return false
	}
	return v.Spec.AccessMode == longhorn.AccessModeRWX || v.Status.CurrentNodeID == node
}

// start reports p Running and Ready once its volumes are attached to its
// node.
func (k *Kubelets) start(ctx context.Context, p *corev1.Pod) error {
	if podReady(p) {
		return nil
	}
	for _, v := range k.volumesOf(p) {
		if !k.servedOn(v, p.Spec.NodeName) {
			return nil // the CSI attacher's ticket is asked for; the mount waits
		}
	}
	p = p.DeepCopy()
	now := metav1.Now()
	p.Status.Phase = corev1.PodRunning
	p.Status.StartTime = &now
	p.Status.Conditions = []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
	}
	_, err := k.cs.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return nil
	}
	if err == nil {
		k.log.Info("pod started", "pod", p.Namespace+"/"+p.Name, "node", p.Spec.NodeName)
	}
	return err
}

// finishDeletion removes a terminating pod for good, by uid: its
// containers stopped and its volumes were unmounted (its tickets go in the
// same round, syncTickets).
func (k *Kubelets) finishDeletion(ctx context.Context, p *corev1.Pod) error {
	zero := int64(0)
	err := k.cs.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero,
		Preconditions: &metav1.Preconditions{UID: &p.UID}})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	if err == nil {
		k.log.Info("pod deletion finished", "pod", p.Namespace+"/"+p.Name, "node", p.Spec.NodeName)
	}
	return err
}

// ticket is one csi-attacher ticket: a volume asked for on a node.
type ticket struct{ volume, node string }

// id is the ticket's id as Longhorn's CSI plugin names it: "csi-" and the
// name Kubernetes gives the storage.k8s.io VolumeAttachment.
func (t ticket) id() string {
	sum := sha256.Sum256([]byte(t.volume + longhorn.CSIDriver + t.node))
	return "csi-" + hex.EncodeToString(sum[:])
}

// wantedTickets are the tickets the pods bound to nodes and not being
// deleted ask for.
func (k *Kubelets) wantedTickets() map[ticket]bool {
	out := map[ticket]bool{}
	for _, o := range k.pods.GetStore().List() {
		p := o.(*corev1.Pod)
		if p.Spec.NodeName == "" || p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		for _, v := range k.volumesOf(p) {
			out[ticket{volume: v, node: p.Spec.NodeName}] = true
		}
	}
	return out
}

// syncTickets brings the csi-attacher tickets of every Longhorn
// VolumeAttachment in line with want: added where a pod asks, removed
// where none does. Tickets of other attachers are left alone.
func (k *Kubelets) syncTickets(ctx context.Context, want map[ticket]bool) error {
	var errs []error
	for _, o := range k.attachments.GetStore().List() {
		u := o.(*unstructured.Unstructured)
		var va longhorn.VolumeAttachment
		if err := longhorn.FromUnstructured(u, &va); err != nil {
			errs = append(errs, err)
			continue
		}
		volume := va.Spec.Volume
		if volume == "" {
			volume = va.Name
		}
		change := map[string]any{}
		for id, t := range va.Spec.AttachmentTickets {
			if t.Type == dataplane.AttacherCSI && !want[ticket{volume: volume, node: t.NodeID}] {
				change[id] = nil
			}
		}
		for t := range want {
			if _, has := va.Spec.AttachmentTickets[t.id()]; t.volume == volume && !has {
				change[t.id()] = map[string]any{"id": t.id(), "type": dataplane.AttacherCSI, "nodeID": t.node,
					"parameters": map[string]any{"disableFrontend": "false"}}
			}
		}
		if len(change) == 0 {
			continue
		}
		body, err := json.Marshal(map[string]any{"spec": map[string]any{"attachmentTickets": change}})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		_, err = k.dyn.Resource(longhorn.VolumeAttachmentsResource).Namespace(k.ns).Patch(ctx, va.Name, types.MergePatchType, body, metav1.PatchOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("tickets of volume %s: %w", volume, err))
			continue
		}
		k.log.Info("csi tickets changed", "volume", volume, "change", string(body))
	}
	return errors.Join(errs...)
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
