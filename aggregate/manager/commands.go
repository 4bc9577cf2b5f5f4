package manager

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

// RequestUpgrade records a new DataEngineUpgradeManager (from the intake).
type RequestUpgrade struct {
	ID         string
	At         time.Time
	Ref        events.ManagerRef
	Generation int64
	// DataEngine is recorded as written: a value other than v2 is refused by
	// the prechecks rather than here, so the refusal shows in status.
	DataEngine string
	// Nodes is spec.nodes as written; empty means every v2 node.
	Nodes []string
	// AllowNodesWithoutReplicaScheduling is the spec field of that name.
	AllowNodesWithoutReplicaScheduling bool
}

// RecordPrechecks records the precheck results and, if all passed, the plan.
type RecordPrechecks struct {
	ID      string
	At      time.Time
	Results []PrecheckResult
	// InstanceManagerImage is the target image, read from the default IM
	// image setting when the prechecks ran.
	InstanceManagerImage string
	// Order is the deterministic node order; required when all passed.
	Order []string
	// LonghornProfile and LonghornVersion say which Longhorn the prechecks
	// read (dataplane.Platform).
	LonghornProfile, LonghornVersion string
}

// RecordNodeOutcome records the terminal outcome of the node in flight and
// moves the upgrade on.
type RecordNodeOutcome struct {
	ID   string
	At   time.Time
	Node string
	// State is events.NodeCompleted or events.NodeError.
	State   events.NodeState
	Message string
}

// ScheduleNext schedules the first unfinished plan node when none is in flight.
type ScheduleNext struct {
	ID string
	At time.Time
}

// Hold stops new nodes from starting, for Reason; the node in flight
// finishes. Holding again with another message updates it.
type Hold struct {
	ID      string
	At      time.Time
	Reason  string
	Message string
}

// Release ends a hold and starts the next node when none is in flight.
type Release struct {
	ID      string
	At      time.Time
	Message string
}

// RequestCancel records the deletion of the manager.
type RequestCancel struct {
	ID     string
	At     time.Time
	Reason string
}

// ConfirmCancelled records that the cancel flow reached its safe point. Node
// must be the node in flight, if any.
type ConfirmCancelled struct {
	ID      string
	At      time.Time
	Node    string
	Message string
}

// Fail ends the upgrade in error (terminal).
type Fail struct {
	ID      string
	At      time.Time
	Reason  string
	Message string
	// Node is the node that caused the failure, if any.
	Node string
}

// CommandID implements Command.
func (c RequestUpgrade) CommandID() string { return c.ID }

// CommandID implements Command.
func (c RecordPrechecks) CommandID() string { return c.ID }

// CommandID implements Command.
func (c RecordNodeOutcome) CommandID() string { return c.ID }

// CommandID implements Command.
func (c ScheduleNext) CommandID() string { return c.ID }

// CommandID implements Command.
func (c RequestCancel) CommandID() string { return c.ID }

// CommandID implements Command.
func (c ConfirmCancelled) CommandID() string { return c.ID }

// CommandID implements Command.
func (c Fail) CommandID() string { return c.ID }

// CommandTime implements Command.
func (c RequestUpgrade) CommandTime() time.Time { return c.At }

// CommandTime implements Command.
func (c RecordPrechecks) CommandTime() time.Time { return c.At }

// CommandTime implements Command.
func (c RecordNodeOutcome) CommandTime() time.Time { return c.At }

// CommandTime implements Command.
func (c ScheduleNext) CommandTime() time.Time { return c.At }

// CommandTime implements Command.
func (c RequestCancel) CommandTime() time.Time { return c.At }

// CommandTime implements Command.
func (c ConfirmCancelled) CommandTime() time.Time { return c.At }

// CommandTime implements Command.
func (c Fail) CommandTime() time.Time { return c.At }

func (RequestUpgrade) commandName() string    { return "RequestUpgrade" }
func (RecordPrechecks) commandName() string   { return "RecordPrechecks" }
func (RecordNodeOutcome) commandName() string { return "RecordNodeOutcome" }
func (ScheduleNext) commandName() string      { return "ScheduleNext" }
func (RequestCancel) commandName() string     { return "RequestCancel" }
func (ConfirmCancelled) commandName() string  { return "ConfirmCancelled" }
func (Fail) commandName() string              { return "Fail" }
func (Hold) commandName() string              { return "Hold" }
func (Release) commandName() string           { return "Release" }

// CommandID implements Command.
func (c Hold) CommandID() string { return c.ID }

// CommandID implements Command.
func (c Release) CommandID() string { return c.ID }

// CommandTime implements Command.
func (c Hold) CommandTime() time.Time { return c.At }

// CommandTime implements Command.
func (c Release) CommandTime() time.Time { return c.At }
