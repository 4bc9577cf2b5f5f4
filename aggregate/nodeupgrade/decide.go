package nodeupgrade

import (
	"fmt"
	"slices"

	"github.com/switchback-dev/switchback/aggregate"
	"github.com/switchback-dev/switchback/events"
)

// Decide returns the events that cmd produces on s, in the order they must be
// appended; it never modifies s. Commands are idempotent: re-deciding a
// command on the state its own events produced yields no events. A command
// that makes no sense in s returns a *CommandError (ErrIllegalCommand).
//
// Reports about a step the node already left are stale and produce nothing;
// reports about a step it has not reached are refused. A terminal node upgrade
// decides nothing: there is nothing left to do, but the removal of a
// completed node's snapshots and the restore of its volumes' replica
// counts, which the controller makes once the whole upgrade ended.
func Decide(s State, cmd Command) ([]events.Event, error) {
	_, opens := cmd.(Start)
	o := offer(s, cmd)
	if err := o.Screen(opens || s.Exists, "the node upgrade was not started"); err != nil {
		return nil, err
	}
	if !opens && s.Terminal() && !afterEnd(s, cmd) {
		return nil, nil
	}
	return o.Accept(decide(s, cmd))
}

// afterEnd reports whether cmd is one of the cleanups a terminal s still
// records: a completed node's snapshots removed, and the restore of the
// volumes whose temporary replica its history raised.
func afterEnd(s State, cmd Command) bool {
	switch c := cmd.(type) {
	case ConfirmSnapshotsRemoved:
		return s.State == events.NodeCompleted
	case RecordRebuilds:
		return len(c.Events) > 0 && !slices.ContainsFunc(c.Events, func(e events.Event) bool {
			_, ok := e.(events.ReplicaCountRestored)
			return !ok
		})
	}
	return false
}

// decide dispatches cmd to the rule of its kind.
func decide(s State, cmd Command) ([]events.Event, error) {
	switch c := cmd.(type) {
	case Start:
		return decideStart(s, c)
	case CompleteStep:
		return decideCompleteStep(s, c)
	case SetVolumeState:
		return decideVolume(s, c)
	case SetVolumeStates:
		return decideVolumes(s, c)
	case ReportStall:
		return decideStall(s, c)
	case ReportProgress:
		return decideProgress(s, c)
	case Fail:
		return decideFail(s, c)
	case RequestCancel:
		if !s.CancelRequested {
			return []events.Event{events.NodeCancelRequested{Reason: c.Reason}}, nil
		}
		return nil, nil
	case ConfirmCancelled:
		return decideConfirmCancelled(s, c)
	case RecordScheduling:
		if s.Scheduling == nil {
			return []events.Event{events.SchedulingRecorded{AllowScheduling: c.AllowScheduling}}, nil
		}
		return nil, nil
	case ConfirmSchedulingRestored:
		if s.Scheduling.Pending() {
			return []events.Event{events.SchedulingRestored{AllowScheduling: s.Scheduling.Previous}}, nil
		}
		return nil, nil
	case RecordSnapshots:
		return decideRecordSnapshots(s, c)
	case RecordTaint:
		if s.Taint == nil {
			return []events.Event{events.NodeTainted{Key: c.Key}}, nil
		}
		return nil, nil
	case ConfirmUntainted:
		if s.Taint.Pending() {
			return []events.Event{events.NodeUntainted{Key: s.Taint.Key}}, nil
		}
		return nil, nil
	case RecordPodMoved:
		if s.HasMoved(c.Pod, c.UID) {
			return nil, nil
		}
		return []events.Event{events.PodMoved{Pod: c.Pod, UID: c.UID, Volumes: slices.Clone(c.Volumes), Restart: c.Restart}}, nil
	case ConfirmSnapshotsRemoved:
		if s.Snapshots != nil && !s.Snapshots.Removed {
			return []events.Event{events.SnapshotsRemoved{Snapshot: s.Snapshots.Name, Volumes: slices.Clone(s.Snapshots.Volumes)}}, nil
		}
		return nil, nil
	case RecordRebuilds:
		return decideRebuilds(s, c)
	default:
		return nil, refuse(s, cmd, nil, "unknown command %T", cmd)
	}
}

func decideStart(s State, c Start) ([]events.Event, error) {
	started := events.NodeUpgradeStarted{
		Node:                 c.Node,
		DataEngine:           c.DataEngine,
		InstanceManagerImage: c.InstanceManagerImage,
		Attempt:              c.Attempt,
		LonghornProfile:      c.LonghornProfile,
		InitiatorPolicy:      c.InitiatorPolicy,
		ReplicaPolicy:        c.ReplicaPolicy,
	}
	if !s.Exists {
		return []events.Event{started}, nil
	}
	if c.Node != s.Node || c.DataEngine != s.DataEngine || c.InstanceManagerImage != s.InstanceManagerImage || c.Attempt != s.Attempt {
		return nil, refuse(s, c, ErrConflict, "already started as node %s, engine %s, image %s, attempt %d",
			s.Node, s.DataEngine, s.InstanceManagerImage, s.Attempt)
	}
	return nil, nil
}

