// Package dataplane is the boundary between the upgrade logic and a Longhorn
// cluster: the few reads a precheck, planner or node step needs, and the few
// actions a step takes. Two implementations exist: the simulator (sim/) and
// the adapter over Longhorn's custom resources.
//
// Every action is idempotent (calling it again with the same arguments is a
// no-op) because node workers are redelivered commands and restart mid-step;
// deleting something already gone succeeds.
//
// Robustness of a detached volume is computed from its replicas like an
// attached one's (Longhorn itself reports "unknown" for it); the health gate
// reads replica counts, not robustness. The NVMe-oF initiator is a kernel
// client on the attached node that survives its node's IM restart, so the
// interface does not expose it.
package dataplane

import (
	"context"
	"errors"
)

// ErrNotFound is matched (errors.Is) when a named object does not exist.
var ErrNotFound = errors.New("not found")

// ErrRefused is matched when an action does not apply to the object as it is
// (setting the image of an attached volume, moving the target of a v1
// volume): retrying cannot help.
var ErrRefused = errors.New("refused")

// DataEngineV2 is the only data engine Switchback upgrades.
const DataEngineV2 = "v2"

// Node is a Kubernetes/Longhorn node as the upgrade sees it.
type Node struct {
	Name  string
	Ready bool
	// V2 reports whether the node runs the v2 data engine.
	V2 bool
	// UpgradeRequested is Longhorn's node flag (spec.dataEngineUpgradeRequested):
	// while set, nothing new is scheduled on the node's v2 engine.
	UpgradeRequested bool
	// Images present on the node (pulled), for DefaultImageOnAllNodesReady.
	Images []string
}

// IMState is an instance manager's lifecycle state.
type IMState string

// Instance manager states.
const (
	IMStarting IMState = "starting"
	IMRunning  IMState = "running"
	IMStopped  IMState = "stopped"
	IMError    IMState = "error"
)

// InstanceManager is one v2 instance manager: the single process holding every
// v2 engine and replica of its node.
type InstanceManager struct {
	Name  string
	Node  string
	Image string
	// DataEngine is v2 for every IM a Reader lists; empty is taken as v2.
	DataEngine string
	State      IMState
}

// ReplicaState is a replica's lifecycle state.
type ReplicaState string

// Replica states.
const (
	ReplicaRunning    ReplicaState = "running"
	ReplicaRebuilding ReplicaState = "rebuilding"
	ReplicaStopped    ReplicaState = "stopped"
	ReplicaError      ReplicaState = "error"
)

// Replica is one copy of a volume's data on one node.
type Replica struct {
	Name  string
	Node  string
	State ReplicaState
}

// Healthy reports whether the replica serves I/O.
func (r Replica) Healthy() bool { return r.State == ReplicaRunning }

// Robustness is Longhorn's volume health summary.
type Robustness string

// Volume robustness values.
const (
	RobustnessHealthy  Robustness = "healthy"
	RobustnessDegraded Robustness = "degraded"
	RobustnessFaulted  Robustness = "faulted"
	RobustnessUnknown  Robustness = "unknown"
)

// Volume is a Longhorn volume with its engine placement.
type Volume struct {
	Name       string
	DataEngine string
	// NumberOfReplicas is the desired replica count; 0 means not reported,
	// and readers then count Replicas instead.
	NumberOfReplicas int
	// AttachedNode is where the volume is attached: the initiator, next to the
	// workload. Empty when detached.
	AttachedNode string
	// TargetNode is where the engine's NVMe-oF target currently runs
	// (status.currentTargetNodeID); equal to AttachedNode unless switched over.
	// Readers take an empty TargetNode on an attached volume as AttachedNode.
	TargetNode string
	// DesiredTargetNode is the target override (spec.targetNodeID); empty = none.
	DesiredTargetNode string
	// Image is the engine image; finalizing brings detached volumes to the target.
	Image      string
	Robustness Robustness
	Replicas   []Replica
}

