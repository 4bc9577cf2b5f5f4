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

// SetReplicaScheduling sets a Longhorn node's spec.allowScheduling. An
// apiserver that drops the field makes it fail with ErrFieldUnsupported.
func (p *Plane) SetReplicaScheduling(ctx context.Context, node string, allow bool) error {
	action := fmt.Sprintf("set %s=%t", fieldNodeAllowScheduling, allow)
	var ln LonghornNode
	u, err := p.update(ctx, NodesResource, node, action, func(u *unstructured.Unstructured) ([]byte, error) {
		if err := FromUnstructured(u, &ln); err != nil {
			return nil, err
		}
		if ln.Spec.AllowScheduling == allow {
			return nil, nil
		}
		return patchAllowScheduling(allow), nil
	})
	if err != nil {
		return err
	}
	if err := FromUnstructured(u, &ln); err != nil {
		return fmt.Errorf("%s %q: %s: read back: %w", resourceName(NodesResource), node, action, err)
	}
	if ln.Spec.AllowScheduling != allow {
		return errFieldPruned(fmt.Sprintf("longhorn node %q", node), fieldNodeAllowScheduling)
	}
	p.awaitCache(ctx, p.lhNodes, node, u.GetResourceVersion())
	return nil
}

// ReportNVMeMultipath implements dataplane.HostReporter: the node's
// MultipathAnnotation, on its Longhorn node.
func (p *Plane) ReportNVMeMultipath(ctx context.Context, node string, m dataplane.Multipath) error {
	return p.updateSynced(ctx, p.lhNodes, node, "report nvme_core.multipath="+m.Show(), func(u *unstructured.Unstructured) ([]byte, error) {
		if dataplane.ParseMultipath(u.GetAnnotations()[MultipathAnnotation]) == m {
			return nil, nil
		}
		return patchMultipath(m), nil
	})
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

// DeleteSnapshot deletes the Snapshot object of the snapshot named name of
// volume (UID precondition); Longhorn's finalizer removes the snapshot from
// the engine before the object goes. One already gone is success; an
// object of another volume is refused.
func (p *Plane) DeleteSnapshot(ctx context.Context, volume, name string) error {
	obj := SnapshotObjectName(volume, name)
	return p.deleteObject(ctx, SnapshotsResource, nil, obj, fmt.Sprintf("delete snapshot %q of volume %q", name, volume), "", func(u *unstructured.Unstructured) error {
		var have Snapshot
		if err := FromUnstructured(u, &have); err != nil {
			return err
		}
		if have.Spec.Volume != volume {
			return fmt.Errorf("snapshot object %s belongs to volume %q: %w", obj, have.Spec.Volume, dataplane.ErrRefused)
		}
		return nil
	})
}

// FailReplica marks a v2 replica failed: spec.failedAt (with lastFailedAt)
// stamped on the replica as read. Longhorn's volume controller then leaves
// it out of the engine's replicaAddressMap (it owns that map, so the
// adapter never edits it) and the engine removes it from its RAID; its
// instance keeps running until StopReplica. A replica already failed, or
// being deleted, is a no-op; one of another volume is refused.
func (p *Plane) FailReplica(ctx context.Context, volume, replica string) error {
	var r Replica
	u, err := p.update(ctx, ReplicasResource, replica, "fail (volume "+volume+")", func(u *unstructured.Unstructured) ([]byte, error) {
		if err := FromUnstructured(u, &r); err != nil {
			return nil, err
		}
		if err := replicaOf(&r, volume); err != nil {
			return nil, err
		}
		if r.DeletionTimestamp != nil || r.Spec.FailedAt != "" {
			return nil, nil
		}
		return patchFailReplica(p.opts.Now().UTC().Format(time.RFC3339), u.GetResourceVersion()), nil
	})
	if err != nil {
		return err
	}
	p.awaitCache(ctx, p.replicas, replica, u.GetResourceVersion())
	return nil
}

// StopReplica stops a failed v2 replica's instance (spec.desireState
// stopped) once no running engine of its volume holds it, judged on the
// replica and the engines read fresh as Longhorn's replica controller
// judges it before it stops a replica it deletes (replicaHeld). It is
// refused with dataplane.ErrReplicaInEngine while one does, and with
// ErrRefused for a replica not failed (Longhorn would start it again). A
// replica already stopping, or being deleted, is a no-op.
func (p *Plane) StopReplica(ctx context.Context, volume, replica string) error {
	var r Replica
	u, err := p.update(ctx, ReplicasResource, replica, "stop (volume "+volume+")", func(u *unstructured.Unstructured) ([]byte, error) {
		if err := FromUnstructured(u, &r); err != nil {
			return nil, err
		}
		if err := replicaOf(&r, volume); err != nil {
			return nil, err
		}
		switch {
		case r.DeletionTimestamp != nil || r.Spec.DesireState == StateStopped:
			return nil, nil
		case r.Spec.FailedAt == "":
			return nil, fmt.Errorf("it is not failed (spec.failedAt), and Longhorn would start it again: %w", dataplane.ErrRefused)
		}
		// An engine created since the cache's view is a switch-over's,
		// which holds no failed replica.
		engines, err := fresh(ctx, p, EnginesResource, indexed[Engine](p.engines, byVolume, volume))
		if err != nil {
			return nil, err
		}
		if replicaHeld(&r, engines) {
			return nil, dataplane.ErrReplicaInEngine
		}
		return patchStopReplica(u.GetResourceVersion()), nil
	})
	if err != nil {
		return err
	}
	p.awaitCache(ctx, p.replicas, replica, u.GetResourceVersion())
	return nil
}

// fresh reads from the apiserver the objects cached lists (those gone
// since are left out): a decision taken on them holds on the objects as
// they are.
func fresh[T any, PT interface {
	*T
	metav1.Object
}](ctx context.Context, p *Plane, gvr schema.GroupVersionResource, cached []PT) ([]PT, error) {
	out := make([]PT, 0, len(cached))
	for _, c := range cached {
		u, err := p.ri(gvr).Get(ctx, c.GetName(), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, apiError(err, fmt.Sprintf("%s %q: read", resourceName(gvr), c.GetName()))
		}
		o := PT(new(T))
		if err := FromUnstructured(u, o); err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, nil
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

// SetEngineNode sets a v2 volume's spec.engineNodeID ("" follows
// spec.nodeID), which makes Longhorn switch the target over. The node must
// be a Longhorn node. It is refused while the volume's initiator is
// switching paths (status.switchoverState switching-over and a phase on
// its EngineFrontend, read fresh): changing the engine node then could
// leave the old path inaccessible. An apiserver that drops the field makes
// it fail with ErrFieldUnsupported.
func (p *Plane) SetEngineNode(ctx context.Context, volume, node string) error {
	if node != "" {
		if _, ok := get[LonghornNode](p.lhNodes, key(p.ns, node)); !ok {
			return notFound(fmt.Sprintf("%s %q: set %s: longhorn node %q", resourceName(VolumesResource), volume, fieldVolumeEngineNode, node))
		}
	}
	var v Volume
	u, err := p.update(ctx, VolumesResource, volume, fmt.Sprintf("set %s=%q", fieldVolumeEngineNode, node), func(u *unstructured.Unstructured) ([]byte, error) {
		if err := FromUnstructured(u, &v); err != nil {
			return nil, err
		}
		if !isV2(v.Spec.DataEngine) {
			return nil, errNotV2
		}
		if v.Spec.EngineNodeID == node {
			return nil, nil
		}
		if v.Status.SwitchoverState == string(dataplane.SwitchoverSwitchingOver) {
			efs, err := fresh(ctx, p, EngineFrontendsResource, indexed[EngineFrontend](p.frontends, byVolume, volume))
			if err != nil {
				return nil, err
			}
			if pathsSwitching(&v, efs) {
				return nil, dataplane.ErrSwitchingPaths
			}
		}
		return patchEngineNode(node, u.GetResourceVersion()), nil
	})
	if err != nil {
		return err
	}
	if err := FromUnstructured(u, &v); err != nil {
		return fmt.Errorf("%s %q: set %s: read back: %w", resourceName(VolumesResource), volume, fieldVolumeEngineNode, err)
	}
	if v.Spec.EngineNodeID != node {
		return errFieldPruned(fmt.Sprintf("longhorn volume %q", volume), fieldVolumeEngineNode)
	}
	p.awaitCache(ctx, p.volumes, volume, u.GetResourceVersion())
	return nil
}

// RecordTargetAway implements dataplane.TargetRecorder: it sets the
// volume's TargetAwayAnnotation (nil removes it). It is the controller's
// write, never a worker's: the workers' admission policy refuses a worker
// that changes it. A volume already carrying the record is a no-op.
func (p *Plane) RecordTargetAway(ctx context.Context, volume string, away *dataplane.TargetAway) error {
	action := "remove annotation " + TargetAwayAnnotation
	if away != nil {
		action = fmt.Sprintf("set annotation %s=%q", TargetAwayAnnotation, FormatTargetAway(*away))
	}
	return p.updateSynced(ctx, p.volumes, volume, action, func(u *unstructured.Unstructured) ([]byte, error) {
		have := ParseTargetAway(u.GetAnnotations()[TargetAwayAnnotation])
		_, present := u.GetAnnotations()[TargetAwayAnnotation]
		if (away == nil && !present) || (away != nil && have != nil && *have == *away) {
			return nil, nil
		}
		return patchTargetAway(away, u.GetResourceVersion()), nil
	})
}

// DeleteInstanceManager deletes a v2 instance manager that runs no engine,
// engine frontend or replica (its status maps), as Longhorn's node
// controller would once it is idle, and as Longhorn deletes one: in the
// foreground, so that its object stays until its pod (and the SPDK target
// holding the node's hugepages and disks) is gone, and the node's next IM
// waits for it. One that runs any instance is refused. One already gone,
// or already being deleted, is success.
func (p *Plane) DeleteInstanceManager(ctx context.Context, name string) error {
	return p.deleteObject(ctx, InstanceManagersResource, p.ims, name, "delete", metav1.DeletePropagationForeground, func(u *unstructured.Unstructured) error {
		var im InstanceManager
		if err := FromUnstructured(u, &im); err != nil {
			return err
		}
		if !isV2(im.Spec.DataEngine) {
			return errNotV2
		}
		if d := toInstanceManager(&im); d.Busy() {
			return fmt.Errorf("it still runs %d engine(s), %d engine frontend(s), %d replica(s) and %d shard(s): %w",
				d.Engines, d.Frontends, d.Replicas, d.Shards, dataplane.ErrRefused)
		}
		return nil
	})
}

// SetInstanceManagerImage sets a v2 instance manager's spec.image, which a
// Longhorn of dataplane.ProfileInPlace applies to the running IM. Other
// profiles refuse it: there Longhorn replaces IMs itself.
func (p *Plane) SetInstanceManagerImage(ctx context.Context, name, image string) error {
	if !p.opts.Platform.Profile.InPlaceIM() {
		return fmt.Errorf("%s %q: set %s: %w: Longhorn %s replaces instance managers itself", resourceName(InstanceManagersResource), name, fieldIMImage, dataplane.ErrRefused, p.opts.Platform.Profile)
	}
	var im InstanceManager
	return p.updateSynced(ctx, p.ims, name, fmt.Sprintf("set %s=%q", fieldIMImage, image), func(u *unstructured.Unstructured) ([]byte, error) {
		if err := FromUnstructured(u, &im); err != nil {
			return nil, err
		}
		if !isV2(im.Spec.DataEngine) {
			return nil, errNotV2
		}
		if im.Spec.Image == image {
			return nil, nil
		}
		return patchIMImage(image, u.GetResourceVersion()), nil
	})
}

// updateSynced is update of w's resource, then a wait until w's cache
// shows the object as written (or as read, when nothing was to do).
func (p *Plane) updateSynced(ctx context.Context, w *watched, name, action string,
	decide func(u *unstructured.Unstructured) ([]byte, error)) error {
	u, err := p.update(ctx, w.gvr, name, action, decide)
	if err != nil {
		return err
	}
	p.awaitCache(ctx, w, name, u.GetResourceVersion())
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
// UID precondition so that a namesake created meanwhile is never deleted,
// and the propagation given ("" = the apiserver's default).
// Gone already is success; being deleted already is success. It then waits
// until the cache shows the object gone, or marked for deletion (Longhorn's
// finalizers keep an object until its controller has cleaned up).
func (p *Plane) deleteObject(ctx context.Context, gvr schema.GroupVersionResource, w *watched, name, action string,
	propagation metav1.DeletionPropagation, check func(u *unstructured.Unstructured) error) error {
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
			opts := metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}
			if propagation != "" {
				opts.PropagationPolicy = &propagation
			}
			err = ri.Delete(ctx, name, opts)
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
// name gone, with rv ""), within Options.WriteSyncTimeout. A resource the
// plane does not cache (w nil) has nothing to wait for.
func (p *Plane) awaitCache(ctx context.Context, w *watched, name, rv string) {
	if w == nil {
		return
	}
	if !w.seen.wait(ctx, key(p.nsOf(w.gvr), name), rv, p.opts.WriteSyncTimeout) && ctx.Err() == nil {
		p.log.Debug("cache did not show the write in time", "resource", resourceName(w.gvr), "name", name, "resourceVersion", rv)
	}
}
