package projector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/switchback-dev/switchback/aggregate/nodeupgrade"
	"github.com/switchback-dev/switchback/api/v1beta2"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/kubeclient"
)

// writeNode creates node's NodeDataEngineUpgrade if needed and writes its
// status when the object records an older streamSequence. A refused write is
// reported and skipped (the next event of the node rewrites the whole
// status); anything else is retried until ctx ends.
func (p *Projector) writeNode(ctx context.Context, e *entry, node string, log *slog.Logger) error {
	ref := e.view.ref
	name := NodeUpgradeName(ref.Name, node)
	want := e.view.nodeSeq[node]
	res := p.cfg.Client.NodeUpgrades(ref.Namespace)
	err := p.retry(ctx, log, "node upgrade "+name, p.cfg.WriteTimeout, func(ctx context.Context) error {
		if e.nodeObjs[node] == nil {
			obj, err := p.ensureNode(ctx, e, node, name, log)
			if err != nil {
				return err
			}
			e.nodeObjs[node] = obj
		}
		obj := e.nodeObjs[node]
		if p.trusted(ctx, obj.Status.StreamSequence, log) >= want {
			return nil
		}
		upd := obj.DeepCopy()
		upd.Status = renderNode(e.view, node, obj.Generation)
		out, err := res.UpdateStatus(ctx, upd)
		if err != nil {
			// Conflict: read afresh. NotFound: deleted meanwhile, create
			// it again. Anything else: the outcome is unknown, read afresh.
			e.nodeObjs[node] = nil
			return err
		}
		e.nodeObjs[node] = out
		return nil
	})
	var perm *permanentError
	switch {
	case errors.As(err, &perm):
		p.m.writeFailures.Add(1)
		log.Error("node upgrade write refused; the node's next event rewrites it", "name", name, "error", err)
		p.rec.emit(p.objectsOf(e), notice{at: p.cfg.Now(), warning: true, reason: ReasonStatusRejected, action: actionProject, node: node, managerOnly: true,
			note: fmt.Sprintf("NodeDataEngineUpgrade %s: write refused by the apiserver: %v", name, err)})
		return nil
	case errors.Is(err, errGone):
		// The namespace (hence the manager) is going away; the manager's
		// own write finds out and stops projecting it.
		return nil
	}
	return err
}

// ensureNode reads node's NodeDataEngineUpgrade, creating it when missing.
// An object under the legacy name of this manager and node is adopted. An
// object of our name and node controlled by another manager UID was left by
// an earlier manager of the same name (deleted, its dependents not collected
// yet): it is deleted, and the next attempt creates ours. An object of our
// name for another manager or node is never touched.
func (p *Projector) ensureNode(ctx context.Context, e *entry, node, name string, log *slog.Logger) (*v1beta2.NodeDataEngineUpgrade, error) {
	ref := e.view.ref
	res := p.cfg.Client.NodeUpgrades(ref.Namespace)
	obj, err := res.Get(ctx, name)
	if apierrors.IsNotFound(err) {
		old, lerr := getLegacy(ctx, res, ref, node)
		switch {
		case lerr == nil:
			log.Info("adopted the node upgrade under its former name", "name", old.Name)
			return old, nil
		case !apierrors.IsNotFound(lerr):
			return nil, lerr
		}
		created, err := res.Create(ctx, newNodeUpgrade(e.view, node, name))
		if apierrors.IsNotFound(err) || apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
			return nil, errGone
		}
		if err == nil {
			log.Info("created node upgrade", "name", name)
		}
		return created, err
	}
	if err != nil {
		return nil, err
	}
	if obj.Spec.NodeID != node || obj.Spec.DataEngineUpgradeManager != ref.Name {
		return nil, &permanentError{fmt.Errorf("node upgrade %s is of manager %q and node %q, not ours: left alone", name, obj.Spec.DataEngineUpgradeManager, obj.Spec.NodeID)}
	}
	if !ours(obj, ref, node) {
		log.Warn("deleting a node upgrade left by another manager of the same name", "name", name, "uid", obj.UID)
		uid := obj.UID
		err := res.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return nil, err
		}
		return nil, fmt.Errorf("node upgrade %s belonged to another manager; deleted, creating ours next", name)
	}
	return obj, nil
}

// GetNodeUpgrade returns node's NodeDataEngineUpgrade under the manager
// incarnation ref: under NodeUpgradeName, or under its former name when an
// upgrade in flight before the names were hashed keeps it (adopted).
func GetNodeUpgrade(ctx context.Context, res *kubeclient.Resource[*v1beta2.NodeDataEngineUpgrade, *v1beta2.NodeDataEngineUpgradeList], ref events.ManagerRef, node string) (*v1beta2.NodeDataEngineUpgrade, error) {
	obj, err := res.Get(ctx, NodeUpgradeName(ref.Name, node))
	if !apierrors.IsNotFound(err) {
		return obj, err
	}
	if old, lerr := getLegacy(ctx, res, ref, node); !apierrors.IsNotFound(lerr) {
		return old, lerr
	}
	return nil, err
}

// getLegacy returns node's object under its former name when it is ours,
// else a NotFound error.
func getLegacy(ctx context.Context, res *kubeclient.Resource[*v1beta2.NodeDataEngineUpgrade, *v1beta2.NodeDataEngineUpgradeList], ref events.ManagerRef, node string) (*v1beta2.NodeDataEngineUpgrade, error) {
	legacy := legacyNodeUpgradeName(ref.Name, node)
	if legacy == NodeUpgradeName(ref.Name, node) {
		return nil, apierrors.NewNotFound(v1beta2.Resource("nodedataengineupgrades"), legacy)
	}
	old, err := res.Get(ctx, legacy)
	if err == nil && !ours(old, ref, node) {
		return nil, apierrors.NewNotFound(v1beta2.Resource("nodedataengineupgrades"), legacy)
	}
	return old, err
}

