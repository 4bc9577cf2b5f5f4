package manager

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

// RequestUpgrade records a new DataEngineUpgradeManager (from the intake).
type RequestUpgrade struct {
	aggregate.Meta
	Ref        events.ManagerRef
	Generation int64
	// DataEngine is recorded as written: a value other than v2 is refused by
	// the prechecks rather than here, so the refusal shows in status.
	DataEngine string
	// Nodes is spec.nodes as written; empty means every v2 node.
	Nodes []string
	// AllowNodesWithoutReplicaScheduling is the spec field of that name.
	AllowNodesWithoutReplicaScheduling bool
	// InitiatorPolicy is spec.initiatorPolicy.
	InitiatorPolicy string
	// ReplicaPolicy is spec.replicaPolicy.
	ReplicaPolicy string
}

// RecordPrechecks records the precheck results and, if all passed, the plan.
type RecordPrechecks struct {
	aggregate.Meta
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
	aggregate.Meta
	Node string
	// State is events.NodeCompleted or events.NodeError.
	State   events.NodeState
	Message string
}

// ScheduleNext schedules the first unfinished plan node when none is in flight.
type ScheduleNext struct {
	aggregate.Meta
}

// Hold stops new nodes from starting, for Reason; the node in flight
// finishes. Holding again with another message updates it.
type Hold struct {
	aggregate.Meta
	Reason  string
	Message string
}

// Release ends a hold and starts the next node when none is in flight.
type Release struct {
	aggregate.Meta
	Message string
}

// RequestCancel records the deletion of the manager.
type RequestCancel struct {
	aggregate.Meta
	Reason string
}

// ConfirmCancelled records that the cancel flow reached its safe point. Node
// must be the node in flight, if any.
type ConfirmCancelled struct {
	aggregate.Meta
	Node    string
	Message string
}

// Fail ends the upgrade in error (terminal).
type Fail struct {
	aggregate.Meta
	Reason  string
	Message string
	// Node is the node that caused the failure, if any.
	Node string
}

func (RequestUpgrade) commandName() string    { return "RequestUpgrade" }
func (RecordPrechecks) commandName() string   { return "RecordPrechecks" }
func (RecordNodeOutcome) commandName() string { return "RecordNodeOutcome" }
func (ScheduleNext) commandName() string      { return "ScheduleNext" }
func (RequestCancel) commandName() string     { return "RequestCancel" }
func (ConfirmCancelled) commandName() string  { return "ConfirmCancelled" }
func (Fail) commandName() string              { return "Fail" }
func (Hold) commandName() string              { return "Hold" }
func (Release) commandName() string           { return "Release" }
