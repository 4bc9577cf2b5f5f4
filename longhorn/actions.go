package longhorn

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/switchback-dev/switchback/dataplane"
)

// Every action reads its object fresh from the apiserver (never from the
// cache: a decision such as "this volume is detached" must hold on the
// object as it is), does nothing when the object already is as asked (the
// actions are idempotent: workers are redelivered commands), patches only
// the fields it owns, and waits until the cache shows the result so that
// the caller's next read sees its own write.

// maxConflictRetries bounds the re-reads after a resourceVersion conflict;
// each one means someone else changed the object meanwhile.
const maxConflictRetries = 5

// SetNodeUpgradeRequested sets or clears the node's
// spec.dataEngineUpgradeRequested. An apiserver that drops the field (a
// Longhorn without it) makes it fail with ErrFieldUnsupported.
func (p *Plane) SetNodeUpgradeRequested(ctx context.Context, node string, requested bool) error {
	action := fmt.Sprintf("set %s=%t", fieldNodeUpgradeRequested, requested)
	var ln LonghornNode
	u, err := p.update(ctx, NodesResource, node, action, func(u *unstructured.Unstructured) ([]byte, error) {
		if err := FromUnstructured(u, &ln); err != nil {
			return nil, err
		}
		if ln.Spec.DataEngineUpgradeRequested == requested {
			return nil, nil
		}
		return patchNodeUpgradeRequested(requested), nil
	})
	if err != nil {
		return err
	}
	if err := FromUnstructured(u, &ln); err != nil {
		return err
	}
	if ln.Spec.DataEngineUpgradeRequested != requested {
		return errFieldPruned(fmt.Sprintf("longhorn node %q", node), fieldNodeUpgradeRequested)
	}
	p.awaitCache(ctx, p.lhNodes, node, u.GetResourceVersion())
	return nil
}

// CreateSnapshot creates the Snapshot object of a snapshot named name of a v2
// volume (object name from SnapshotObjectName). An existing one is success
// when it is of the same volume.
func (p *Plane) CreateSnapshot(ctx context.Context, volume, name string) error {
	what := fmt.Sprintf("%s %q: create snapshot %q", resourceName(VolumesResource), volume, name)
	u, err := p.ri(VolumesResource).Get(ctx, volume, metav1.GetOptions{})
	if err != nil {
		return apiError(err, what)
	}
	var v Volume
	if err := FromUnstructured(u, &v); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if !isV2(v.Spec.DataEngine) {
		return fmt.Errorf("%s: %w", what, errNotV2)
	}
	snap := newSnapshot(p.ns, volume, name)
	obj, err := ToUnstructured(snap, KindSnapshot)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	_, err = p.ri(SnapshotsResource).Create(ctx, obj, metav1.CreateOptions{})
	switch {
	case err == nil:
		p.log.Info("longhorn snapshot created", "volume", volume, "snapshot", name, "object", snap.Name)
		return nil
	case !apierrors.IsAlreadyExists(err):
		return apiError(err, what)
	}
	existing, err := p.ri(SnapshotsResource).Get(ctx, snap.Name, metav1.GetOptions{})
	if err != nil {
		return apiError(err, what)
	}
	var have Snapshot
	if err := FromUnstructured(existing, &have); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if have.Spec.Volume != volume {
		return fmt.Errorf("%s: snapshot object %s belongs to volume %q: %w", what, snap.Name, have.Spec.Volume, dataplane.ErrRefused)
	}
	return nil
}

// FailReplica fails a v2 replica as Longhorn does: spec.desireState stopped
// and spec.failedAt stamped (in one patch, on the replica as read), then the
// replica is removed from its volume's engines' spec.replicaAddressMap. A
// replica already failed, or being deleted, is a no-op; one of another
// volume is refused.
func (p *Plane) FailReplica(ctx context.Context, volume, replica string) error {
	var r Replica
	u, err := p.update(ctx, ReplicasResource, replica, "fail (volume "+volume+")", func(u *unstructured.Unstructured) ([]byte, error) {
		if err := FromUnstructured(u, &r); err != nil {
			return nil, err
		}
		if err := replicaOf(&r, volume); err != nil {
			return nil, err
		}
		if r.DeletionTimestamp != nil || (r.Spec.DesireState == StateStopped && r.Spec.FailedAt != "") {
			return nil, nil
		}
		failedAt := ""
		if r.Spec.FailedAt == "" {
			failedAt = p.opts.Now().UTC().Format(time.RFC3339)
		}
		return patchFailReplica(failedAt, u.GetResourceVersion()), nil
	})
	if err != nil {
		return err
	}
	if err := p.dropFromEngines(ctx, volume, replica); err != nil {
		return err
	}
	p.awaitCache(ctx, p.replicas, replica, u.GetResourceVersion())
	return nil
}