// ours reports whether obj is node's NodeDataEngineUpgrade under the
// manager incarnation ref: controlled by its UID, for that node.
func ours(obj *v1beta2.NodeDataEngineUpgrade, ref events.ManagerRef, node string) bool {
	c := metav1.GetControllerOf(obj)
	return c != nil && string(c.UID) == ref.UID && obj.Spec.NodeID == node
}

// newNodeUpgrade is node's NodeDataEngineUpgrade as first created: spec
// from the node's history (or the manager's plan before the worker started
// it), labelled with the manager and node, controlled by the manager so
// that deleting the manager collects it.
func newNodeUpgrade(v *view, node, name string) *v1beta2.NodeDataEngineUpgrade {
	ref := v.ref
	image, engine := v.Manager.InstanceManagerImage, v.Manager.DataEngine
	if n := v.Nodes[node]; n.Exists {
		image, engine = n.InstanceManagerImage, n.DataEngine
	}
	yes := true
	return &v1beta2.NodeDataEngineUpgrade{
		ObjectMeta: metav1.ObjectMeta{
			Name:      name,
			Namespace: ref.Namespace,
			Labels: map[string]string{
				v1beta2.LabelDataEngineUpgradeManager: labelValue(ref.Name),
				v1beta2.LabelNode:                     labelValue(node),
			},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion:         v1beta2.SchemeGroupVersion.String(),
				Kind:               "DataEngineUpgradeManager",
				Name:               ref.Name,
				UID:                types.UID(ref.UID),
				Controller:         &yes,
				BlockOwnerDeletion: &yes,
			}},
		},
		Spec: v1beta2.NodeDataEngineUpgradeSpec{
			NodeID:                   node,
			DataEngine:               v1beta2.DataEngineType(engine),
			InstanceManagerImage:     image,
			DataEngineUpgradeManager: ref.Name,
		},
	}
}

// nodeStateMessage is a node upgrade's state and message: from its own
// history once its worker started it, else from the manager's record of it
// (scheduled, or ended without starting).
func nodeStateMessage(v *view, node string) (v1beta2.NodeUpgradeState, string) {
	if n := v.Nodes[node]; n.Exists {
		msg := n.Message
		if msg == "" {
			msg = "at " + string(n.State)
		}
		return v1beta2.NodeUpgradeState(n.State), msg
	}
	ns, scheduled := v.Manager.Nodes[node]
	if !scheduled {
		return v1beta2.NodeUpgradeStatePending, "not scheduled"
	}
	msg := ns.Message
	if msg == "" {
		switch {
		case ns.State != events.NodePending:
			msg = string(ns.State)
		case v.Manager.Terminal():
			msg = "not started: the upgrade ended"
		case v.Manager.CancelRequested:
			msg = "scheduled; cancel requested before the worker started"
		default:
			msg = "scheduled; waiting for the node worker"
		}
	}
	return v1beta2.NodeUpgradeState(ns.State), msg
}

// renderNode is the NodeDataEngineUpgrade status of node, computed for the
// object's metadata.generation gen.
func renderNode(v *view, node string, gen int64) v1beta2.NodeDataEngineUpgradeStatus {
	state, msg := nodeStateMessage(v, node)
	st := v1beta2.NodeDataEngineUpgradeStatus{
		ObservedGeneration: gen,
		StreamSequence:     v.nodeSeq[node],
		State:              state,
		Message:            msg,
		Conditions:         withGeneration(v.nodeConds[node], gen),
	}
	n := v.Nodes[node]
	if len(n.Volumes) > 0 {
		st.Volumes = make(map[string]v1beta2.VolumeUpgradeStatus, len(n.Volumes))
	}
	for name, vol := range n.Volumes {
		vm := vol.Message
		if vm == "" && vol.TargetAway() && vol.TargetNode != "" {
			vm = "target on " + vol.TargetNode
		}
		st.Volumes[name] = v1beta2.VolumeUpgradeStatus{State: v1beta2.VolumeUpgradeState(vol.State), Message: vm}
	}
	st.VolumeCount = int32(len(st.Volumes))
	st.Rebuild = rebuildStatus(n.Rebuilds)
	return st
}

// rebuildStatus sums a node's recorded rebuilds; nil when none was
// planned and no temporary replica added.
func rebuildStatus(rebuilds map[string]nodeupgrade.Rebuild) *v1beta2.NodeRebuildStatus {
	var out v1beta2.NodeRebuildStatus
	var first, last time.Time
	for _, rb := range rebuilds {
		if t := rb.Temporary; t != nil && t.Added != nil {
			out.TemporaryReplicas++
		}
		if rb.Planned == nil {
			continue
		}
		out.Volumes++
		out.ExpectedBytes += rb.Planned.ExpectedBytes
		out.FullBytes += rb.Planned.FullBytes
		if rb.Planned.Hashed {
			out.Hashed++
		}
		if rb.Started != nil && (first.IsZero() || rb.Started.At.Before(first)) {
			first = rb.Started.At
		}
		if rb.Finished != nil {
			out.Finished++
			if rb.Finished.At.After(last) {
				last = rb.Finished.At
			}
		}
	}
	if out == (v1beta2.NodeRebuildStatus{}) {
		return nil
	}
	if !first.IsZero() && last.After(first) {
		out.Seconds = int64(last.Sub(first).Round(time.Second) / time.Second)
	}
	return &out
}