// position compares a reported step with the current one: stale (already
// left), current, or an error for a step not reached or not a working step.
func position(s State, cmd Command, step events.NodeState) (stale bool, err error) {
	at, cur := stepIndex(step), stepIndex(s.State)
	switch {
	case at < 0:
		return false, refuse(s, cmd, nil, "%q is not a working step", step)
	case at < cur:
		return true, nil
	case at > cur:
		return false, refuse(s, cmd, nil, "step %s is not reached yet", step)
	}
	return false, nil
}

func decideCompleteStep(s State, c CompleteStep) ([]events.Event, error) {
	stale, err := position(s, c, c.From)
	if stale || err != nil {
		return nil, err
	}
	if err := stepGate(s, c); err != nil {
		return nil, err
	}
	var evs []events.Event
	if s.Stalled {
		// Record the end of the stall on its own, so the Stalled condition
		// and its Warning Event get a matching "resumed".
		evs = append(evs, events.NodeResumed{Step: c.From, Message: "step completed"})
	}
	if c.From == events.NodeFinalizing {
		return append(evs, events.NodeUpgradeCompleted{Message: c.Message}), nil
	}
	next, _ := c.From.Next()
	return append(evs, events.NodeStateChanged{From: c.From, To: next, Message: c.Message}), nil
}

// stepGate refuses to leave a step while its volumes are not where the next
// step needs them. These are the places where leaving early would cut I/O:
// replacing the IM with a target still moving, or finishing with a target
// still on another node.
func stepGate(s State, c CompleteStep) error {
	var (
		stuck []string
		want  string
	)
	switch c.From {
	case events.NodeSwitchingOver, events.NodeUpgradingInstanceManager:
		// A volume recorded late is switched over in upgrading-instance-manager too.
		stuck = s.VolumesWhere(func(v Volume) bool { return v.State == events.VolumeSwitchingOver })
		want = "switched over"
	case events.NodeSwitchingBack:
		stuck = s.VolumesWhere(Volume.TargetAway)
		want = "switched back"
	case events.NodeFinalizing:
		stuck = s.VolumesWhere(func(v Volume) bool { return v.State != events.VolumeCompleted })
		want = "completed"
	}
	if len(stuck) > 0 {
		return refuse(s, c, ErrVolumesNotReady, "leaving %s needs every volume %s; not yet: %v", c.From, want, stuck)
	}
	return nil
}

func decideVolume(s State, c SetVolumeState) ([]events.Event, error) {
	if c.Volume == "" {
		return nil, refuse(s, c, nil, "volume is required")
	}
	cur := s.Volumes[c.Volume]
	if c.RedirectFrom != "" {
		return decideRedirect(s, c, cur)
	}
	if cur.State == c.To {
		if c.TargetNode == "" || c.TargetNode == cur.TargetNode {
			return nil, nil
		}
		return nil, refuse(s, c, ErrConflict, "volume %s is already %s with target on %q, not %q", c.Volume, c.To, cur.TargetNode, c.TargetNode)
	}
	if !VolumeTransitionAllowed(cur.State, c.To) {
		return nil, refuse(s, c, nil, "volume %s: %q → %q is not allowed", c.Volume, cur.State, c.To)
	}
	return []events.Event{events.VolumeStateChanged{
		Volume:           c.Volume,
		From:             cur.State,
		To:               c.To,
		TargetNode:       c.TargetNode,
		Message:          c.Message,
		EngineNodeBefore: c.EngineNodeBefore,
	}}, nil
}

// decideRedirect sends a volume switching over to another temporary
// target.
func decideRedirect(s State, c SetVolumeState, cur Volume) ([]events.Event, error) {
	switch {
	case c.To != events.VolumeSwitchingOver || c.TargetNode == "" || c.TargetNode == c.RedirectFrom:
		return nil, refuse(s, c, nil, "volume %s: a redirect is a switch-over sent from one temporary target to another, not %q from %q to %q",
			c.Volume, c.To, c.RedirectFrom, c.TargetNode)
	case cur.State == events.VolumeSwitchingOver && cur.TargetNode == c.TargetNode:
		return nil, nil
	case cur.State != events.VolumeSwitchingOver || cur.TargetNode != c.RedirectFrom:
		return nil, refuse(s, c, ErrConflict, "volume %s is %s with target on %q, not switching over to %q", c.Volume, cur.State, cur.TargetNode, c.RedirectFrom)
	}
	return []events.Event{events.VolumeStateChanged{Volume: c.Volume, From: cur.State, To: cur.State, TargetNode: c.TargetNode, Message: c.Message}}, nil
}

