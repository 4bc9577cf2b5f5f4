package nodeupgrade

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/switchback-dev/switchback/aggregate"
	"github.com/switchback-dev/switchback/events"
)

// FoldSkipping applies history to s in order, skipping illegal events and returning
// their errors joined.
func FoldSkipping(s State, history ...events.Envelope) (State, error) {
	return aggregate.FoldSkipping(s, Evolve, history)
}

// Evolve applies one node-upgrade event to s. An event that is illegal in s
// (wrong aggregate, malformed payload, or a transition the machine does not
// allow) leaves s unchanged and returns a *TransitionError.
func Evolve(s State, e events.Envelope) (State, error) {
	next := s
	if err := evolve(&next, e, false); err != nil {
		return s, err
	}
	return next, nil
}

// evolve is Evolve in place: it changes *s only once e is admitted and its
// transition allowed, so a refused event leaves *s as it was. owned says
// that no other state shares s's map, so a volume change may write into it
// instead of copying it (see Folder).
func evolve(s *State, e events.Envelope, owned bool) error {
	if err := s.subject().Admit(e, foreign(s, e)); err != nil {
		return err
	}
	if err := apply(s, e, owned); err != nil {
		return err
	}
	s.UpdatedAt = e.Time
	s.Transitions++
	return nil
}

// apply is the node upgrade's own rules: the transition e makes from *s.
// Every case checks before it writes, so a refusal changes nothing.
func apply(s *State, e events.Envelope, owned bool) error {
	switch d := e.Data.(type) {
	case events.NodeUpgradeStarted:
		return applyStarted(s, e, d)
	case events.NodeStateChanged:
		return applyStateChanged(s, e, d)
	case events.NodeUpgradeCompleted:
		if s.State != events.NodeFinalizing {
			return illegal(s, e, "a node upgrade completes only from %s", events.NodeFinalizing)
		}
		s.clearStall()
		s.State = events.NodeCompleted
		s.Message = orDefault(d.Message, "node upgrade completed")
	case events.NodeUpgradeFailed:
		if d.Step != s.State {
			return illegal(s, e, "failure reported for step %s but the node is at %s", d.Step, s.State)
		}
		s.clearStall()
		s.State = events.NodeError
		s.FailedStep = d.Step
		s.FailReason = d.Reason
		s.Message = d.Message
	case events.NodeStalled:
		return applyStalled(s, e, d)
	case events.NodeResumed:
		if !s.Stalled {
			return illegal(s, e, "the node is not stalled")
		}
		if d.Step != s.State {
			return illegal(s, e, "resume reported for step %s but the node is at %s", d.Step, s.State)
		}
		s.clearStall()
		s.Message = orDefault(d.Message, "progressing again at "+string(d.Step))
	case events.VolumeStateChanged:
		return applyVolume(s, e, d, owned)
	case events.SchedulingRecorded:
		if s.Scheduling != nil {
			return illegal(s, e, "scheduling was already recorded")
		}
		s.Scheduling = &Scheduling{Previous: d.AllowScheduling}
	case events.SchedulingRestored:
		if !s.Scheduling.Pending() {
			return illegal(s, e, "no recorded scheduling is waiting to be restored")
		}
		if d.AllowScheduling != s.Scheduling.Previous {
			return illegal(s, e, "restored allowScheduling=%t, but %t was recorded", d.AllowScheduling, s.Scheduling.Previous)
		}
		s.Scheduling = &Scheduling{Previous: s.Scheduling.Previous, Restored: true}
	case events.NodeTainted:
		if s.Taint != nil {
			return illegal(s, e, "a taint was already recorded")
		}
		s.Taint = &Taint{Key: d.Key}
	case events.NodeUntainted:
		if !s.Taint.Pending() || d.Key != s.Taint.Key {
			return illegal(s, e, "no recorded taint %s is waiting to be taken off", d.Key)
		}
		s.Taint = &Taint{Key: d.Key, Removed: true}
	case events.PodMoved:
		if s.HasMoved(d.Pod, d.UID) {
			return illegal(s, e, "pod %s (uid %q) was already moved", d.Pod, d.UID)
		}
		// Clipped: the states sharing the old slice keep it as it was.
		s.Moved = append(slices.Clip(s.Moved), d)
	case events.SnapshotsTaken:
		if s.Snapshots != nil {
			return illegal(s, e, "snapshots were already recorded")
		}
		s.Snapshots = &Snapshots{Name: d.Snapshot, Volumes: slices.Clone(d.Volumes)}
	case events.SnapshotsRemoved:
		if s.Snapshots == nil || s.Snapshots.Removed || s.Snapshots.Name != d.Snapshot {
			return illegal(s, e, "no recorded snapshot %s is waiting to be removed", d.Snapshot)
		}
		s.Snapshots = &Snapshots{Name: s.Snapshots.Name, Volumes: s.Snapshots.Volumes, Removed: true}
	case events.HashingRequested, events.RebuildPlanned, events.RebuildStarted, events.RebuildFinished,
		events.TemporaryReplicaRequested, events.ReplicaCountRaised, events.TemporaryReplicaAdded, events.ReplicaCountRestored:
		return applyRebuild(s, e)
	case events.NodeCancelRequested:
		if s.CancelRequested {
			return illegal(s, e, "cancel was already requested")
		}
		s.CancelRequested = true
		s.CancelReason = d.Reason
		s.Message = aggregate.CancelRequestedMessage(d.Reason)
	case events.NodeUpgradeCancelled:
		if !s.CancelRequested {
			return illegal(s, e, "no cancel was requested")
		}
		if d.Step != s.State {
			return illegal(s, e, "cancel confirmed at step %s but the node is at %s", d.Step, s.State)
		}
		s.clearStall()
		s.State = events.NodeCancelled
		s.CancelledStep = d.Step
		s.Message = orDefault(d.Message, "node upgrade cancelled at "+string(d.Step))
	default:
		return illegal(s, e, "not a node-upgrade event")
	}
	return nil
}

