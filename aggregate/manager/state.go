package manager

import (
	"time"

	"github.com/switchback-dev/switchback/aggregate"
	"github.com/switchback-dev/switchback/events"
)

// State is the manager aggregate folded from its history. The zero value is
// the state of a manager with no history. States are values: Evolve never
// modifies the maps or slices of the state it is given, so earlier states stay
// valid (snapshots, tests comparing before and after).
type State struct {
	// Exists is false until UpgradeRequested was applied.
	Exists bool `json:"exists"`
	// Ref identifies the manager incarnation (namespace, name, UID).
	Ref events.ManagerRef `json:"ref"`
	// Generation, DataEngine and RequestedNodes are the spec as requested.
	Generation     int64    `json:"generation,omitempty"`
	DataEngine     string   `json:"dataEngine,omitempty"`
	RequestedNodes []string `json:"requestedNodes,omitempty"`
	// AllowNodesWithoutReplicaScheduling is the spec's opt-in to nodes whose
	// replica scheduling is off before the upgrade.
	AllowNodesWithoutReplicaScheduling bool `json:"allowNodesWithoutReplicaScheduling,omitempty"`
	// InitiatorPolicy is spec.initiatorPolicy, which every node upgrade
	// starts with.
	InitiatorPolicy string `json:"initiatorPolicy,omitempty"`
	// ReplicaPolicy is spec.replicaPolicy, which every node upgrade starts
	// with.
	ReplicaPolicy string `json:"replicaPolicy,omitempty"`
	// State is the manager's lifecycle state.
	State events.ManagerState `json:"state,omitempty"`
	// Message is the last progress or error message (status.message).
	Message string `json:"message,omitempty"`
	// Prechecks are the recorded precheck results, in recording order.
	Prechecks []PrecheckResult `json:"prechecks,omitempty"`
	// InstanceManagerImage is the target image captured by the plan.
	InstanceManagerImage string `json:"instanceManagerImage,omitempty"`
	// LonghornProfile and LonghornVersion are the Longhorn the upgrade was
	// planned against.
	LonghornProfile string `json:"longhornProfile,omitempty"`
	LonghornVersion string `json:"longhornVersion,omitempty"`
	// Plan is the node order fixed by UpgradePlanned.
	Plan []string `json:"plan,omitempty"`
	// UpgradingNode is the node in flight: scheduled, outcome not yet
	// recorded. It is kept when the manager fails, so cleanup knows which node
	// may still be mid-step.
	UpgradingNode string `json:"upgradingNode,omitempty"`
	// Nodes holds every scheduled node; a node is pending until its outcome
	// is recorded. Planned nodes not yet scheduled have no entry.
	Nodes map[string]NodeStatus `json:"nodes,omitempty"`
	// Held is set while no new node may start (UpgradeHeld), nil otherwise.
	Held *HoldState `json:"held,omitempty"`
	// CancelRequested is set once the manager's deletion was recorded.
	CancelRequested bool   `json:"cancelRequested,omitempty"`
	CancelReason    string `json:"cancelReason,omitempty"`
	// FailReason and FailedNode come from UpgradeFailed.
	FailReason string `json:"failReason,omitempty"`
	FailedNode string `json:"failedNode,omitempty"`
	// UpdatedAt is the time of the last applied event.
	UpdatedAt time.Time `json:"updatedAt,omitzero"`
	// Transitions counts applied events (refused ones are not counted).
	Transitions int `json:"transitions,omitempty"`
}

// HoldState is why no new node may start, and since when.
type HoldState struct {
	Reason  string    `json:"reason"`
	Message string    `json:"message"`
	Since   time.Time `json:"since,omitzero"`
}

// NodeStatus is the manager's view of one scheduled node.
type NodeStatus struct {
	// State is pending while the node is in flight, then its terminal outcome.
	State   events.NodeState `json:"state"`
	Message string           `json:"message,omitempty"`
	// Attempt is the attempt number the node was scheduled with.
	Attempt int `json:"attempt"`
}

// PrecheckResult is the outcome of one pre-upgrade requirement. It is both the
// input of RecordPrechecks and what State.Prechecks records.
type PrecheckResult struct {
	// Check is the condition type the result is projected to.
	Check   string `json:"check"`
	Passed  bool   `json:"passed"`
	Reason  string `json:"reason"`
	Message string `json:"message,omitempty"`
}

// Aggregate returns the id of the manager aggregate.
func (s State) Aggregate() events.AggregateID { return events.ManagerAggregate(s.Ref) }

// Terminal reports whether the manager accepts no further event.
func (s State) Terminal() bool { return s.Exists && s.State.Terminal() }

// Planned reports whether UpgradePlanned was applied.
func (s State) Planned() bool { return len(s.Plan) > 0 }

// PrechecksRecorded reports whether any precheck result was recorded.
func (s State) PrechecksRecorded() bool { return len(s.Prechecks) > 0 }

// AllPrechecksPassed reports whether at least one precheck was recorded and
// none failed.
func (s State) AllPrechecksPassed() bool {
	for _, p := range s.Prechecks {
		if !p.Passed {
			return false
		}
	}
	return len(s.Prechecks) > 0
}

// NextNode returns the first plan node that was never scheduled, in plan order.
func (s State) NextNode() (string, bool) {
	for _, n := range s.Plan {
		if _, scheduled := s.Nodes[n]; !scheduled {
			return n, true
		}
	}
	return "", false
}

// FailedNodes returns the scheduled nodes whose outcome is error, in plan order.
func (s State) FailedNodes() []string {
	var out []string
	for _, n := range s.Plan {
		if st, ok := s.Nodes[n]; ok && st.State == events.NodeError {
			out = append(out, n)
		}
	}
	return out
}

// AllNodesCompleted reports whether every plan node completed.
func (s State) AllNodesCompleted() bool {
	for _, n := range s.Plan {
		if s.Nodes[n].State != events.NodeCompleted {
			return false
		}
	}
	return s.Planned()
}

// DeletedReason is the cancel reason of a manager whose deletion was
// recorded: deletion is the only way to cancel.
const DeletedReason = "the DataEngineUpgradeManager was deleted"

// NodeCancelReason says why a node still in flight, or one that starts
// after the manager stopped, is brought to its safe point: the upgrade
// failed (and why), the manager was deleted, or the upgrade had already
// ended.
func (s State) NodeCancelReason() string {
	switch {
	case s.State == events.ManagerError:
		why := "the upgrade failed"
		if s.FailReason != "" {
			why += " (" + s.FailReason + ")"
		}
		if s.Message != "" {
			why += ": " + s.Message
		}
		return why
	case s.CancelRequested:
		if s.CancelReason != "" {
			return s.CancelReason
		}
		return DeletedReason
	case s.Terminal():
		return "the upgrade had already ended (" + string(s.State) + ")"
	}
	return "the upgrade is not running"
}

// subject is s as the checks every event and command passes see it, and as
// refusals report it.
func (s State) subject() aggregate.Subject {
	return aggregate.Subject{Machine: Machine, Exists: s.Exists, Terminal: s.Terminal(), State: string(s.State), Opener: events.TypeUpgradeRequested}
}

func (s State) stateName() string { return s.subject().Name() }

func illegal(s State, e events.Envelope, format string, args ...any) error {
	return s.subject().Illegal(e, format, args...)
}
