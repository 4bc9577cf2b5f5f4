package nodeupgrade

import (
	"slices"
	"time"

	"github.com/switchback-dev/switchback/aggregate"
	"github.com/switchback-dev/switchback/events"
)

// State is the node-upgrade aggregate folded from its history. The zero value
// is the state of a node upgrade with no history. States are values: Evolve
// never modifies the map of the state it is given.
type State struct {
	// Exists is false until NodeUpgradeStarted was applied.
	Exists bool `json:"exists"`
	// Manager and Node identify the aggregate (from the envelopes).
	Manager events.ManagerRef `json:"manager"`
	Node    string            `json:"node,omitempty"`
	// State is the current step or terminal state.
	State events.NodeState `json:"state,omitempty"`
	// DataEngine, InstanceManagerImage, Attempt and LonghornProfile come from
	// NodeUpgradeStarted.
	DataEngine           string `json:"dataEngine,omitempty"`
	InstanceManagerImage string `json:"instanceManagerImage,omitempty"`
	Attempt              int    `json:"attempt,omitempty"`
	LonghornProfile      string `json:"longhornProfile,omitempty"`
	// InitiatorPolicy comes from NodeUpgradeStarted ("" is
	// events.InitiatorPolicyWait).
	InitiatorPolicy string `json:"initiatorPolicy,omitempty"`
	// ReplicaPolicy comes from NodeUpgradeStarted ("" is
	// events.ReplicaPolicyRebuild).
	ReplicaPolicy string `json:"replicaPolicy,omitempty"`
	// Taint is the NoSchedule taint the upgrade put on the node to move its
	// workloads, nil until recorded.
	Taint *Taint `json:"taint,omitempty"`
	// Moved are the pods the upgrade moved off the node, in order.
	Moved []events.PodMoved `json:"moved,omitempty"`
	// Scheduling is the node's spec.allowScheduling the upgrade recorded
	// before turning it off, nil until then.
	Scheduling *Scheduling `json:"scheduling,omitempty"`
	// Snapshots are the upgrade's snapshots of the node's volumes, nil until
	// taken.
	Snapshots *Snapshots `json:"snapshots,omitempty"`
	// Volumes holds every v2 volume concerned by the node.
	Volumes map[string]Volume `json:"volumes,omitempty"`
	// Rebuilds are the rebuilds of the volumes whose replica on the node
	// the upgrade failed, by volume (see Rebuild).
	Rebuilds map[string]Rebuild `json:"rebuilds,omitempty"`
	// Stalled is set while the current step makes no progress; the other
	// Stall fields say what blocks and StalledAt since when.
	Stalled      bool             `json:"stalled,omitempty"`
	StallStep    events.NodeState `json:"stallStep,omitempty"`
	StallVolume  string           `json:"stallVolume,omitempty"`
	StallReason  string           `json:"stallReason,omitempty"`
	StallMessage string           `json:"stallMessage,omitempty"`
	StalledAt    time.Time        `json:"stalledAt,omitzero"`
	// CancelRequested is set once the manager asked the node to stop.
	CancelRequested bool   `json:"cancelRequested,omitempty"`
	CancelReason    string `json:"cancelReason,omitempty"`
	// CancelledStep is the step the node stopped at when cancelled.
	CancelledStep events.NodeState `json:"cancelledStep,omitempty"`
	// Message is the last progress, stall or error message (status.message).
	Message string `json:"message,omitempty"`
	// FailedStep and FailReason come from NodeUpgradeFailed.
	FailedStep events.NodeState `json:"failedStep,omitempty"`
	FailReason string           `json:"failReason,omitempty"`
	// UpdatedAt is the time of the last applied event.
	UpdatedAt time.Time `json:"updatedAt,omitzero"`
	// Transitions counts applied events (refused ones are not counted).
	Transitions int `json:"transitions,omitempty"`
}

// Scheduling is the node's replica scheduling as the upgrade recorded it.
type Scheduling struct {
	// Previous is spec.allowScheduling before the upgrade changed it.
	Previous bool `json:"previous"`
	// Restored is set once Previous was written back.
	Restored bool `json:"restored,omitempty"`
}

// Pending reports whether scheduling was recorded and not yet restored.
func (s *Scheduling) Pending() bool { return s != nil && !s.Restored }

// Taint is the taint the upgrade recorded before putting it on the node.
type Taint struct {
	Key string `json:"key"`
	// Removed is set once it was taken off.
	Removed bool `json:"removed,omitempty"`
}

// Pending reports whether a taint was recorded and not yet taken off.
func (t *Taint) Pending() bool { return t != nil && !t.Removed }

// MovesWorkloads reports whether the node moves the pods holding its
// initiators rather than waiting for them to go.
func (s State) MovesWorkloads() bool { return s.InitiatorPolicy == events.InitiatorPolicyMoveWorkloads }

