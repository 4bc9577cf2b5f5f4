package longhornsim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/longhorn"
	"github.com/switchback-dev/switchback/sim"
)

// mirror turns what others changed in the objects into simulator actions,
// as Longhorn's controllers react to the same changes. A refusal by the
// simulator is logged and dropped, as Longhorn would ignore or reject it;
// the object keeps what was asked.
func (m *Manager) mirror(ctx context.Context) error {
	var errs []error
	// Snapshots first: the adapter takes them before it touches anything.
	_, byVolume := m.sim.Instances()
	present := map[string]bool{}
	for _, s := range all[longhorn.Snapshot](m.snapshots) {
		present[s.Name] = true
		if s.DeletionTimestamp != nil {
			errs = append(errs, m.deleteSnapshot(ctx, s, byVolume[s.Spec.Volume]))
			continue
		}
		if err := m.mirrorSnapshot(ctx, s); err != nil {
			errs = append(errs, err)
		}
	}
	for obj, vs := range m.snapped {
		if !present[obj] {
			m.act("DeleteSnapshot", obj, m.sim.DeleteSnapshot(ctx, vs[0], vs[1]))
			delete(m.snapped, obj)
		}
	}
	for _, kn := range all[longhorn.KubeNode](m.kubeNodes) {
		// A cordon someone else changed since the last round.
		if last, ok := m.cordons[kn.Name]; ok && last != kn.Spec.Unschedulable {
			if kn.Spec.Unschedulable {
				m.act("Cordon", kn.Name, m.sim.Cordon(kn.Name))
			} else {
				m.act("Uncordon", kn.Name, m.sim.Uncordon(kn.Name))
			}
		}
		m.cordons[kn.Name] = kn.Spec.Unschedulable
	}
	for _, n := range all[longhorn.LonghornNode](m.lhNodes) {
		// A report a worker changed since the last round.
		if last, ok := m.multipaths[n.Name]; ok {
			if r := dataplane.ParseMultipath(n.Annotations[longhorn.MultipathAnnotation]); r != last {
				m.act("SetMultipath", n.Name, m.sim.SetMultipath(n.Name, r))
				m.multipaths[n.Name] = r
			}
		}
		if !m.pending(longhorn.NodesResource.Resource, n.Name, n.Generation) {
			continue
		}
		if sn, err := m.sim.Node(ctx, n.Name); err == nil && sn.AllowScheduling != n.Spec.AllowScheduling {
			m.act("SetReplicaScheduling", n.Name, m.sim.SetReplicaScheduling(ctx, n.Name, n.Spec.AllowScheduling))
		}
		m.applied[longhorn.NodesResource.Resource+"/"+n.Name] = n.Generation
	}
	for _, v := range all[longhorn.Volume](m.volumes) {
		if !m.pending(longhorn.VolumesResource.Resource, v.Name, v.Generation) {
			continue
		}
		sv, err := m.sim.Volume(ctx, v.Name)
		if err == nil && sv.EngineNode != v.Spec.EngineNodeID {
			m.act("SetEngineNode", v.Name, m.sim.SetEngineNode(ctx, v.Name, v.Spec.EngineNodeID))
		}
		if err == nil && v.Spec.SnapshotHashingRequestedAt != sv.Hashing.RequestedAt {
			m.mirrorHashingRequest(ctx, v)
		}
		if err == nil && (v.Spec.NumberOfReplicas != sv.NumberOfReplicas || v.Spec.ReplicaAutoBalance != sv.ReplicaAutoBalance || v.Spec.DataLocality != sv.DataLocality) {
			// Longhorn's volume controller replenishes a raised count and
			// cleans up after a lowered one (sim.RuleExtraReplicaCleanup).
			m.act("SetReplicaCount", v.Name, m.sim.SetReplicaCount(ctx, v.Name, dataplane.ReplicaSpec{NumberOfReplicas: v.Spec.NumberOfReplicas,
				ReplicaAutoBalance: v.Spec.ReplicaAutoBalance, DataLocality: v.Spec.DataLocality}))
		}
		m.applied[longhorn.VolumesResource.Resource+"/"+v.Name] = v.Generation
	}
	for _, r := range all[longhorn.Replica](m.replicas) {
		switch {
		case r.DeletionTimestamp != nil:
			// Deletion is final: mirrored whatever the generation. The
			// simulator ignores a replica it already removed.
			if err := m.sim.DeleteReplica(ctx, r.Spec.VolumeName, r.Name); err != nil && !errors.Is(err, dataplane.ErrNotFound) {
				m.act("DeleteReplica", r.Name, err)
			}
		case m.pending(longhorn.ReplicasResource.Resource, r.Name, r.Generation):
			sr, ok := m.simReplica(ctx, r.Spec.VolumeName, r.Name)
			switch {
			case !ok || r.Spec.FailedAt == "":
			case r.Spec.DesireState == longhorn.StateStopped && sr.Running:
				// Longhorn's replica controller stops the instance whatever
				// the engine still holds (its wait is for deletions only).
				m.act("ForceStopReplica", r.Name, m.sim.ForceStopReplica(r.Spec.VolumeName, r.Name))
			case !sr.Failed && sr.Active():
				m.act("FailReplica", r.Name, m.sim.FailReplica(ctx, r.Spec.VolumeName, r.Name))
			}
			m.applied[longhorn.ReplicasResource.Resource+"/"+r.Name] = r.Generation
		}
	}
	simIMs, err := m.sim.InstanceManagers(ctx, "")
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	stateOf := map[string]dataplane.IMState{}
	for _, im := range simIMs {
		stateOf[im.Name] = im.State
	}
	imageOf := map[string]string{}
	for _, im := range simIMs {
		imageOf[im.Name] = im.Image
	}
	deleting := map[string]bool{}
	for _, im := range simIMs {
		deleting[im.Name] = im.Deleting
	}
	apiIMs := byName[longhorn.InstanceManager](m.ims)
	for _, im := range simIMs {
		// Gone from the apiserver though created here: deleted in the
		// background (no finalizer keeps it), its pod lingering.
		if _, ok := apiIMs[im.Name]; !ok && !im.Deleting && m.created(longhorn.InstanceManagersResource.Resource, im.Name) && m.gone(ctx, longhorn.InstanceManagersResource, im.Name) {
			m.act("DeleteInstanceManagerObject", im.Name, m.sim.DeleteInstanceManagerObject(im.Name, false))
			delete(m.applied, longhorn.InstanceManagersResource.Resource+"/"+im.Name)
		}
	}
	for _, im := range all[longhorn.InstanceManager](m.ims) {
		st, ok := stateOf[im.Name]
		switch {
		case !ok:
		case im.DeletionTimestamp != nil:
			// Deleting the object kills the IM whatever it runs, as in Longhorn
			// (the adapter refuses to delete a busy one; anybody else may),
			// its object staying until its pod is gone when the delete is a
			// foreground one.
			if !deleting[im.Name] {
				m.act("DeleteInstanceManagerObject", im.Name, m.sim.DeleteInstanceManagerObject(im.Name, slices.Contains(im.Finalizers, longhorn.ForegroundDeletionFinalizer)))
			}
		case m.pending(longhorn.InstanceManagersResource.Resource, im.Name, im.Generation):
			if imageOf[im.Name] != im.Spec.Image && st != dataplane.IMStopped {
				m.act("SetInstanceManagerImage", im.Name, m.sim.SetInstanceManagerImage(ctx, im.Name, im.Spec.Image))
			}
			m.applied[longhorn.InstanceManagersResource.Resource+"/"+im.Name] = im.Generation
		}
	}
	return errors.Join(errs...)
}

