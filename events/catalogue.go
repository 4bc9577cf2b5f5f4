package events

import "time"

// Type is a versioned CloudEvents "type" attribute. The version suffix is part
// of the name so that a changed schema becomes a new type and old history can
// still be decoded (and upcast).
type Type string

// Event is a domain event payload: the JSON "data" of a CloudEvent.
type Event interface {
	// EventType returns the CloudEvents type this payload is encoded as.
	EventType() Type
}

// Manager aggregate event types.
const (
	TypeUpgradeRequested Type = "io.switchback.manager.upgrade-requested.v1"
	TypePrecheckPassed   Type = "io.switchback.manager.precheck-passed.v1"
	TypePrecheckFailed   Type = "io.switchback.manager.precheck-failed.v1"
	TypeUpgradePlanned   Type = "io.switchback.manager.upgrade-planned.v1"
	TypeNodeScheduled    Type = "io.switchback.manager.node-scheduled.v1"
	TypeNodeFinished     Type = "io.switchback.manager.node-finished.v1"
	TypeUpgradeCompleted Type = "io.switchback.manager.upgrade-completed.v1"
	TypeUpgradeFailed    Type = "io.switchback.manager.upgrade-failed.v1"
	TypeCancelRequested  Type = "io.switchback.manager.cancel-requested.v1"
	TypeUpgradeCancelled Type = "io.switchback.manager.cancelled.v1"
	TypeUpgradeHeld      Type = "io.switchback.manager.held.v1"
	TypeUpgradeReleased  Type = "io.switchback.manager.released.v1"
)

// Node aggregate event types.
const (
	TypeNodeUpgradeStarted        Type = "io.switchback.node.upgrade-started.v1"
	TypeNodeStateChanged          Type = "io.switchback.node.state-changed.v1"
	TypeVolumeStateChanged        Type = "io.switchback.node.volume-state-changed.v1"
	TypeNodeStalled               Type = "io.switchback.node.stalled.v1"
	TypeNodeResumed               Type = "io.switchback.node.resumed.v1"
	TypeNodeUpgradeCompleted      Type = "io.switchback.node.completed.v1"
	TypeNodeUpgradeFailed         Type = "io.switchback.node.failed.v1"
	TypeNodeCancelRequested       Type = "io.switchback.node.cancel-requested.v1"
	TypeNodeUpgradeCancelled      Type = "io.switchback.node.cancelled.v1"
	TypeSchedulingRecorded        Type = "io.switchback.node.scheduling-recorded.v1"
	TypeSchedulingRestored        Type = "io.switchback.node.scheduling-restored.v1"
	TypeSnapshotsTaken            Type = "io.switchback.node.snapshots-taken.v1"
	TypeSnapshotsRemoved          Type = "io.switchback.node.snapshots-removed.v1"
	TypeNodeTainted               Type = "io.switchback.node.tainted.v1"
	TypeNodeUntainted             Type = "io.switchback.node.untainted.v1"
	TypePodMoved                  Type = "io.switchback.node.pod-moved.v1"
	TypeHashingRequested          Type = "io.switchback.node.snapshot-hashing-requested.v1"
	TypeRebuildPlanned            Type = "io.switchback.node.rebuild-planned.v1"
	TypeRebuildStarted            Type = "io.switchback.node.rebuild-started.v1"
	TypeRebuildFinished           Type = "io.switchback.node.rebuild-finished.v1"
	TypeTemporaryReplicaRequested Type = "io.switchback.node.temporary-replica-requested.v1"
	TypeReplicaCountRaised        Type = "io.switchback.node.replica-count-raised.v1"
	TypeTemporaryReplicaAdded     Type = "io.switchback.node.temporary-replica-added.v1"
	TypeReplicaCountRestored      Type = "io.switchback.node.replica-count-restored.v1"
)

// UpgradeRequested records the user's intent: a DataEngineUpgradeManager was
// created. It opens the manager aggregate.
type UpgradeRequested struct {
	Namespace  string `json:"namespace"`
	Name       string `json:"name"`
	UID        string `json:"uid"`
	Generation int64  `json:"generation"`
	DataEngine string `json:"dataEngine"`
	// Nodes is spec.nodes as written by the user; empty means every v2 node.
	Nodes []string `json:"nodes,omitempty"`
	// AllowNodesWithoutReplicaScheduling is the spec field of that name:
	// nodes whose replica scheduling is off before the upgrade are accepted.
	AllowNodesWithoutReplicaScheduling bool `json:"allowNodesWithoutReplicaScheduling,omitempty"`
	// InitiatorPolicy is spec.initiatorPolicy ("" in a history written
	// before it existed: InitiatorPolicyWait).
	InitiatorPolicy string `json:"initiatorPolicy,omitempty"`
	// ReplicaPolicy is spec.replicaPolicy ("" in a history written before
	// it existed: ReplicaPolicyRebuild).
	ReplicaPolicy string `json:"replicaPolicy,omitempty"`
}

