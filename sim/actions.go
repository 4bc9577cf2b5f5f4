package sim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/switchback-dev/switchback/dataplane"
)

// Errors for actions Longhorn would refuse. dataplane has no sentinels for
// these yet, so they are matched with errors.Is against the sim's own.
var (
	// ErrVolumeAttached: the action needs a detached volume.
	ErrVolumeAttached = fmt.Errorf("%w: volume is attached", dataplane.ErrRefused)
	// ErrWrongEngine: the action does not apply to the volume's data engine.
	ErrWrongEngine = fmt.Errorf("%w: not supported by the volume's data engine", dataplane.ErrRefused)
	// ErrUpgradeRequested: the node's upgrade flag forbids the action.
	ErrUpgradeRequested = errors.New("node upgrade requested")
)

// ActionRecord is one call to an action, kept so that tests can check what
// the upgrade touched and that a redelivered step repeated no side effect.
type ActionRecord struct {
	At     time.Time
	Action string // method name, e.g. "FailReplica"
	Object string // node, volume or IM name
	Arg    string // replica, target node, snapshot, image or flag value
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
	changed, err := do(s.now())
	s.record(action, object, arg, !changed && err == nil, err)
	if changed {
		s.checkIO()
		s.react()
	}
	return err
}

// SetNodeUpgradeRequested sets or clears the node's upgrade flag. While set,
// no new v2 replica of another volume is scheduled there and no v2 volume may
// attach there.
func (s *Sim) SetNodeUpgradeRequested(ctx context.Context, nodeName string, requested bool) error {
	return s.act(ctx, "SetNodeUpgradeRequested", nodeName, fmt.Sprint(requested), func(now time.Time) (bool, error) {
		n, err := s.node(nodeName)
		if err != nil {
			return false, fmt.Errorf("set upgrade requested: %w", err)
		}
		if n.flag == requested {
			return false, nil
		}
		n.flag = requested
		if requested {
			s.trigger(nodeName, TriggerUpgradeRequested, now)
		} else {
			s.unblock = true
		}
		return true, nil
	})
}

// CreateSnapshot takes a snapshot named name; an existing name is a no-op.
func (s *Sim) CreateSnapshot(ctx context.Context, volName, name string) error {
	return s.act(ctx, "CreateSnapshot", volName, name, func(time.Time) (bool, error) {
		v, err := s.volume(volName)
		if err != nil {
			return false, fmt.Errorf("create snapshot %q: %w", name, err)
		}
		if slices.Contains(v.snapshots, name) {
			return false, nil
		}
		v.snapshots = append(v.snapshots, name)
		return true, nil
	})
}

// FailReplica stops a replica and removes it from its volume's engine: the
// volume is degraded and a rebuild is scheduled (see the package rules).
// A replica already stopped, or already deleted, is a no-op.
func (s *Sim) FailReplica(ctx context.Context, volName, replicaName string) error {
	return s.act(ctx, "FailReplica", volName, replicaName, func(now time.Time) (bool, error) {
		v, r, err := s.replica(volName, replicaName)
		if err != nil || r == nil {
			return false, err
		}
		if r.state == dataplane.ReplicaStopped {
			return false, nil
		}
		s.loseReplica(v, r, dataplane.ReplicaStopped, s.currentIMName(r.node), true, false, now)
		return true, nil
	})
}