// AddsFirst reports whether the node adds a temporary replica to a volume
// before failing a replica that would leave it short of its replicas.
func (s State) AddsFirst() bool { return s.ReplicaPolicy == events.ReplicaPolicyAddFirst }

// HasMoved reports whether the upgrade recorded moving the pod of that uid
// (by name when uid is empty).
func (s State) HasMoved(pod, uid string) bool {
	return slices.ContainsFunc(s.Moved, func(m events.PodMoved) bool { return m.Pod == pod && m.UID == uid })
}

// Snapshots are the snapshots the upgrade took on the node.
type Snapshots struct {
	Name    string   `json:"name"`
	Volumes []string `json:"volumes"`
	// Removed is set once they were removed.
	Removed bool `json:"removed,omitempty"`
}

// Volume is the state of one volume inside the node upgrade.
type Volume struct {
	State events.VolumeState `json:"state"`
	// TargetNode is where the volume's target lives after the last change
	// that named it.
	TargetNode string `json:"targetNode,omitempty"`
	Message    string `json:"message,omitempty"`
	// EngineNodeBefore is the volume's spec.engineNodeID before its
	// switch-over ("" = follow the attached node), nil while none started.
	EngineNodeBefore *string `json:"engineNodeBefore,omitempty"`
}

// TargetAway reports whether the volume's target may be off its own node: a
// switch-over started and the switch-back has not finished. No step that
// needs the targets home may be left, and no cancel confirmed, while one is.
func (v Volume) TargetAway() bool {
	switch v.State {
	case events.VolumeSwitchingOver, events.VolumeSwitchedOver, events.VolumeSwitchingBack:
		return true
	}
	return false
}

// volumeTransitions lists, for each volume state ("" = not yet recorded), the
// states it may move to. Detached volumes go pending → completed directly.
var volumeTransitions = map[events.VolumeState][]events.VolumeState{
	"":                   {events.VolumePending},
	events.VolumePending: {events.VolumeSwitchingOver, events.VolumeCompleted, events.VolumeError},
	// switching-over → switching-back: a cancel (or a restart choosing to
	// retreat) while the move is under way brings the target home directly.
	// switching-over → switching-over: a redirect to another temporary
	// target (SetVolumeState.RedirectFrom), its TargetNode changed.
	events.VolumeSwitchingOver: {events.VolumeSwitchingOver, events.VolumeSwitchedOver, events.VolumeSwitchingBack, events.VolumeError},
	events.VolumeSwitchedOver:  {events.VolumeSwitchingBack, events.VolumeError},
	events.VolumeSwitchingBack: {events.VolumeSwitchedBack, events.VolumeError},
	events.VolumeSwitchedBack:  {events.VolumeCompleted, events.VolumeError},
}

// VolumeTransitionAllowed reports whether a volume may move from from ("" for
// a volume not yet recorded) to to.
func VolumeTransitionAllowed(from, to events.VolumeState) bool {
	return slices.Contains(volumeTransitions[from], to)
}

// Aggregate returns the id of the node-upgrade aggregate.
func (s State) Aggregate() events.AggregateID { return events.NodeAggregate(s.Manager, s.Node) }

// Terminal reports whether the node upgrade accepts no further event.
func (s State) Terminal() bool { return s.Exists && s.State.Terminal() }

// VolumesWhere returns the names of the volumes for which keep holds, sorted.
func (s State) VolumesWhere(keep func(Volume) bool) []string {
	var out []string
	for name, v := range s.Volumes {
		if keep(v) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// stepIndex is the position of st in events.NodeSteps, or -1 if st is not a
// working step.
func stepIndex(st events.NodeState) int { return slices.Index(events.NodeSteps, st) }

// subject is s as the checks every event and command passes see it, and as
// refusals report it. It reads s through a pointer: evolve asks it of every
// event, and a State is large to copy.
func (s *State) subject() aggregate.Subject {
	sub := aggregate.Subject{Machine: Machine, Exists: s.Exists, Terminal: s.Terminal(), State: string(s.State), Opener: events.TypeNodeUpgradeStarted}
	if sub.Terminal {
		// The controller restores the volumes whose temporary replica the
		// node's history raised once the whole upgrade ended.
		sub.AfterEnd = []events.Type{events.TypeReplicaCountRestored}
	}
	if s.State == events.NodeCompleted {
		// The controller removes a completed node's snapshots once the
		// whole upgrade completed.
		sub.AfterEnd = append(sub.AfterEnd, events.TypeSnapshotsRemoved)
	}
	return sub
}

func (s State) stateName() string { return s.subject().Name() }

func illegal(s *State, e events.Envelope, format string, args ...any) error {
	return s.subject().Illegal(e, format, args...)
}
