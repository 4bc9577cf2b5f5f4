package nodeupgrade

import (
	"time"

	"github.com/switchback-dev/switchback/events"
)

// Command is an input to Decide. Every command carries an id, from which the
// caller derives the ids of the events it produces (events.New), so a retried
// command deduplicates in the stream, and the time to stamp them with.
type Command interface {
	// CommandID returns the command's id.
	CommandID() string
	// CommandTime returns when the command was issued.
	CommandTime() time.Time
	commandName() string
}

// Start opens the node upgrade: the worker accepted the scheduled node.
type Start struct {
	ID                   string
	At                   time.Time
	Node                 string
	DataEngine           string
	InstanceManagerImage string
	Attempt              int
	// LonghornProfile is the Longhorn profile the worker detected.
	LonghornProfile string
}

// CompleteStep reports that step From is done; the node moves to the next
// step, or completes when From is finalizing.
type CompleteStep struct {
	ID      string
	At      time.Time
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
	ID               string
	At               time.Time
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
	ID      string
	At      time.Time
	Changes []SetVolumeState
}

// ReportStall reports that Step makes no progress; Message says what blocks.
// An empty Step means the current one.
type ReportStall struct {
	ID      string
	At      time.Time
	Step    events.NodeState
	Volume  string
	Reason  string
	Message string
}

// ReportProgress reports that Step progresses again; it ends a stall. An empty
// Step means the current one.
type ReportProgress struct {
	ID      string
	At      time.Time
	Step    events.NodeState
	Message string
}

// Fail ends the node upgrade in error at Step (empty = the current step).
type Fail struct {
	ID      string
	At      time.Time
	Step    events.NodeState
	Reason  string
	Message string
}

// RequestCancel asks the node to stop at a safe point.
type RequestCancel struct {
	ID     string
	At     time.Time
	Reason string
}

// ConfirmCancelled records that the node reached its safe point: every
// volume's target is back on its own node.
type ConfirmCancelled struct {
	ID      string
	At      time.Time
	Message string
}

// RecordScheduling keeps the node's spec.allowScheduling before the upgrade
// turns it off. Only the first record counts: a repeat changes nothing.
type RecordScheduling struct {
	ID              string
	At              time.Time
	AllowScheduling bool
}

// ConfirmSchedulingRestored records that the value RecordScheduling kept
// was written back.
type ConfirmSchedulingRestored struct {
	ID string
	At time.Time
}

// RecordSnapshots records the snapshot taken of each of Volumes.
type RecordSnapshots struct {
	ID       string
	At       time.Time
	Snapshot string
	Volumes  []string
}

// ConfirmSnapshotsRemoved records that the snapshots RecordSnapshots kept
// were removed.
type ConfirmSnapshotsRemoved struct {
	ID string
	At time.Time
}

// CommandID implements Command.
func (c Start) CommandID() string { return c.ID }

// CommandID implements Command.
func (c CompleteStep) CommandID() string { return c.ID }

// CommandID implements Command.
func (c SetVolumeState) CommandID() string { return c.ID }

// CommandID implements Command.
func (c SetVolumeStates) CommandID() string { return c.ID }

// CommandID implements Command.
func (c ReportStall) CommandID() string { return c.ID }

// CommandID implements Command.
func (c ReportProgress) CommandID() string { return c.ID }

// CommandID implements Command.
func (c Fail) CommandID() string { return c.ID }

// CommandID implements Command.
func (c RequestCancel) CommandID() string { return c.ID }

// CommandID implements Command.
func (c ConfirmCancelled) CommandID() string { return c.ID }

// CommandID implements Command.
func (c RecordScheduling) CommandID() string { return c.ID }

// CommandID implements Command.
func (c ConfirmSchedulingRestored) CommandID() string { return c.ID }

// CommandID implements Command.
func (c RecordSnapshots) CommandID() string { return c.ID }

// CommandID implements Command.
func (c ConfirmSnapshotsRemoved) CommandID() string { return c.ID }

// CommandTime implements Command.
func (c RecordScheduling) CommandTime() time.Time { return c.At }

// CommandTime implements Command.
func (c ConfirmSchedulingRestored) CommandTime() time.Time { return c.At }

// CommandTime implements Command.
func (c RecordSnapshots) CommandTime() time.Time { return c.At }

// CommandTime implements Command.
func (c ConfirmSnapshotsRemoved) CommandTime() time.Time { return c.At }

// CommandTime implements Command.
func (c Start) CommandTime() time.Time { return c.At }

// CommandTime implements Command.
func (c CompleteStep) CommandTime() time.Time { return c.At }

// CommandTime implements Command.
func (c SetVolumeState) CommandTime() time.Time { return c.At }

// CommandTime implements Command.
func (c SetVolumeStates) CommandTime() time.Time { return c.At }

// CommandTime implements Command.
func (c ReportStall) CommandTime() time.Time { return c.At }

// CommandTime implements Command.
func (c ReportProgress) CommandTime() time.Time { return c.At }

// CommandTime implements Command.
func (c Fail) CommandTime() time.Time { return c.At }

// CommandTime implements Command.
func (c RequestCancel) CommandTime() time.Time { return c.At }

// CommandTime implements Command.
func (c ConfirmCancelled) CommandTime() time.Time { return c.At }

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
func (ConfirmSnapshotsRemoved) commandName() string { return "ConfirmSnapshotsRemoved" }
