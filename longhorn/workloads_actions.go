package longhorn

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	"github.com/switchback-dev/switchback/dataplane"
)

// taintNoSchedule is the effect of the taint moving a node's workloads
// puts: the scheduler places no new pod there, while the kubelet still
// admits the instance-manager pod Longhorn binds there by nodeName.
const taintNoSchedule = "NoSchedule"

func isWorkloadTaint(t Taint) bool {
	return t.Key == dataplane.WorkloadTaintKey && t.Effect == taintNoSchedule
}

// TaintNode implements dataplane.Actions: it adds the taint to the
// Kubernetes node's spec.taints, read fresh and written with its
// resourceVersion (retried on a conflict), leaving every other taint as the
// apiserver served it.
func (p *Plane) TaintNode(ctx context.Context, node string) error {
	return p.editTaints(ctx, "TaintNode", node, func(ts []any) ([]any, bool) {
		if slices.ContainsFunc(ts, isWorkloadTaintValue) {
			return ts, false
		}
		return append(ts, map[string]any{"key": dataplane.WorkloadTaintKey, "effect": taintNoSchedule}), true
	})
}

// UntaintNode implements dataplane.Actions: it removes the taint, and only
// it.
func (p *Plane) UntaintNode(ctx context.Context, node string) error {
	return p.editTaints(ctx, "UntaintNode", node, func(ts []any) ([]any, bool) {
		kept := slices.DeleteFunc(slices.Clone(ts), isWorkloadTaintValue)
		return kept, len(kept) != len(ts)
	})
}

// isWorkloadTaintValue is isWorkloadTaint on a taint as served.
func isWorkloadTaintValue(t any) bool {
	m, ok := t.(map[string]any)
	return ok && m["key"] == dataplane.WorkloadTaintKey && m["effect"] == taintNoSchedule
}

// taintPreferNoSchedule is the effect of the mark of a node still to be
// upgraded: the scheduler's TaintToleration scoring ranks the node lower
// for a pod that does not tolerate it, and places nothing less for it.
const taintPreferNoSchedule = "PreferNoSchedule"

func isPendingTaint(t Taint) bool {
	return t.Key == dataplane.UpgradePendingTaintKey && t.Effect == taintPreferNoSchedule
}

func isPendingTaintValue(t any) bool {
	m, ok := t.(map[string]any)
	return ok && m["key"] == dataplane.UpgradePendingTaintKey && m["effect"] == taintPreferNoSchedule
}

// MarkUpgradePending implements dataplane.NodeMarker: it sets the
// PreferNoSchedule taint's value on the Kubernetes node's spec.taints, or
// removes the taint when mark is "", leaving every other taint as the
// apiserver served it.
func (p *Plane) MarkUpgradePending(ctx context.Context, node, mark string) error {
	return p.editTaints(ctx, "MarkUpgradePending", node, func(ts []any) ([]any, bool) {
		i := slices.IndexFunc(ts, isPendingTaintValue)
		switch {
		case mark == "" && i < 0:
			return ts, false
		case mark == "":
			return slices.Delete(slices.Clone(ts), i, i+1), true
		case i < 0:
			return append(ts, pendingTaint(mark)), true
		case ts[i].(map[string]any)["value"] == mark:
			return ts, false
		}
		ts = slices.Clone(ts)
		ts[i] = pendingTaint(mark)
		return ts, true
	})
}

func pendingTaint(mark string) map[string]any {
	return map[string]any{"key": dataplane.UpgradePendingTaintKey, "value": mark, "effect": taintPreferNoSchedule}
}

// editTaints rewrites a node's spec.taints with edit, which reports
// whether it changed anything. A missing node is ErrNotFound.
func (p *Plane) editTaints(ctx context.Context, action, node string, edit func([]any) ([]any, bool)) error {
	nodes := p.dyn.Resource(KubeNodesResource)
	changed := false
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		u, err := nodes.Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		served, _, _ := unstructured.NestedSlice(u.Object, "spec", "taints")
		taints, change := edit(served)
		if changed = change; !change {
			return nil
		}
		if len(taints) == 0 {
			unstructured.RemoveNestedField(u.Object, "spec", "taints")
		} else if err := unstructured.SetNestedSlice(u.Object, taints, "spec", "taints"); err != nil {
			return err
		}
		_, err = nodes.Update(ctx, u, metav1.UpdateOptions{})
		return err
	})
	if apierrors.IsNotFound(err) {
		return notFound("node " + node)
	}
	if err != nil {
		return fmt.Errorf("%s %s: %w", action, node, err)
	}
	if changed {
		p.log.Info("node taints written", "action", action, "node", node)
	}
	return nil
}

// EvictPod implements dataplane.Actions through the pods/eviction
// subresource, with the pod's uid as a precondition so that a pod
// recreated under the same name is not the one evicted. The pod is read
// first: the eviction API spends a disruption of the pod's budget before
// the delete checks the precondition, so an eviction of the wrong pod
// would hold the budget's slot until the disruption controller gives it
// back.
func (p *Plane) EvictPod(ctx context.Context, pod, uid string) error {
	ref, err := parseRef(pod)
	if err != nil {
		return err
	}
	current, err := p.dyn.Resource(PodsResource).Namespace(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil // gone already
	case err != nil:
		return fmt.Errorf("evict pod %s: %w", pod, err)
	case string(current.GetUID()) != uid:
		return nil // another pod has the name now
	}
	eviction := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "policy/v1", "kind": "Eviction",
		"metadata":      map[string]any{"name": ref.Name, "namespace": ref.Namespace},
		"deleteOptions": map[string]any{"preconditions": map[string]any{"uid": uid}},
	}}
	_, err = p.dyn.Resource(PodsResource).Namespace(ref.Namespace).Create(ctx, eviction, metav1.CreateOptions{}, "eviction")
	switch {
	case err == nil:
		p.log.Info("pod evicted", "pod", pod, "uid", uid)
		return nil
	case apierrors.IsNotFound(err):
		return nil // gone already
	case apierrors.IsConflict(err):
		return nil // the uid precondition failed: another pod has the name now
	case apierrors.IsTooManyRequests(err):
		return fmt.Errorf("evict pod %s: %w: %s", pod, dataplane.ErrDisruptionBudget, apiMessage(err))
	}
	return fmt.Errorf("evict pod %s: %w", pod, err)
}

// RestartShareManager implements dataplane.Actions: it deletes the
// share-manager pod, with its uid as a precondition (a pod Longhorn's
// share-manager controller started again is not deleted twice); the
// controller creates it again.
func (p *Plane) RestartShareManager(ctx context.Context, pod, uid string) error {
	ref, err := parseRef(pod)
	if err != nil {
		return err
	}
	t := types.UID(uid)
	err = p.dyn.Resource(PodsResource).Namespace(ref.Namespace).Delete(ctx, ref.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &t}})
	switch {
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		return nil // gone, or started again already
	case err != nil:
		return fmt.Errorf("restart the share-manager pod %s: %w", pod, err)
	}
	p.log.Info("share-manager pod deleted", "pod", pod, "uid", uid)
	return nil
}

// parseRef reads namespace/name.
func parseRef(s string) (dataplane.ObjectRef, error) {
	ns, name, ok := strings.Cut(s, "/")
	if !ok || ns == "" || name == "" {
		return dataplane.ObjectRef{}, fmt.Errorf("%w: %q is not namespace/name", dataplane.ErrRefused, s)
	}
	return dataplane.ObjectRef{Namespace: ns, Name: name}, nil
}

// apiMessage is the apiserver's own words for err.
func apiMessage(err error) string {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return status.Status().Message
	}
	return err.Error()
}