// DeleteReplica deletes a v2 replica of volume after taking it out of the
// volume's engines. A replica already gone is success.
func (p *Plane) DeleteReplica(ctx context.Context, volume, replica string) error {
	return p.deleteObject(ctx, ReplicasResource, p.replicas, replica, "delete (volume "+volume+")", func(u *unstructured.Unstructured) error {
		var r Replica
		if err := FromUnstructured(u, &r); err != nil {
			return err
		}
		if err := replicaOf(&r, volume); err != nil {
			return err
		}
		return p.dropFromEngines(ctx, volume, replica)
	})
}

// replicaOf checks that r is a v2 replica of volume.
func replicaOf(r *Replica, volume string) error {
	if r.Spec.VolumeName != volume {
		return fmt.Errorf("replica of volume %q, not %q: %w", r.Spec.VolumeName, volume, dataplane.ErrRefused)
	}
	if !isV2(r.Spec.DataEngine) {
		return errNotV2
	}
	return nil
}

// dropFromEngines removes replica from the replicaAddressMap of every v2
// engine of volume (the cache lists them; a key already absent is a no-op
// for the apiserver).
func (p *Plane) dropFromEngines(ctx context.Context, volume, replica string) error {
	for _, e := range indexed[Engine](p.engines, byVolume, volume) {
		if !isV2(e.Spec.DataEngine) || e.DeletionTimestamp != nil {
			continue
		}
		if _, ok := e.Spec.ReplicaAddressMap[replica]; !ok {
			continue
		}
		what := fmt.Sprintf("%s %q: remove replica %q", resourceName(EnginesResource), e.Name, replica)
		if _, err := p.ri(EnginesResource).Patch(ctx, e.Name, types.MergePatchType, patchEngineDropReplica(replica), metav1.PatchOptions{}); err != nil {
			if apierrors.IsNotFound(err) {
				continue // the engine went away with what it held
			}
			return apiError(err, what)
		}
		p.log.Info("longhorn engine patched", "engine", e.Name, "volume", volume, "removed replica", replica)
	}
	return nil
}

// SetTargetNode sets a v2 volume's spec.targetNodeID ("" clears it). The
// node must be a Longhorn node. An apiserver that drops the field makes it
// fail with ErrFieldUnsupported.
func (p *Plane) SetTargetNode(ctx context.Context, volume, node string) error {
	if node != "" {
		if _, ok := get[LonghornNode](p.lhNodes, key(p.ns, node)); !ok {
			return notFound(fmt.Sprintf("%s %q: set %s: longhorn node %q", resourceName(VolumesResource), volume, fieldVolumeTargetNode, node))
		}
	}
	var v Volume
	u, err := p.update(ctx, VolumesResource, volume, fmt.Sprintf("set %s=%q", fieldVolumeTargetNode, node), func(u *unstructured.Unstructured) ([]byte, error) {
		if err := FromUnstructured(u, &v); err != nil {
			return nil, err
		}
		if !isV2(v.Spec.DataEngine) {
			return nil, errNotV2
		}
		if v.Spec.TargetNodeID == node {
			return nil, nil
		}
		return patchTargetNode(node), nil
	})
	if err != nil {
		return err
	}
	if err := FromUnstructured(u, &v); err != nil {
		return err
	}
	if v.Spec.TargetNodeID != node {
		return errFieldPruned(fmt.Sprintf("longhorn volume %q", volume), fieldVolumeTargetNode)
	}
	p.awaitCache(ctx, p.volumes, volume, u.GetResourceVersion())
	return nil
}

// DeleteInstanceManager deletes a v2 instance manager; Longhorn recreates
// the node's IM with the default image. One already gone, or already being
// deleted, is success.
func (p *Plane) DeleteInstanceManager(ctx context.Context, name string) error {
	return p.deleteObject(ctx, InstanceManagersResource, p.ims, name, "delete", func(u *unstructured.Unstructured) error {
		var im InstanceManager
		if err := FromUnstructured(u, &im); err != nil {
			return err
		}
		if !isV2(im.Spec.DataEngine) {
			return errNotV2
		}
		return nil
	})
}

