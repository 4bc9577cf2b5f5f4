package nodeupgrade

import (
	"time"

	"github.com/switchback-dev/switchback/aggregate"
	"github.com/switchback-dev/switchback/events"
)

// Command is an input to Decide. Every command embeds aggregate.Meta: the id
// its events' ids derive from and the time to stamp them with.
type Command interface {
	CommandID() string
	CommandTime() time.Time
	commandName() string
}

// Start opens the node upgrade: the worker accepted the scheduled node.
type Start struct {
	aggregate.Meta
	Node                 string
	DataEngine           string
	InstanceManagerImage string
	Attempt              int
	// LonghornProfile is the Longhorn profile the worker detected.
	LonghornProfile string
	// InitiatorPolicy is the manager's spec.initiatorPolicy.
	InitiatorPolicy string
	// ReplicaPolicy is the manager's spec.replicaPolicy.
	ReplicaPolicy string
}

// CompleteStep reports that step From is done; the node moves to the next
// step, or completes when From is finalizing.
type CompleteStep struct {
	aggregate.Meta
	From    events.NodeState
	Message string
}

// SetVolumeState moves one volume to To. An empty TargetNode keeps the
// recorded one. EngineNodeBefore, given when a switch-over starts, records
// the volume's spec.engineNodeID before it.
//
// RedirectFrom, when set, redirects a switch-over under way from that
// temporary target to TargetNode (To is then switching-over): the volume
// stays switching-over and keeps its EngineNodeBefore. Asked again once
// done, it is a no-op; asked while the volume is going elsewhere, a
// conflict.
type SetVolumeState struct {
	aggregate.Meta
	Volume           string
	To               events.VolumeState
	TargetNode       string
	Message          string
	EngineNodeBefore *string
	RedirectFrom     string
}

// SetVolumeStates applies several volume changes as one decision, so a step
// that moves twenty volumes appends one atomic batch instead of twenty.
// Changes are decided in order, each on the state the previous ones produce.
type SetVolumeStates struct {
	aggregate.Meta
	Changes []SetVolumeState
}

// ReportStall reports that Step makes no progress; Message says what blocks.
// An empty Step means the current one.
type ReportStall struct {
	aggregate.Meta
	Step    events.NodeState
	Volume  string
	Reason  string
	Message string
}

// ReportProgress reports that Step progresses again; it ends a stall. An empty
// Step means the current one.
type ReportProgress struct {
	aggregate.Meta
	Step    events.NodeState
	Message string
}

// Fail ends the node upgrade in error at Step (empty = the current step).
type Fail struct {
	aggregate.Meta
	Step    events.NodeState
	Reason  string
	Message string
}

// RequestCancel asks the node to stop at a safe point.
type RequestCancel struct {
	aggregate.Meta
	Reason string
}

// ConfirmCancelled records that the node reached its safe point: every
// volume's target is back on its own node.
type ConfirmCancelled struct {
	aggregate.Meta
	Message string
}

// RecordScheduling keeps the node's spec.allowScheduling before the upgrade
// turns it off. Only the first record counts: a repeat changes nothing.
type RecordScheduling struct {
	aggregate.Meta
	AllowScheduling bool
}

// ConfirmSchedulingRestored records that the value RecordScheduling kept
// was written back.
type ConfirmSchedulingRestored struct {
	aggregate.Meta
}

// RecordTaint records the taint the node is about to get, before it is
// put. Only the first record counts: a repeat changes nothing.
type RecordTaint struct {
	aggregate.Meta
	Key string
}

// ConfirmUntainted records that the recorded taint was taken off.
type ConfirmUntainted struct {
	aggregate.Meta
}

// RecordPodMoved records, before it is asked, that a pod is moved off the
// node. The same pod (name and uid) is recorded once.
type RecordPodMoved struct {
	aggregate.Meta
	Pod     string
	UID     string
	Volumes []string
	Restart bool
}

// RecordSnapshots records the snapshot taken of each of Volumes.
type RecordSnapshots struct {
	aggregate.Meta
	Snapshot string
	Volumes  []string
}

// ConfirmSnapshotsRemoved records that the snapshots RecordSnapshots kept
// were removed.
type ConfirmSnapshotsRemoved struct {
	aggregate.Meta
}

func (Start) commandName() string            { return "Start" }
func (CompleteStep) commandName() string     { return "CompleteStep" }
func (SetVolumeState) commandName() string   { return "SetVolumeState" }
func (SetVolumeStates) commandName() string  { return "SetVolumeStates" }
func (ReportStall) commandName() string      { return "ReportStall" }
func (ReportProgress) commandName() string   { return "ReportProgress" }
func (Fail) commandName() string             { return "Fail" }
func (RequestCancel) commandName() string    { return "RequestCancel" }
func (ConfirmCancelled) commandName() string { return "ConfirmCancelled" }
func (RecordScheduling) commandName() string { return "RecordScheduling" }
func (ConfirmSchedulingRestored) commandName() string {
	return "ConfirmSchedulingRestored"
}
func (RecordSnapshots) commandName() string         { return "RecordSnapshots" }
func (RecordTaint) commandName() string             { return "RecordTaint" }
func (ConfirmUntainted) commandName() string        { return "ConfirmUntainted" }
func (RecordPodMoved) commandName() string          { return "RecordPodMoved" }
func (ConfirmSnapshotsRemoved) commandName() string { return "ConfirmSnapshotsRemoved" }