// Attached reports whether the volume is attached somewhere.
func (v Volume) Attached() bool { return v.AttachedNode != "" }

// TargetHost is the node whose v2 IM serves the volume's target: the load a
// temporary target adds to a node. It is "" unless the volume is an attached
// v2 volume; an empty TargetNode means the target runs next to the initiator.
func (v Volume) TargetHost() string {
	if v.DataEngine != DataEngineV2 || v.AttachedNode == "" {
		return ""
	}
	if v.TargetNode != "" {
		return v.TargetNode
	}
	return v.AttachedNode
}

// CountTargets counts TargetHost over vols, per node: what TargetCounts
// returns, for readers that have no index of their own.
func CountTargets(vols []Volume) map[string]int {
	out := map[string]int{}
	for _, v := range vols {
		if h := v.TargetHost(); h != "" {
			out[h]++
		}
	}
	return out
}

// HealthyReplicas counts replicas that serve I/O.
func (v Volume) HealthyReplicas() int {
	n := 0
	for _, r := range v.Replicas {
		if r.Healthy() {
			n++
		}
	}
	return n
}

// Reader is the read side: what prechecks, the planner and steps observe.
type Reader interface {
	// Nodes lists every node, v2 or not.
	Nodes(ctx context.Context) ([]Node, error)
	// Node returns one node or an error matching ErrNotFound.
	Node(ctx context.Context, name string) (Node, error)
	// DefaultInstanceManagerImage is the image new v2 IMs get (Longhorn setting
	// default-instance-manager-image): the upgrade's target.
	DefaultInstanceManagerImage(ctx context.Context) (string, error)
	// InstanceManagers lists the v2 IMs, of one node or of all nodes when node is "".
	InstanceManagers(ctx context.Context, node string) ([]InstanceManager, error)
	// Volumes lists every volume, v1 and v2.
	Volumes(ctx context.Context) ([]Volume, error)
	// Volume returns one volume or an error matching ErrNotFound.
	Volume(ctx context.Context, name string) (Volume, error)
	// VolumesOn lists the volumes attached to node, with their target on
	// node, or with a replica on node, sorted by name: all a node's upgrade
	// may concern, without listing the whole cluster at every step.
	VolumesOn(ctx context.Context, node string) ([]Volume, error)
	// TargetCounts counts, per node, the volumes whose TargetHost is that
	// node (nodes hosting none are absent). Choosing a temporary target needs
	// only these counts; reading them from an index instead of listing every
	// volume keeps a node step's cost from growing with the cluster.
	TargetCounts(ctx context.Context) (map[string]int, error)
}

// Actions are what node steps do. Each is idempotent.
type Actions interface {
	// SetNodeUpgradeRequested sets or clears the node's upgrade flag.
	SetNodeUpgradeRequested(ctx context.Context, node string, requested bool) error
	// CreateSnapshot takes a volume snapshot named name (no-op if it exists).
	CreateSnapshot(ctx context.Context, volume, name string) error
	// FailReplica stops a replica and removes it from its volume's engine; the
	// replica is deleted once stopped and rebuilt later elsewhere or in place.
	FailReplica(ctx context.Context, volume, replica string) error
	// DeleteReplica deletes a stopped replica.
	DeleteReplica(ctx context.Context, volume, replica string) error
	// SetTargetNode sets the volume's target override; "" clears it.
	SetTargetNode(ctx context.Context, volume, node string) error
	// DeleteInstanceManager deletes an IM; Longhorn recreates the node's IM
	// with the default image.
	DeleteInstanceManager(ctx context.Context, name string) error
	// SetVolumeImage moves a detached volume to image.
	SetVolumeImage(ctx context.Context, volume, image string) error
}

// DataPlane is a whole cluster: reads and actions.
type DataPlane interface {
	Reader
	Actions
}
