package sim

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/switchback-dev/switchback/dataplane"
)

// Errors for actions Longhorn would refuse. dataplane has no sentinels for
// these, so they are matched with errors.Is against the sim's own.
var (
	// ErrVolumeAttached: the volume is attached elsewhere already.
	ErrVolumeAttached = fmt.Errorf("%w: volume is attached", dataplane.ErrRefused)
	// ErrWrongEngine: the action does not apply to the volume's data engine.
	ErrWrongEngine = fmt.Errorf("%w: not supported by the volume's data engine", dataplane.ErrRefused)
	// ErrWrongProfile: the simulated Longhorn has no such behaviour.
	ErrWrongProfile = fmt.Errorf("%w: not supported by this Longhorn profile", dataplane.ErrRefused)
	// ErrNoRunningIM: the node has no running v2 instance manager to start
	// an instance in.
	ErrNoRunningIM = fmt.Errorf("%w: no running v2 instance manager on the node", dataplane.ErrRefused)
)

// ActionRecord is one call to an action, kept so that tests can check what
// the upgrade touched and that a redelivered step repeated no side effect.
type ActionRecord struct {
	At     time.Time
	Action string // method name, e.g. "FailReplica"
	Object string // node, volume or IM name
	Arg    string // replica, node, snapshot, image or scheduling value
	NoOp   bool   // the call changed nothing (idempotent repeat)
	Err    string
}

type actionLog struct {
	records []ActionRecord
	dropped int
	limit   int
}

func (s *Sim) record(action, object, arg string, noop bool, err error) {
	if len(s.actions.records) >= s.actions.limit {
		s.actions.dropped++
		return
	}
	rec := ActionRecord{At: s.now(), Action: action, Object: object, Arg: arg, NoOp: noop}
	if err != nil {
		rec.Err = err.Error()
	}
	s.actions.records = append(s.actions.records, rec)
}

// ActionLog returns every recorded action call, oldest first, and how many
// were dropped beyond Config.ActionLogLimit.
func (s *Sim) ActionLog() ([]ActionRecord, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.actions.records), s.actions.dropped
}

// act runs one action under the lock: pending completions first (so the
// action sees the cluster as it is now), then the action, then an I/O round
// if it changed anything.
func (s *Sim) act(ctx context.Context, action, object, arg string, do func(now time.Time) (changed bool, err error)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tick()
	s.accountAll(s.now())
	changed, err := do(s.now())
	s.record(action, object, arg, !changed && err == nil, err)
	if changed {
		s.checkIO()
		s.react()
		s.changes.Notify()
	}
	return err
}

// SetReplicaScheduling sets the node's spec.allowScheduling. While false, no
// replica is scheduled on the node and no failed replica there is reused.
func (s *Sim) SetReplicaScheduling(ctx context.Context, nodeName string, allow bool) error {
	return s.act(ctx, "SetReplicaScheduling", nodeName, fmt.Sprint(allow), func(now time.Time) (bool, error) {
		n, err := s.node(nodeName)
		if err != nil {
			return false, fmt.Errorf("set replica scheduling: %w", err)
		}
		if n.allowSched == allow {
			return false, nil
		}
		n.allowSched = allow
		if allow {
			s.unblock = true
		} else {
			s.trigger(nodeName, TriggerSchedulingDisabled, now)
		}
		return true, nil
	})
}

// CreateSnapshot takes a snapshot named name; an existing name is a no-op.
func (s *Sim) CreateSnapshot(ctx context.Context, volName, name string) error {
	return s.act(ctx, "CreateSnapshot", volName, name, func(now time.Time) (bool, error) {
		v, err := s.volume(volName)
		if err != nil {
			return false, fmt.Errorf("create snapshot %q: %w", name, err)
		}
		if slices.Contains(v.snapshots, name) {
			return false, nil
		}
		v.snapshots = append(v.snapshots, name)
		s.snapshotData(v, name, false, now)
		s.snapshotsTaken++
		return true, nil
	})
}