// decideRecordSnapshots records the node's snapshots once; another name or
// set of volumes than the recorded one is a conflict.
func decideRecordSnapshots(s State, c RecordSnapshots) ([]events.Event, error) {
	if s.Snapshots == nil {
		return []events.Event{events.SnapshotsTaken{Snapshot: c.Snapshot, Volumes: slices.Clone(c.Volumes)}}, nil
	}
	if s.Snapshots.Name != c.Snapshot || !slices.Equal(s.Snapshots.Volumes, c.Volumes) {
		return nil, refuse(s, c, ErrConflict, "snapshots already recorded as %s of %v", s.Snapshots.Name, s.Snapshots.Volumes)
	}
	return nil, nil
}

func decideVolumes(s State, c SetVolumeStates) ([]events.Event, error) {
	// later[i] lists the states the batch moves change i's volume to from
	// change i on: a volume already at one of them went through this batch
	// before (a decision stored in part), and its earlier changes are done.
	later := make([][]events.VolumeState, len(c.Changes))
	for i := len(c.Changes) - 1; i >= 0; i-- {
		later[i] = []events.VolumeState{c.Changes[i].To}
		for j := i + 1; j < len(c.Changes); j++ {
			if c.Changes[j].Volume == c.Changes[i].Volume {
				later[i] = append(later[i], c.Changes[j].To)
			}
		}
	}
	var out []events.Event
	// The batch is decided against the state its earlier changes make; the
	// Folder copies the volume map once for the batch, not once a change.
	cur := NewFolder(s)
	for i, change := range c.Changes {
		change.ID = c.ID
		if v, ok := cur.s.Volumes[change.Volume]; ok && v.State != change.To && slices.Contains(later[i][1:], v.State) {
			continue
		}
		evs, err := decideVolume(cur.s, change)
		if err != nil {
			return nil, err
		}
		for _, ev := range evs {
			if err := cur.Apply(events.Envelope{Aggregate: cur.s.Aggregate(), Time: c.At, Data: ev}); err != nil {
				return nil, refuse(s, c, err, "volume %s: change does not apply", change.Volume)
			}
		}
		out = append(out, evs...)
	}
	return out, nil
}

func decideStall(s State, c ReportStall) ([]events.Event, error) {
	step := orStep(c.Step, s.State)
	stale, err := position(s, c, step)
	if stale || err != nil {
		return nil, err
	}
	if s.Stalled && s.StallReason == c.Reason && s.StallMessage == c.Message && s.StallVolume == c.Volume {
		return nil, nil
	}
	return []events.Event{events.NodeStalled{Step: step, Volume: c.Volume, Reason: c.Reason, Message: c.Message}}, nil
}

func decideProgress(s State, c ReportProgress) ([]events.Event, error) {
	step := orStep(c.Step, s.State)
	stale, err := position(s, c, step)
	if stale || err != nil || !s.Stalled {
		return nil, err
	}
	return []events.Event{events.NodeResumed{Step: step, Message: c.Message}}, nil
}

func decideFail(s State, c Fail) ([]events.Event, error) {
	step := orStep(c.Step, s.State)
	// A failure is never dropped as stale: the caller must look again.
	if step != s.State {
		return nil, refuse(s, c, nil, "failure reported for step %s but the node is at %s", step, s.State)
	}
	return []events.Event{events.NodeUpgradeFailed{Step: step, Reason: c.Reason, Message: c.Message}}, nil
}

func decideConfirmCancelled(s State, c ConfirmCancelled) ([]events.Event, error) {
	if !s.CancelRequested {
		return nil, refuse(s, c, nil, "no cancel was requested")
	}
	if away := s.VolumesWhere(Volume.TargetAway); len(away) > 0 {
		return nil, refuse(s, c, ErrVolumesNotReady, "not a safe point: targets of %v are not back on node %s", away, s.Node)
	}
	msg := c.Message
	if msg == "" {
		msg = fmt.Sprintf("node upgrade cancelled at %s; every target is on its own node", s.State)
	}
	return []events.Event{events.NodeUpgradeCancelled{Step: s.State, Message: msg}}, nil
}

func orStep(step, cur events.NodeState) events.NodeState {
	if step == "" {
		return cur
	}
	return step
}

// offer is cmd offered to s, for the checks every command passes and for
// refusals; a node upgrade that does not exist yet is unnamed.
func offer(s State, cmd Command) aggregate.Offer {
	name := ""
	if s.Exists {
		name = s.Aggregate().String()
	}
	if cmd == nil {
		return s.subject().Offer(name, "", "")
	}
	return s.subject().Offer(name, cmd.commandName(), cmd.CommandID())
}