// PrecheckPassed records one pre-upgrade requirement that holds. Check is the
// condition type it is projected to (e.g. DefaultImageOnAllNodesReady).
type PrecheckPassed struct {
	Check   string `json:"check"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// PrecheckFailed records one pre-upgrade requirement that does not hold. Any
// failed precheck ends the upgrade before a node is touched.
type PrecheckFailed struct {
	Check   string `json:"check"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// UpgradePlanned fixes what the upgrade will do once every precheck passed: the
// target image, captured once from the default IM image so a later change of
// the setting cannot split the cluster, and the deterministic node order.
type UpgradePlanned struct {
	InstanceManagerImage string   `json:"instanceManagerImage"`
	Nodes                []string `json:"nodes"`
	// LonghornProfile and LonghornVersion say which Longhorn the upgrade was
	// planned against (dataplane.Platform), so a replay tells it.
	LonghornProfile string `json:"longhornProfile,omitempty"`
	LonghornVersion string `json:"longhornVersion,omitempty"`
}

// NodeScheduled hands one node to its worker. Attempt makes the command id
// unique per try, so a re-issued command deduplicates.
type NodeScheduled struct {
	Node    string `json:"node"`
	Attempt int    `json:"attempt"`
}

// NodeFinished copies a node upgrade's terminal outcome into the manager
// aggregate, so that the manager's decisions never need to read node streams.
type NodeFinished struct {
	Node    string    `json:"node"`
	State   NodeState `json:"state"`
	Message string    `json:"message,omitempty"`
}

// UpgradeCompleted: every planned node completed.
type UpgradeCompleted struct {
	Message string `json:"message,omitempty"`
}

// UpgradeFailed is terminal: a new upgrade needs a new manager.
type UpgradeFailed struct {
	Reason  string `json:"reason"`
	Message string `json:"message"`
	// Node is the node whose failure failed the upgrade, if any.
	Node string `json:"node,omitempty"`
}

// CancelRequested: the manager was deleted. No new node starts; the node in
// flight is brought to a safe point first.
type CancelRequested struct {
	Reason string `json:"reason,omitempty"`
}

// UpgradeCancelled: the cancel flow reached its safe point; the finalizer may go.
type UpgradeCancelled struct {
	Message string `json:"message,omitempty"`
	// Node is the node that was in flight when the cancel arrived, if any.
	Node string `json:"node,omitempty"`
}

// UpgradeHeld: no new node may start, for Reason (e.g. Longhorn's own
// upgrader was switched on); the node in flight, if any, finishes. A later
// UpgradeHeld updates the message while the hold lasts.
type UpgradeHeld struct {
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// UpgradeReleased ends a hold: the next node may start.
type UpgradeReleased struct {
	Message string `json:"message,omitempty"`
}

// NodeUpgradeStarted opens a node aggregate: the worker accepted the node.
type NodeUpgradeStarted struct {
	Node                 string `json:"node"`
	DataEngine           string `json:"dataEngine"`
	InstanceManagerImage string `json:"instanceManagerImage"`
	Attempt              int    `json:"attempt"`
	// LonghornProfile is the profile the worker detected: what the node's
	// steps are allowed to do.
	LonghornProfile string `json:"longhornProfile,omitempty"`
	// InitiatorPolicy is the manager's spec.initiatorPolicy: what the node
	// does when it holds initiators its instance manager cannot keep
	// ("" and InitiatorPolicyWait: it waits for them to go;
	// InitiatorPolicyMoveWorkloads: it moves the pods that hold them).
	InitiatorPolicy string `json:"initiatorPolicy,omitempty"`
	// ReplicaPolicy is the manager's spec.replicaPolicy: whether the node
	// first adds a temporary replica to each volume its failed replica
	// would leave short of its numberOfReplicas ("" and
	// ReplicaPolicyRebuild: it does not; ReplicaPolicyAddFirst: it does).
	ReplicaPolicy string `json:"replicaPolicy,omitempty"`
}

// The replica policies (spec.replicaPolicy).
const (
	ReplicaPolicyRebuild  = "rebuild"
	ReplicaPolicyAddFirst = "add-first"
)

// The initiator policies (spec.initiatorPolicy).
const (
	InitiatorPolicyWait          = "wait"
	InitiatorPolicyMoveWorkloads = "move-workloads"
)

// NodeStateChanged moves a node upgrade from one working step to the next.
type NodeStateChanged struct {
	From    NodeState `json:"from"`
	To      NodeState `json:"to"`
	Message string    `json:"message,omitempty"`
}

// VolumeStateChanged moves one volume inside a node upgrade. From is empty when
// the volume is first recorded. TargetNode is where the volume's target lives
// after the change, so restart and cancel know where to move it back from.
type VolumeStateChanged struct {
	Volume     string      `json:"volume"`
	From       VolumeState `json:"from,omitempty"`
	To         VolumeState `json:"to"`
	TargetNode string      `json:"targetNode,omitempty"`
	Message    string      `json:"message,omitempty"`
	// EngineNodeBefore is the volume's spec.engineNodeID as it was before
	// the switch-over this change starts ("" = follow the attached node):
	// switching back restores exactly it. Absent on other changes.
	EngineNodeBefore *string `json:"engineNodeBefore,omitempty"`
}

// NodeStalled: a step made no progress for stallAfter. The state does not
// change (docs/design.md, rule R7: stuck is not error); Message names what blocks.
type NodeStalled struct {
	Step    NodeState `json:"step"`
	Volume  string    `json:"volume,omitempty"`
	Reason  string    `json:"reason"`
	Message string    `json:"message"`
}

// NodeResumed: the cause of a stall went away and the step progresses again.
type NodeResumed struct {
	Step    NodeState `json:"step"`
	Message string    `json:"message,omitempty"`
}

// NodeUpgradeCompleted: the node runs the target image and its volumes are back.
type NodeUpgradeCompleted struct {
	Message string `json:"message,omitempty"`
}

// NodeUpgradeFailed is terminal for the node and, through the manager, for the
// whole upgrade.
type NodeUpgradeFailed struct {
	Step    NodeState `json:"step"`
	Reason  string    `json:"reason"`
	Message string    `json:"message"`
}

// NodeCancelRequested tells the node's worker to bring the node to a safe point.
type NodeCancelRequested struct {
	Reason string `json:"reason,omitempty"`
}

// NodeUpgradeCancelled: the node reached a safe point (every target back where
// it was, replica scheduling restored) and does no more work.
type NodeUpgradeCancelled struct {
	Step    NodeState `json:"step"`
	Message string    `json:"message,omitempty"`
}

// SchedulingRecorded keeps the node's spec.allowScheduling as it was before
// the upgrade turned replica scheduling off there, so that exactly that
// value is restored, whoever restores it and after whatever crash.
type SchedulingRecorded struct {
	AllowScheduling bool `json:"allowScheduling"`
}

// SchedulingRestored: the recorded spec.allowScheduling was written back.
type SchedulingRestored struct {
	AllowScheduling bool `json:"allowScheduling"`
}

// SnapshotsTaken records the snapshot the upgrade took of each attached
// volume it concerns on the node, before touching any.
type SnapshotsTaken struct {
	Snapshot string   `json:"snapshot"`
	Volumes  []string `json:"volumes"`
}

// SnapshotsRemoved: the upgrade's own snapshots of those volumes were
// removed, per the retention setting, once the node completed.
type SnapshotsRemoved struct {
	Snapshot string   `json:"snapshot"`
	Volumes  []string `json:"volumes"`
}

// NodeTainted records, before it is put, the NoSchedule taint that keeps
// the pods moved off the node from being scheduled back, so that it is
// taken off whoever ends the upgrade and after whatever crash.
type NodeTainted struct {
	Key string `json:"key"`
}

// NodeUntainted: the taint NodeTainted recorded was taken off.
type NodeUntainted struct {
	Key string `json:"key"`
}

// PodMoved records, before it is asked, that a pod holding initiators on
// the node is moved off it: evicted, or for a share-manager pod (Restart)
// deleted for Longhorn to start again elsewhere. Volumes are the v2 volumes
// attached to the node it holds.
type PodMoved struct {
	Pod string `json:"pod"`
	// UID is the pod's metadata.uid: a pod of the same name moved again (a
	// StatefulSet's) is another move.
	UID     string   `json:"uid,omitempty"`
	Volumes []string `json:"volumes"`
	Restart bool     `json:"restart,omitempty"`
}

// HashingRequested records, before the controller asks Longhorn for it,
// the on-demand hashing of the snapshots of a volume whose replica on the
// node is about to be failed: once the upgrade's snapshot (Snapshot) is
// hashed on every replica, the reused replica's rebuild skips it and
// copies only what was written since. The controller writes At into the
// volume's spec.snapshotHashingRequestedAt; the worker waits for its
// completion until Deadline. Bytes is what the hashing is expected to read
// on each replica (its unhashed user snapshots).
type HashingRequested struct {
	Volume   string    `json:"volume"`
	Snapshot string    `json:"snapshot"`
	At       time.Time `json:"at"`
	Deadline time.Time `json:"deadline"`
	Bytes    int64     `json:"bytes,omitempty"`
}

// RebuildPlanned records, before a volume's replica on the node is failed,
// what its rebuild is expected to copy: ExpectedBytes with what the
// snapshots' checksums let a reused replica skip, FullBytes a whole copy
// (the volume's actual size). Hashed says its snapshots were hashed for
// it; otherwise Reason and Message say why not.
type RebuildPlanned struct {
	Volume        string `json:"volume"`
	Hashed        bool   `json:"hashed,omitempty"`
	Reason        string `json:"reason,omitempty"`
	Message       string `json:"message,omitempty"`
	ExpectedBytes int64  `json:"expectedBytes"`
	FullBytes     int64  `json:"fullBytes"`
	// HashedBytes is what the hashing read, on each replica: the user
	// snapshots it had to hash.
	HashedBytes int64 `json:"hashedBytes,omitempty"`
}

// RebuildStarted records a volume's rebuild as first seen under way:
// Replica (on Node) being rebuilt, at Progress percent as Longhorn
// reported it, at At.
type RebuildStarted struct {
	Volume   string    `json:"volume"`
	Replica  string    `json:"replica"`
	Node     string    `json:"node"`
	Progress int       `json:"progress"`
	At       time.Time `json:"at"`
}

// RebuildFinished records a volume healthy again with no replica
// rebuilding, at At: the rebuild the upgrade caused is over.
type RebuildFinished struct {
	Volume string    `json:"volume"`
	At     time.Time `json:"at"`
}

// TemporaryReplicaRequested records, under spec.replicaPolicy add-first,
// that failing the volume's replica on the node would leave it with fewer
// healthy replicas than it asks for: the controller raises its
// numberOfReplicas by one for Longhorn to build a temporary replica on
// another node first. NumberOfReplicas, ReplicaAutoBalance and
// DataLocality are its spec as the worker read it, and Replicas the names
// of its replicas then: a replica of another name that appears afterwards
// is the temporary one. Until Deadline the wait for it is not a stall.
type TemporaryReplicaRequested struct {
	Volume             string    `json:"volume"`
	NumberOfReplicas   int       `json:"numberOfReplicas"`
	ReplicaAutoBalance string    `json:"replicaAutoBalance,omitempty"`
	DataLocality       string    `json:"dataLocality,omitempty"`
	Replicas           []string  `json:"replicas"`
	At                 time.Time `json:"at"`
	Deadline           time.Time `json:"deadline"`
}

// ReplicaCountRaised records, before the controller writes it, the
// volume's spec as the upgrade found it before its first temporary
// replica: NumberOfReplicas, ReplicaAutoBalance and DataLocality are what
// the end of the upgrade restores. Raised is what numberOfReplicas is set
// to, with auto-balance and data locality disabled so that Longhorn moves
// and deletes no replica meanwhile. FirstNode is set when an earlier
// node's request raised it: the record then tells this node the volume's
// count without a second raise, and the restore is recorded on FirstNode.
type ReplicaCountRaised struct {
	Volume             string `json:"volume"`
	NumberOfReplicas   int    `json:"numberOfReplicas"`
	ReplicaAutoBalance string `json:"replicaAutoBalance,omitempty"`
	DataLocality       string `json:"dataLocality,omitempty"`
	Raised             int    `json:"raised"`
	FirstNode          string `json:"firstNode,omitempty"`
}

// TemporaryReplicaAdded records the temporary replica Longhorn built for
// the raise, Replica on Node, when first seen: exactly it is deleted at
// the end of the upgrade.
type TemporaryReplicaAdded struct {
	Volume  string `json:"volume"`
	Replica string `json:"replica"`
	Node    string `json:"node"`
}

// ReplicaCountRestored records that the controller wrote back the spec
// ReplicaCountRaised recorded: numberOfReplicas lowered first, then the
// temporary replica (Replica) deleted, then auto-balance and data
// locality restored. Replica is "" when none was deleted, and Message
// says why (none was built, or deleting it would have left the volume
// short of replicas).
type ReplicaCountRestored struct {
	Volume           string `json:"volume"`
	NumberOfReplicas int    `json:"numberOfReplicas"`
	Replica          string `json:"replica,omitempty"`
	Message          string `json:"message,omitempty"`
}

// EventType implements Event.
func (UpgradeRequested) EventType() Type { return TypeUpgradeRequested }

// EventType implements Event.
func (PrecheckPassed) EventType() Type { return TypePrecheckPassed }

// EventType implements Event.
func (PrecheckFailed) EventType() Type { return TypePrecheckFailed }

// EventType implements Event.
func (UpgradePlanned) EventType() Type { return TypeUpgradePlanned }

// EventType implements Event.
func (NodeScheduled) EventType() Type { return TypeNodeScheduled }

// EventType implements Event.
func (NodeFinished) EventType() Type { return TypeNodeFinished }

// EventType implements Event.
func (UpgradeCompleted) EventType() Type { return TypeUpgradeCompleted }

// EventType implements Event.
func (UpgradeFailed) EventType() Type { return TypeUpgradeFailed }

// EventType implements Event.
func (CancelRequested) EventType() Type { return TypeCancelRequested }

// EventType implements Event.
func (UpgradeCancelled) EventType() Type { return TypeUpgradeCancelled }

// EventType implements Event.
func (UpgradeHeld) EventType() Type { return TypeUpgradeHeld }

// EventType implements Event.
func (UpgradeReleased) EventType() Type { return TypeUpgradeReleased }

// EventType implements Event.
func (NodeUpgradeStarted) EventType() Type { return TypeNodeUpgradeStarted }

// EventType implements Event.
func (NodeStateChanged) EventType() Type { return TypeNodeStateChanged }

// EventType implements Event.
func (VolumeStateChanged) EventType() Type { return TypeVolumeStateChanged }

// EventType implements Event.
func (NodeStalled) EventType() Type { return TypeNodeStalled }

// EventType implements Event.
func (NodeResumed) EventType() Type { return TypeNodeResumed }

// EventType implements Event.
func (NodeUpgradeCompleted) EventType() Type { return TypeNodeUpgradeCompleted }

// EventType implements Event.
func (NodeUpgradeFailed) EventType() Type { return TypeNodeUpgradeFailed }

// EventType implements Event.
func (NodeCancelRequested) EventType() Type { return TypeNodeCancelRequested }

// EventType implements Event.
func (NodeUpgradeCancelled) EventType() Type { return TypeNodeUpgradeCancelled }

// EventType implements Event.
func (SchedulingRecorded) EventType() Type { return TypeSchedulingRecorded }

// EventType implements Event.
func (SchedulingRestored) EventType() Type { return TypeSchedulingRestored }

// EventType implements Event.
func (SnapshotsTaken) EventType() Type { return TypeSnapshotsTaken }

// EventType implements Event.
func (SnapshotsRemoved) EventType() Type { return TypeSnapshotsRemoved }

// EventType implements Event.
func (NodeTainted) EventType() Type { return TypeNodeTainted }

// EventType implements Event.
func (NodeUntainted) EventType() Type { return TypeNodeUntainted }

// EventType implements Event.
func (PodMoved) EventType() Type { return TypePodMoved }

// EventType implements Event.
func (HashingRequested) EventType() Type { return TypeHashingRequested }

// EventType implements Event.
func (RebuildPlanned) EventType() Type { return TypeRebuildPlanned }

// EventType implements Event.
func (RebuildStarted) EventType() Type { return TypeRebuildStarted }

// EventType implements Event.
func (RebuildFinished) EventType() Type { return TypeRebuildFinished }

// EventType implements Event.
func (TemporaryReplicaRequested) EventType() Type { return TypeTemporaryReplicaRequested }

// EventType implements Event.
func (ReplicaCountRaised) EventType() Type { return TypeReplicaCountRaised }

// EventType implements Event.
func (TemporaryReplicaAdded) EventType() Type { return TypeTemporaryReplicaAdded }

// EventType implements Event.
func (ReplicaCountRestored) EventType() Type { return TypeReplicaCountRestored }