// foreign says why e is not addressed to s, or "" when it is: an event of
// this node of this manager.
func foreign(s *State, e events.Envelope) string {
	if !e.Aggregate.IsNode() {
		return "manager event offered to a node-upgrade aggregate"
	}
	if s.Exists && (e.Aggregate.Manager != s.Manager || e.Aggregate.Node != s.Node) {
		return fmt.Sprintf("event belongs to %s (uid %s), not %s (uid %s)",
			e.Aggregate, e.Aggregate.Manager.UID, s.Aggregate(), s.Manager.UID)
	}
	return ""
}

func applyStarted(s *State, e events.Envelope, d events.NodeUpgradeStarted) error {
	if s.Exists {
		return illegal(s, e, "the node upgrade was already started")
	}
	if d.Node != e.Aggregate.Node {
		return illegal(s, e, "payload names node %s but the event is on node %s", d.Node, e.Aggregate.Node)
	}
	*s = State{
		Exists:               true,
		Manager:              e.Aggregate.Manager,
		Node:                 d.Node,
		State:                events.NodePending,
		DataEngine:           d.DataEngine,
		InstanceManagerImage: d.InstanceManagerImage,
		Attempt:              d.Attempt,
		LonghornProfile:      d.LonghornProfile,
		InitiatorPolicy:      d.InitiatorPolicy,
		ReplicaPolicy:        d.ReplicaPolicy,
		Transitions:          s.Transitions,
	}
	return nil
}

func applyStateChanged(s *State, e events.Envelope, d events.NodeStateChanged) error {
	if d.From != s.State {
		return illegal(s, e, "change from %s but the node is at %s", d.From, s.State)
	}
	next, _ := s.State.Next() // s is not terminal, so it is a working step
	if next == events.NodeCompleted {
		return illegal(s, e, "%s is left only by %s", s.State, events.TypeNodeUpgradeCompleted)
	}
	if d.To != next {
		return illegal(s, e, "the step after %s is %s, not %s", s.State, next, d.To)
	}
	// A new step is progress: whatever blocked the previous one is over.
	s.clearStall()
	s.State = d.To
	s.Message = d.Message
	return nil
}

func applyStalled(s *State, e events.Envelope, d events.NodeStalled) error {
	if d.Step != s.State {
		return illegal(s, e, "stall reported for step %s but the node is at %s", d.Step, s.State)
	}
	// A stall whose cause changes is the same stall: keep when it began.
	if !s.Stalled {
		s.StalledAt = e.Time
	}
	s.Stalled = true
	s.StallStep = d.Step
	s.StallVolume = d.Volume
	s.StallReason = d.Reason
	s.StallMessage = d.Message
	s.Message = d.Message
	return nil
}

func applyVolume(s *State, e events.Envelope, d events.VolumeStateChanged, owned bool) error {
	cur := s.Volumes[d.Volume]
	if d.From != cur.State {
		return illegal(s, e, "volume %s: change from %q but it is %q", d.Volume, d.From, cur.State)
	}
	if !VolumeTransitionAllowed(cur.State, d.To) {
		return illegal(s, e, "volume %s: %q → %q is not allowed", d.Volume, cur.State, d.To)
	}
	if d.From == d.To && (d.TargetNode == "" || d.TargetNode == cur.TargetNode || d.EngineNodeBefore != nil) {
		return illegal(s, e, "volume %s: a redirect must name a new temporary target, and only it", d.Volume)
	}
	v := Volume{State: d.To, TargetNode: cur.TargetNode, Message: d.Message, EngineNodeBefore: cur.EngineNodeBefore}
	if d.TargetNode != "" {
		v.TargetNode = d.TargetNode
	}
	if d.EngineNodeBefore != nil {
		before := *d.EngineNodeBefore
		v.EngineNodeBefore = &before
	}
	// Copy on write: older states may still share the map.
	vols := s.Volumes
	if !owned || vols == nil {
		vols = maps.Clone(s.Volumes)
	}
	if vols == nil {
		vols = make(map[string]Volume, 1)
	}
	vols[d.Volume] = v
	s.Volumes = vols
	return nil
}

func (s *State) clearStall() {
	s.Stalled = false
	s.StallStep, s.StallVolume, s.StallReason, s.StallMessage = "", "", "", ""
	s.StalledAt = time.Time{}
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