// gone reports whether the apiserver has no such object (the cache may
// not show one just created yet).
func (m *Manager) gone(ctx context.Context, gvr schema.GroupVersionResource, name string) bool {
	_, err := m.ri(gvr).Get(ctx, name, metav1.GetOptions{})
	return apierrors.IsNotFound(err)
}

// created reports whether the manager created (or adopted) the object.
func (m *Manager) created(resource, name string) bool {
	_, ok := m.applied[resource+"/"+name]
	return ok
}

// pending reports whether an object's spec changed since the simulator last
// got it (or the manager last wrote it).
func (m *Manager) pending(resource, name string, generation int64) bool {
	return generation > m.applied[resource+"/"+name]
}

// simReplica is the simulator's view of a replica.
func (m *Manager) simReplica(ctx context.Context, volume, name string) (dataplane.Replica, bool) {
	v, err := m.sim.Volume(ctx, volume)
	if err != nil {
		return dataplane.Replica{}, false
	}
	for _, r := range v.Replicas {
		if r.Name == name {
			return r, true
		}
	}
	return dataplane.Replica{}, false
}

// act logs a mirrored action.
func (m *Manager) act(action, object string, err error) {
	if err != nil {
		m.log.Info("simulator refused a mirrored action", "action", action, "object", object, "error", err)
		return
	}
	m.log.Debug("mirrored", "action", action, "object", object)
}