// SetVolumeImage sets spec.image of a detached v2 volume. An attached (or
// attaching, or detaching) volume is refused: its engine image follows the
// instance manager hosting its target. The patch carries the
// resourceVersion the volume was seen detached at.
func (p *Plane) SetVolumeImage(ctx context.Context, volume, image string) error {
	var v Volume
	u, err := p.update(ctx, VolumesResource, volume, fmt.Sprintf("set spec.image=%q", image), func(u *unstructured.Unstructured) ([]byte, error) {
		if err := FromUnstructured(u, &v); err != nil {
			return nil, err
		}
		if !isV2(v.Spec.DataEngine) {
			return nil, errNotV2
		}
		if n := attachedNode(&v); n != "" || (v.Status.State != "" && v.Status.State != VolumeDetached) {
			return nil, fmt.Errorf("volume is %s (node %q): %w", v.Status.State, n, dataplane.ErrRefused)
		}
		if v.Spec.Image == image {
			return nil, nil
		}
		return patchVolumeImage(image, u.GetResourceVersion()), nil
	})
	if err != nil {
		return err
	}
	p.awaitCache(ctx, p.volumes, volume, u.GetResourceVersion())
	return nil
}

// update reads the object fresh, lets decide return a merge patch (nil:
// nothing to do) and applies it, starting again on a resourceVersion
// conflict. It returns the object as patched, or as read when nothing was
// to do. Errors name the object and the action.
func (p *Plane) update(ctx context.Context, gvr schema.GroupVersionResource, name, action string,
	decide func(u *unstructured.Unstructured) ([]byte, error)) (*unstructured.Unstructured, error) {
	what := fmt.Sprintf("%s %q: %s", resourceName(gvr), name, action)
	ri := p.ri(gvr)
	for attempt := 0; ; attempt++ {
		u, err := ri.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, apiError(err, what)
		}
		patch, err := decide(u)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		if patch == nil {
			return u, nil
		}
		out, err := ri.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
		if err == nil {
			p.log.Info("longhorn object patched", "resource", resourceName(gvr), "name", name, "action", action)
			return out, nil
		}
		if apierrors.IsConflict(err) && attempt < maxConflictRetries {
			p.log.Debug("longhorn object changed meanwhile, reading again", "resource", resourceName(gvr), "name", name, "action", action)
			continue
		}
		return nil, apiError(err, what)
	}
}

// deleteObject deletes an object after check approves it as read, with a
// UID precondition so that a namesake created meanwhile is never deleted.
// Gone already is success; being deleted already is success. It then waits
// until the cache shows the object gone, or marked for deletion (Longhorn's
// finalizers keep an object until its controller has cleaned up).
func (p *Plane) deleteObject(ctx context.Context, gvr schema.GroupVersionResource, w *watched, name, action string,
	check func(u *unstructured.Unstructured) error) error {
	what := fmt.Sprintf("%s %q: %s", resourceName(gvr), name, action)
	ri := p.ri(gvr)
	for attempt := 0; ; attempt++ {
		u, err := ri.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			p.awaitCache(ctx, w, name, "")
			return nil
		}
		if err != nil {
			return apiError(err, what)
		}
		if err := check(u); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if u.GetDeletionTimestamp() == nil {
			uid := u.GetUID()
			err = ri.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
			switch {
			case err == nil:
				p.log.Info("longhorn object deleted", "resource", resourceName(gvr), "name", name, "action", action)
			case apierrors.IsNotFound(err):
			case apierrors.IsConflict(err) && attempt < maxConflictRetries:
				continue
			default:
				return apiError(err, what)
			}
		}
		after, err := ri.Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			p.awaitCache(ctx, w, name, "")
		case err != nil:
			return apiError(err, what)
		default:
			p.awaitCache(ctx, w, name, after.GetResourceVersion())
		}
		return nil
	}
}

// awaitCache waits until w's cache shows resourceVersion rv of name (or
// name gone, with rv ""), within Options.WriteSyncTimeout.
func (p *Plane) awaitCache(ctx context.Context, w *watched, name, rv string) {
	if !w.seen.wait(ctx, key(p.nsOf(w.gvr), name), rv, p.opts.WriteSyncTimeout) && ctx.Err() == nil {
		p.log.Debug("cache did not show the write in time", "resource", resourceName(w.gvr), "name", name, "resourceVersion", rv)
	}
}