// DeleteSnapshot removes a snapshot; one already gone is a no-op.
func (s *Sim) DeleteSnapshot(ctx context.Context, volName, name string) error {
	return s.act(ctx, "DeleteSnapshot", volName, name, func(time.Time) (bool, error) {
		v, err := s.volume(volName)
		if err != nil {
			return false, fmt.Errorf("delete snapshot %q: %w", name, err)
		}
		i := slices.Index(v.snapshots, name)
		if i < 0 {
			return false, nil
		}
		v.snapshots = slices.Delete(v.snapshots, i, i+1)
		for _, r := range v.replicas {
			if j := slices.IndexFunc(r.data.snaps, func(sn snap) bool { return sn.name == name }); j >= 0 {
				r.data.removeSnapshot(j)
			}
		}
		return true, nil
	})
}

// FailReplica marks a replica failed (spec.failedAt): it serves no I/O,
// its instance keeps running, and the volume's engine removes it from its
// RAID after ReplicaRemoveLatency; Longhorn reuses or replaces it later
// (see placeReplicas). A replica already failed, or already deleted, is a
// no-op.
func (s *Sim) FailReplica(ctx context.Context, volName, replicaName string) error {
	return s.act(ctx, "FailReplica", volName, replicaName, func(now time.Time) (bool, error) {
		v, r, err := s.replica(volName, replicaName)
		if err != nil || r == nil || r.failed {
			return false, err
		}
		s.failReplica(v, r, now)
		return true, nil
	})
}

// StopReplica stops the instance of a failed replica (spec.desireState
// stopped). It is refused with dataplane.ErrReplicaInEngine while the
// engine still holds it, and with ErrRefused when the replica is not failed
// (Longhorn would start it again). A replica already stopped, or deleted,
// is a no-op.
func (s *Sim) StopReplica(ctx context.Context, volName, replicaName string) error {
	return s.act(ctx, "StopReplica", volName, replicaName, func(now time.Time) (bool, error) {
		v, r, err := s.replica(volName, replicaName)
		switch {
		case err != nil || r == nil || !r.instance:
			return false, err
		case !r.failed:
			return false, fmt.Errorf("stop replica %q of volume %q: %w: it is not failed (spec.failedAt), and Longhorn would start it again", replicaName, volName, dataplane.ErrRefused)
		case r.inEngine && v.targetIM.valid():
			return false, fmt.Errorf("stop replica %q of volume %q: %w", replicaName, volName, dataplane.ErrReplicaInEngine)
		}
		s.stopReplica(v, r, now)
		return true, nil
	})
}

// ForceStopReplica fails and stops a replica in one write, as a caller that
// does not wait for the engine does (spec.failedAt with desireState
// stopped). Not part of dataplane: tests use it to show what the engine's
// RAID makes of it (RuleReplicaLinkTimeout).
func (s *Sim) ForceStopReplica(volName, replicaName string) error {
	return s.act(context.Background(), "ForceStopReplica", volName, replicaName, func(now time.Time) (bool, error) {
		v, r, err := s.replica(volName, replicaName)
		if err != nil || r == nil || (r.failed && !r.instance) {
			return false, err
		}
		s.failReplica(v, r, now)
		s.stopReplica(v, r, now)
		return true, nil
	})
}

// replica finds a replica; a nil replica with a nil error means it was
// deleted already, which makes repeated calls no-ops.
func (s *Sim) replica(volName, replicaName string) (*volume, *replica, error) {
	v, err := s.volume(volName)
	if err != nil {
		return nil, nil, fmt.Errorf("replica %q: %w", replicaName, err)
	}
	r, _ := v.replicaNamed(replicaName)
	if r == nil {
		if _, gone := v.gone[replicaName]; gone {
			return v, nil, nil
		}
		return nil, nil, fmt.Errorf("replica %q of volume %q: %w", replicaName, volName, dataplane.ErrNotFound)
	}
	return v, r, nil
}

func (s *Sim) removeReplica(v *volume, r *replica) {
	_, i := v.replicaNamed(r.name)
	v.replicas = slices.Delete(v.replicas, i, i+1)
	if v.gone == nil {
		v.gone = map[string]struct{}{}
	}
	v.gone[r.name] = struct{}{}
	delIdx(s.replicasOn, r.node, v.name)
	s.reconcile[v.name] = struct{}{}
	s.markVolume(v.name)
}