// deleteSnapshot is Longhorn's snapshot controller on a Snapshot object
// being deleted: it waits while the volume has two engines, then deletes
// the snapshot (from every replica) and lets the object go.
func (m *Manager) deleteSnapshot(ctx context.Context, s *longhorn.Snapshot, vi sim.VolumeInstances) error {
	if vi.SwitchoverTo != "" {
		return nil
	}
	// From the object, not from what this round remembers taking: a
	// snapshot taken before its status was written goes too.
	m.act("DeleteSnapshot", s.Name, m.sim.DeleteSnapshot(ctx, s.Spec.Volume, longhorn.SnapshotName(s)))
	delete(m.snapped, s.Name)
	return m.remove(ctx, longhorn.SnapshotsResource, s.Name, true)
}

// mirrorHashingRequest passes a volume's on-demand hashing request on
// (the simulator plays its hashing); one Longhorn could not parse is
// ignored, as Longhorn fails its sync (LM@v1.12.1
// controller/volume_controller.go:7405-7410).
func (m *Manager) mirrorHashingRequest(ctx context.Context, v *longhorn.Volume) {
	at, err := time.Parse(time.RFC3339, v.Spec.SnapshotHashingRequestedAt)
	if err != nil {
		m.act("RequestSnapshotHashing", v.Name, fmt.Errorf("spec.snapshotHashingRequestedAt %q: %w", v.Spec.SnapshotHashingRequestedAt, err))
		return
	}
	m.act("RequestSnapshotHashing", v.Name, m.sim.RequestSnapshotHashing(ctx, v.Name, at))
}

// writeSnapshotStatus reports, in each Snapshot object of the volume
// mirrored here, what the snapshot chain says of it: its parent (the
// object's name when it has one), size and checksum, as Longhorn's engine
// controller syncs them (LM@v1.12.1 controller/engine_controller.go:1572-1631).
// The rebuilds' system snapshots get no object here.
func (m *Manager) writeSnapshotStatus(ctx context.Context, volume string) error {
	var objs []*longhorn.Snapshot
	for _, s := range all[longhorn.Snapshot](m.snapshots) {
		// Only once the cache shows the status mirrorSnapshot wrote: a
		// status written from an older copy would take it back.
		if _, ok := m.snapped[s.Name]; ok && s.Spec.Volume == volume && s.DeletionTimestamp == nil && s.Status.ReadyToUse {
			objs = append(objs, s)
		}
	}
	if len(objs) == 0 {
		return nil
	}
	chain, err := m.sim.Snapshots(ctx, volume)
	if err != nil {
		return nil // the volume went: its objects go with it
	}
	objectOf := map[string]string{}
	for _, s := range objs {
		objectOf[longhorn.SnapshotName(s)] = s.Name
	}
	var errs []error
	for _, s := range objs {
		i := slices.IndexFunc(chain, func(c dataplane.Snapshot) bool { return c.Name == longhorn.SnapshotName(s) })
		if i < 0 {
			continue
		}
		want := s.Status
		want.UserCreated, want.Size, want.Checksum, want.Parent = chain[i].UserCreated, chain[i].Size, chain[i].Checksum, chain[i].Parent
		if obj, ok := objectOf[want.Parent]; ok {
			want.Parent = obj
		}
		if want != s.Status {
			errs = append(errs, m.putStatus(ctx, longhorn.SnapshotsResource, s.Name, want))
		}
	}
	return errors.Join(errs...)
}

// mirrorSnapshot takes the snapshot a Snapshot object asks for, once, and
// reports it ready in the object's status; the object gets Longhorn's
// finalizer, as Longhorn's snapshot webhook gives it.
func (m *Manager) mirrorSnapshot(ctx context.Context, s *longhorn.Snapshot) error {
	if _, done := m.snapped[s.Name]; done || !s.Spec.CreateSnapshot || s.DeletionTimestamp != nil {
		return nil
	}
	name := longhorn.SnapshotName(s)
	// The finalizer before the snapshot: Longhorn's webhook gives it at
	// creation, so a snapshot it took is never left behind by an object
	// deleted before the finalizer was on it.
	if err := m.patch(ctx, longhorn.SnapshotsResource, s.Name, map[string]any{"metadata": map[string]any{"finalizers": []string{finalizer}}}); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("snapshot %s: %w", s.Name, err)
	}
	status := longhorn.SnapshotStatus{ReadyToUse: true, UserCreated: true, CreationTime: time.Now().UTC().Format(time.RFC3339Nano)}
	if err := m.sim.CreateSnapshot(ctx, s.Spec.Volume, name); err != nil {
		status = longhorn.SnapshotStatus{Error: err.Error()}
	}
	if err := m.putStatus(ctx, longhorn.SnapshotsResource, s.Name, status); err != nil {
		return fmt.Errorf("snapshot %s: %w", s.Name, err)
	}
	m.snapped[s.Name] = [2]string{s.Spec.Volume, name}
	return nil
}