// DeleteReplica deletes a replica (Longhorn allows it in any state; the
// upgrade deletes stopped ones). Deleting it again is a no-op.
func (s *Sim) DeleteReplica(ctx context.Context, volName, replicaName string) error {
	return s.act(ctx, "DeleteReplica", volName, replicaName, func(now time.Time) (bool, error) {
		v, r, err := s.replica(volName, replicaName)
		if err != nil || r == nil {
			return false, err
		}
		if r.state == dataplane.ReplicaRunning || r.state == dataplane.ReplicaRebuilding {
			s.loseReplica(v, r, dataplane.ReplicaStopped, s.currentIMName(r.node), true, false, now)
		}
		s.removeReplica(v, r)
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
	s.io.mark(v.name)
}

// SetTargetNode sets the volume's target override ("" clears it, sending the
// target back to the attached node). The target moves after
// TargetMoveLatency, only to a node that is Ready with a running IM;
// otherwise the move stays pending until that holds. Repeating the call
// keeps the pending move and its timing. Only v2 volumes have a movable target.
func (s *Sim) SetTargetNode(ctx context.Context, volName, nodeName string) error {
	return s.act(ctx, "SetTargetNode", volName, nodeName, func(now time.Time) (bool, error) {
		v, err := s.volume(volName)
		if err != nil {
			return false, fmt.Errorf("set target node %q: %w", nodeName, err)
		}
		if v.engine != EngineV2 {
			return false, fmt.Errorf("set target node of volume %q (%s): %w", volName, v.engine, ErrWrongEngine)
		}
		if nodeName != "" {
			if _, err := s.node(nodeName); err != nil {
				return false, fmt.Errorf("set target node of volume %q: %w", volName, err)
			}
		}
		if v.override == nodeName {
			return false, nil
		}
		v.override = nodeName
		s.planMove(v, now)
		return true, nil
	})
}

// DeleteInstanceManager deletes an IM: it stops at once, losing every target
// and replica it held, and a new IM with the default image starts on the
// node and runs after IMStartLatency. Deleting a stopped or already removed
// IM is a no-op.
func (s *Sim) DeleteInstanceManager(ctx context.Context, name string) error {
	return s.act(ctx, "DeleteInstanceManager", name, "", func(now time.Time) (bool, error) {
		m := s.ims[name]
		if m == nil {
			if s.imGone[name] {
				return false, nil
			}
			return false, fmt.Errorf("delete instance manager %q: %w", name, dataplane.ErrNotFound)
		}
		if m.state == dataplane.IMStopped {
			return false, nil
		}
		n := s.nodes[m.node]
		s.stopIM(n, m, now)
		s.trigger(n.name, TriggerIMDeleted, now)
		return true, nil
	})
}

// SetVolumeImage moves a detached v2 volume to image; an attached volume is
// refused (ErrVolumeAttached) because its engine image follows the IM that
// hosts its target.
func (s *Sim) SetVolumeImage(ctx context.Context, volName, image string) error {
	return s.act(ctx, "SetVolumeImage", volName, image, func(time.Time) (bool, error) {
		v, err := s.volume(volName)
		if err != nil {
			return false, fmt.Errorf("set image: %w", err)
		}
		if v.engine != EngineV2 {
			return false, fmt.Errorf("set image of volume %q (%s): %w", volName, v.engine, ErrWrongEngine)
		}
		if v.attached != "" {
			return false, fmt.Errorf("set image of volume %q (attached to %s): %w", volName, v.attached, ErrVolumeAttached)
		}
		if v.image == image {
			return false, nil
		}
		v.image = image
		return true, nil
	})
}

// AttachVolume attaches a detached volume to a node (the initiator), with
// its target there or on its override. Longhorn refuses to attach a v2
// volume to a node whose upgrade was requested. Not part of dataplane: tests
// use it to change the workload under an upgrade.
func (s *Sim) AttachVolume(volName, nodeName string) error {
	return s.act(context.Background(), "AttachVolume", volName, nodeName, func(now time.Time) (bool, error) {
		v, err := s.volume(volName)
		if err != nil {
			return false, fmt.Errorf("attach: %w", err)
		}
		n, err := s.node(nodeName)
		if err != nil {
			return false, fmt.Errorf("attach volume %q: %w", volName, err)
		}
		if v.attached == nodeName {
			return false, nil
		}
		if v.attached != "" {
			return false, fmt.Errorf("attach volume %q to %s (attached to %s): %w", volName, nodeName, v.attached, ErrVolumeAttached)
		}
		if v.engine == EngineV2 && n.flag {
			return false, fmt.Errorf("attach volume %q to %s: %w", volName, nodeName, ErrUpgradeRequested)
		}
		s.setAttached(v, nodeName)
		target := nodeName
		if v.override != "" {
			target = v.override
		}
		s.setTarget(v, target)
		return true, nil
	})
}

// DetachVolume detaches a volume; its target goes away with the initiator.
func (s *Sim) DetachVolume(volName string) error {
	return s.act(context.Background(), "DetachVolume", volName, "", func(time.Time) (bool, error) {
		v, err := s.volume(volName)
		if err != nil {
			return false, fmt.Errorf("detach: %w", err)
		}
		if v.attached == "" {
			return false, nil
		}
		s.setAttached(v, "")
		s.setTarget(v, "")
		v.move = nil
		delete(s.pendingMoves, v.name)
		return true, nil
	})
}