// SetEngineNode sets the volume's spec.engineNodeID ("" follows the
// attached node). Longhorn then switches the target over (see switchover.go);
// repeating the call keeps the switch-over under way. Only v2 volumes have a
// movable engine.
func (s *Sim) SetEngineNode(ctx context.Context, volName, nodeName string) error {
	return s.act(ctx, "SetEngineNode", volName, nodeName, func(now time.Time) (bool, error) {
		// As the Longhorn data plane does, on the state at the write: the
		// caller decided on an observation that may be a moment old.
		if v := s.vols[volName]; v != nil && v.sw != nil && v.sw.switchingPaths() && v.engineNode != nodeName {
			return false, fmt.Errorf("volume %q: set engine node %q: %w", volName, nodeName, dataplane.ErrSwitchingPaths)
		}
		return s.setEngineNode(volName, nodeName, now)
	})
}

// RecordTargetAway implements dataplane.TargetRecorder: the record is kept
// on the volume as the controller writes it, and read back in Volume.Away.
// It is metadata, not a Longhorn action: the action log does not show it.
func (s *Sim) RecordTargetAway(ctx context.Context, volName string, away *dataplane.TargetAway) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	v, err := s.volume(volName)
	if err != nil {
		return fmt.Errorf("record the target away: %w", err)
	}
	if (v.away == nil && away == nil) || (v.away != nil && away != nil && *v.away == *away) {
		return nil
	}
	v.away = nil
	if away != nil {
		a := *away
		v.away = &a
	}
	s.changes.Notify()
	return nil
}

// PlaceEngine is SetEngineNode done by the cluster's user: the value becomes
// the volume's baseline, which an upgrade must leave in place. Not part of
// dataplane: tests use it to shape the cluster.
func (s *Sim) PlaceEngine(volName, nodeName string) error {
	return s.act(context.Background(), "PlaceEngine", volName, nodeName, func(now time.Time) (bool, error) {
		changed, err := s.setEngineNode(volName, nodeName, now)
		if err == nil {
			s.vols[volName].baseline = nodeName
		}
		return changed, err
	})
}

func (s *Sim) setEngineNode(volName, nodeName string, now time.Time) (bool, error) {
	v, err := s.volume(volName)
	if err != nil {
		return false, fmt.Errorf("set engine node %q: %w", nodeName, err)
	}
	if v.engine != EngineV2 {
		return false, fmt.Errorf("set engine node of volume %q (%s): %w", volName, v.engine, ErrWrongEngine)
	}
	if nodeName != "" {
		if _, err := s.node(nodeName); err != nil {
			return false, fmt.Errorf("set engine node of volume %q: %w", volName, err)
		}
	}
	if v.engineNode == nodeName {
		return false, nil
	}
	v.engineNode = nodeName
	s.planSwitch(v, now)
	return true, nil
}

// DeleteInstanceManager deletes an IM that runs nothing, as
// dataplane.Actions asks and as Longhorn does (in the foreground): one that
// runs an engine, an engine frontend or a replica is refused (ErrRefused).
// The node's IM of the default image starts once the deleted one's pod is
// gone, and runs after IMStartLatency. Deleting an IM already removed, or
// being removed, is a no-op.
func (s *Sim) DeleteInstanceManager(ctx context.Context, name string) error {
	return s.act(ctx, "DeleteInstanceManager", name, "", func(now time.Time) (bool, error) {
		m, err := s.imToRemove(name)
		if m == nil || err != nil {
			return false, err
		}
		n := s.nodes[m.node]
		if m == n.im && m.state == dataplane.IMRunning {
			if e, f, r := s.instances(n); e+f+r+n.shards > 0 {
				return false, fmt.Errorf("delete instance manager %q: %w: it runs %d engine(s), %d engine frontend(s), %d replica(s), %d shard(s)",
					name, dataplane.ErrRefused, e, f, r, n.shards)
			}
		}
		s.removeIM(n, m, now)
		return true, nil
	})
}

// CutInstanceManager deletes an IM's object whatever it runs, as anyone
// may (kubectl delete, whose default is background propagation): it stops
// at once, everything it held is lost, and its pod lingers for
// PodTerminationLatency while the node's next IM starts. Not part of
// dataplane: tests use it to show what the I/O checker makes of it.
func (s *Sim) CutInstanceManager(name string) error {
	return s.DeleteInstanceManagerObject(name, false)
}

