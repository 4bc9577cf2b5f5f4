package longhornsim

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/longhorn"
)

// mirror turns what others changed in the objects into simulator actions,
// as Longhorn's controllers react to the same changes. A refusal by the
// simulator (say, an image for an attached volume) is logged and dropped,
// as Longhorn would ignore or reject it; the object keeps what was asked.
func (m *Manager) mirror(ctx context.Context) error {
	var errs []error
	// Snapshots first: the adapter takes them before it touches anything.
	for _, s := range all[longhorn.Snapshot](m.snapshots) {
		if err := m.mirrorSnapshot(ctx, s); err != nil {
			errs = append(errs, err)
		}
	}
	for _, n := range all[longhorn.LonghornNode](m.lhNodes) {
		if !m.pending(longhorn.NodesResource.Resource, n.Name, n.Generation) {
			continue
		}
		if sn, err := m.sim.Node(ctx, n.Name); err == nil && sn.UpgradeRequested != n.Spec.DataEngineUpgradeRequested {
			m.act("SetNodeUpgradeRequested", n.Name, m.sim.SetNodeUpgradeRequested(ctx, n.Name, n.Spec.DataEngineUpgradeRequested))
		}
		m.applied[longhorn.NodesResource.Resource+"/"+n.Name] = n.Generation
	}
	for _, v := range all[longhorn.Volume](m.volumes) {
		if !m.pending(longhorn.VolumesResource.Resource, v.Name, v.Generation) {
			continue
		}
		if sv, err := m.sim.Volume(ctx, v.Name); err == nil {
			if sv.DesiredTargetNode != v.Spec.TargetNodeID {
				m.act("SetTargetNode", v.Name, m.sim.SetTargetNode(ctx, v.Name, v.Spec.TargetNodeID))
			}
			if sv.Image != v.Spec.Image && !sv.Attached() {
				m.act("SetVolumeImage", v.Name, m.sim.SetVolumeImage(ctx, v.Name, v.Spec.Image))
			}
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
			if r.Spec.FailedAt != "" && m.simReplicaActive(ctx, r.Spec.VolumeName, r.Name) {
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
	for _, im := range all[longhorn.InstanceManager](m.ims) {
		if st, ok := stateOf[im.Name]; ok && im.DeletionTimestamp != nil && st != dataplane.IMStopped {
			m.act("DeleteInstanceManager", im.Name, m.sim.DeleteInstanceManager(ctx, im.Name))
		}
	}
	return errors.Join(errs...)
}

// pending reports whether an object's spec changed since the simulator last
// got it (or the manager last wrote it).
func (m *Manager) pending(resource, name string, generation int64) bool {
	return generation > m.applied[resource+"/"+name]
}

func (m *Manager) simReplicaActive(ctx context.Context, volume, name string) bool {
	v, err := m.sim.Volume(ctx, volume)
	if err != nil {
		return false
	}
	for _, r := range v.Replicas {
		if r.Name == name {
			return r.State == dataplane.ReplicaRunning || r.State == dataplane.ReplicaRebuilding
		}
	}
	return false
}

// act logs a mirrored action.
func (m *Manager) act(action, object string, err error) {
	if err != nil {
		m.log.Info("simulator refused a mirrored action", "action", action, "object", object, "error", err)
		return
	}
	m.log.Debug("mirrored", "action", action, "object", object)
}

// mirrorSnapshot takes the snapshot a Snapshot object asks for, once, and
// reports it ready in the object's status.
func (m *Manager) mirrorSnapshot(ctx context.Context, s *longhorn.Snapshot) error {
	if m.snapped[s.Name] || !s.Spec.CreateSnapshot {
		return nil
	}
	name := s.Annotations[longhorn.SnapshotNameAnnotation]
	if name == "" {
		name = s.Name
	}
	status := longhorn.SnapshotStatus{ReadyToUse: true, CreationTime: time.Now().UTC().Format(time.RFC3339)}
	if err := m.sim.CreateSnapshot(ctx, s.Spec.Volume, name); err != nil {
		status = longhorn.SnapshotStatus{Error: err.Error()}
	}
	if err := m.putStatus(ctx, longhorn.SnapshotsResource, s.Name, status); err != nil {
		return fmt.Errorf("snapshot %s: %w", s.Name, err)
	}
	m.snapped[s.Name] = true
	return nil
}