// DeleteInstanceManagerObject is the deletion of an IM's object by anyone,
// whatever it runs, with foreground propagation (the object stays until its
// pod is gone) or not (it goes at once, its pod lingering): what the
// simulated Longhorn manager mirrors from the apiserver.
func (s *Sim) DeleteInstanceManagerObject(name string, foreground bool) error {
	return s.act(context.Background(), "DeleteInstanceManagerObject", name, fmt.Sprintf("foreground=%t", foreground), func(now time.Time) (bool, error) {
		m, err := s.imToRemove(name)
		if m == nil || err != nil {
			return false, err
		}
		s.deleteIM(s.nodes[m.node], m, foreground, now)
		return true, nil
	})
}

// imToRemove finds an IM to delete: nil without error when it is gone
// already or being deleted.
func (s *Sim) imToRemove(name string) (*im, error) {
	if m := s.ims[name]; m != nil && !m.deleting {
		return m, nil
	}
	if s.imGone[name] || s.ims[name] != nil {
		return nil, nil
	}
	return nil, fmt.Errorf("delete instance manager %q: %w", name, dataplane.ErrNotFound)
}

// SetInstanceManagerImage sets an IM's image. On ProfileInPlace the same IM
// restarts on it (engines and replicas it ran are lost, kernel initiators
// survive) and runs after IMStartLatency; other profiles refuse it.
func (s *Sim) SetInstanceManagerImage(ctx context.Context, name, image string) error {
	return s.act(ctx, "SetInstanceManagerImage", name, image, func(now time.Time) (bool, error) {
		if !s.cfg.Profile.InPlaceIM() {
			return false, fmt.Errorf("set image of instance manager %q: %w", name, ErrWrongProfile)
		}
		m := s.ims[name]
		if m == nil {
			return false, fmt.Errorf("set image of instance manager %q: %w", name, dataplane.ErrNotFound)
		}
		if m.image == image {
			return false, nil
		}
		s.reimage(s.nodes[m.node], m, image, now)
		s.trigger(m.node, TriggerIMDeleted, now)
		return true, nil
	})
}

// AttachVolume attaches a detached volume to a node (the initiator), with
// its engine there or on spec.engineNodeID. Both nodes need a running v2 IM
// for a v2 volume. Not part of dataplane: tests use it to change the
// workload under an upgrade, as a user would.
func (s *Sim) AttachVolume(volName, nodeName string) error {
	return s.act(context.Background(), "AttachVolume", volName, nodeName, func(now time.Time) (bool, error) {
		v, err := s.volume(volName)
		if err != nil {
			return false, fmt.Errorf("attach: %w", err)
		}
		return s.attach(v, nodeName, now)
	})
}

// attach is AttachVolume under the lock.
func (s *Sim) attach(v *volume, nodeName string, now time.Time) (bool, error) {
	n, err := s.node(nodeName)
	if err != nil {
		return false, fmt.Errorf("attach volume %q: %w", v.name, err)
	}
	if v.attached == nodeName {
		return false, nil
	}
	if v.attached != "" {
		return false, fmt.Errorf("attach volume %q to %s (attached to %s): %w", v.name, nodeName, v.attached, ErrVolumeAttached)
	}
	engineOn := n
	if v.engineNode != "" {
		if engineOn, err = s.node(v.engineNode); err != nil {
			return false, fmt.Errorf("attach volume %q: engine node: %w", v.name, err)
		}
	}
	if v.engine == EngineV2 {
		for _, on := range []*node{n, engineOn} {
			if !on.imRunning() {
				return false, fmt.Errorf("attach volume %q to %s: %s: %w", v.name, nodeName, on.name, ErrNoRunningIM)
			}
		}
	}
	s.setAttached(v, nodeName)
	s.setTarget(v, engineOn.name)
	s.startReplicas(v, now)
	return true, nil
}

// DetachVolume detaches a volume; its engine and initiator stop, and its
// replicas rest on their disks. spec.engineNodeID persists.
func (s *Sim) DetachVolume(volName string) error {
	return s.act(context.Background(), "DetachVolume", volName, "", func(time.Time) (bool, error) {
		v, err := s.volume(volName)
		if err != nil {
			return false, fmt.Errorf("detach: %w", err)
		}
		return s.detach(v), nil
	})
}

// detach is DetachVolume under the lock.
func (s *Sim) detach(v *volume) bool {
	if v.attached == "" {
		return false
	}
	s.endSwitch(v)
	v.pathDown = ""
	v.degradedAt = time.Time{}
	s.setAttached(v, "")
	s.setTarget(v, "")
	s.restReplicas(v)
	return true
}
