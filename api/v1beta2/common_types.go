package v1beta2

// DataEngineType names a Longhorn data engine. Only the V2 (SPDK) engine can
// be live-upgraded: V1 engines run one process per volume and are upgraded by
// Longhorn itself.
//
// The restriction to v2 is an OpenAPI enum, not a CEL rule: the apiserver
// skips CEL rules when schema validation already failed, so a CEL
// "self == 'v2'" next to the enum could never fire; and the enum's message
// (spec.dataEngine: Unsupported value: "v1": supported values: "v2") names the
// field and the allowed value, while kubectl explain and OpenAPI clients see
// the allowed values too.
//
// +kubebuilder:validation:Enum=v2
type DataEngineType string

// DataEngineTypeV2 is the SPDK-based V2 data engine.
const DataEngineTypeV2 DataEngineType = "v2"

// CancelFinalizer is put on a DataEngineUpgradeManager while an upgrade may
// have side effects in flight. Deleting the manager is how a user cancels
// (there is no cancel verb); the finalizer holds the object until the node in
// flight has been brought back to a safe point (targets back where they were,
// replica scheduling restored), and is removed only then.
const CancelFinalizer = "longhorn.io/switchback-cancel"

// Labels put by the controller on the objects it owns, so that they can be
// listed by manager or by node without reading every object.
const (
	// LabelDataEngineUpgradeManager holds the name of the owning manager on
	// each NodeDataEngineUpgrade.
	LabelDataEngineUpgradeManager = "longhorn.io/data-engine-upgrade-manager"
	// LabelNode holds the node name on each NodeDataEngineUpgrade.
	LabelNode = "longhorn.io/node"
)

// UpgradeState is the state of a DataEngineUpgradeManager.
//
// The normal path is pending → initializing → upgrading → completed; error
// and cancelled are terminal too.
//
// +kubebuilder:validation:Enum=pending;initializing;upgrading;completed;error;cancelled
type UpgradeState string

const (
	// UpgradeStatePending means the manager was accepted and nothing has been
	// checked or touched yet.
	UpgradeStatePending UpgradeState = "pending"
	// UpgradeStateInitializing means the preconditions are being checked and
	// the target instance-manager image and the node order are being fixed.
	UpgradeStateInitializing UpgradeState = "initializing"
	// UpgradeStateUpgrading means nodes are being upgraded, one at a time.
	UpgradeStateUpgrading UpgradeState = "upgrading"
	// UpgradeStateCompleted means every node of the plan runs the target image.
	UpgradeStateCompleted UpgradeState = "completed"
	// UpgradeStateError is terminal: the manager does not recover, a new
	// upgrade needs a new manager.
	UpgradeStateError UpgradeState = "error"
	// UpgradeStateCancelled is the state a replay of the history shows for a
	// manager whose deletion cancelled the upgrade; a live object never keeps
	// it for long, since it is being deleted.
	UpgradeStateCancelled UpgradeState = "cancelled"
)

// NodeUpgradeState is the state of the upgrade of one node, both in a
// NodeDataEngineUpgrade and in the manager's per-node summary. The steps run
// in the order of the constants below.
//
// +kubebuilder:validation:Enum=pending;initializing;failing-replicas;switching-over;upgrading-instance-manager;switching-back;rebuilding-replica;finalizing;completed;error;cancelled
type NodeUpgradeState string

const (
	// NodeUpgradeStatePending means the node waits for its turn.
	NodeUpgradeStatePending NodeUpgradeState = "pending"
	// NodeUpgradeStateInitializing means the node's replica scheduling is
	// recorded and turned off, the concerned v2 volumes are recorded and each
	// attached one is snapshotted. On Longhorn v1.12 a node holding the
	// initiators of attached v2 volumes waits here, untouched.
	NodeUpgradeStateInitializing NodeUpgradeState = "initializing"
	// NodeUpgradeStateFailingReplicas means the node's replicas of attached
	// v2 volumes are being failed as Longhorn fails them, so that they stop
	// and are rebuilt later.
	NodeUpgradeStateFailingReplicas NodeUpgradeState = "failing-replicas"
	// NodeUpgradeStateSwitchingOver means the targets of attached volumes are
	// being moved to an instance manager on another node.
	NodeUpgradeStateSwitchingOver NodeUpgradeState = "switching-over"
	// NodeUpgradeStateUpgradingInstanceManager means the old instance manager
	// is being replaced by one running the target image.
	NodeUpgradeStateUpgradingInstanceManager NodeUpgradeState = "upgrading-instance-manager"
	// NodeUpgradeStateSwitchingBack means the node's replica scheduling is
	// restored and the targets are being moved back where they were.
	NodeUpgradeStateSwitchingBack NodeUpgradeState = "switching-back"
	// NodeUpgradeStateRebuildingReplica means the touched v2 volumes are being
	// waited on until they are healthy again.
	NodeUpgradeStateRebuildingReplica NodeUpgradeState = "rebuilding-replica"
	// NodeUpgradeStateFinalizing means the upgrade's snapshots of the node's
	// volumes are removed (unless kept) and the volumes marked completed.
	NodeUpgradeStateFinalizing NodeUpgradeState = "finalizing"
	// NodeUpgradeStateCompleted means the node runs the target image and every
	// concerned volume is back.
	NodeUpgradeStateCompleted NodeUpgradeState = "completed"
	// NodeUpgradeStateError is terminal for the node and for its manager.
	NodeUpgradeStateError NodeUpgradeState = "error"
	// NodeUpgradeStateCancelled means the manager was deleted and this node
	// was brought back to a safe point (or had not started).
	NodeUpgradeStateCancelled NodeUpgradeState = "cancelled"
)

// NodeUpgradeStates lists the node states in the order a node goes through
// them, completed last; error and cancelled may follow any of them and are
// not listed. Projections and tests use it to check that transitions only
// move forward.
var NodeUpgradeStates = []NodeUpgradeState{
	NodeUpgradeStatePending,
	NodeUpgradeStateInitializing,
	NodeUpgradeStateFailingReplicas,
	NodeUpgradeStateSwitchingOver,
	NodeUpgradeStateUpgradingInstanceManager,
	NodeUpgradeStateSwitchingBack,
	NodeUpgradeStateRebuildingReplica,
	NodeUpgradeStateFinalizing,
	NodeUpgradeStateCompleted,
}

// Working reports whether a node upgrade in state s is at work on its node:
// started (past pending) and not over. A node upgrade that never started
// (pending, or no status yet) has touched nothing, also when its upgrade
// ended before it could.
func (s NodeUpgradeState) Working() bool {
	return s != "" && s != NodeUpgradeStatePending && !s.IsTerminal()
}

// IsTerminal reports whether no further transition can follow s.
func (s NodeUpgradeState) IsTerminal() bool {
	switch s {
	case NodeUpgradeStateCompleted, NodeUpgradeStateError, NodeUpgradeStateCancelled:
		return true
	default:
		return false
	}
}

// VolumeUpgradeState is the state of one volume during the upgrade of the
// node it is concerned by.
//
// +kubebuilder:validation:Enum=pending;switching-over;switched-over;switching-back;switched-back;completed;error
type VolumeUpgradeState string

const (
	// VolumeUpgradeStatePending means nothing was done to the volume yet.
	VolumeUpgradeStatePending VolumeUpgradeState = "pending"
	// VolumeUpgradeStateSwitchingOver means the volume's target is being
	// moved to another node.
	VolumeUpgradeStateSwitchingOver VolumeUpgradeState = "switching-over"
	// VolumeUpgradeStateSwitchedOver means the volume reports its target on
	// the other node.
	VolumeUpgradeStateSwitchedOver VolumeUpgradeState = "switched-over"
	// VolumeUpgradeStateSwitchingBack means the target is being moved back to
	// the upgraded node.
	VolumeUpgradeStateSwitchingBack VolumeUpgradeState = "switching-back"
	// VolumeUpgradeStateSwitchedBack means the volume reports its target on
	// the upgraded node again.
	VolumeUpgradeStateSwitchedBack VolumeUpgradeState = "switched-back"
	// VolumeUpgradeStateCompleted means the volume is healthy again and needs
	// nothing more for this node.
	VolumeUpgradeStateCompleted VolumeUpgradeState = "completed"
	// VolumeUpgradeStateError means a step failed for this volume; the
	// message says which.
	VolumeUpgradeStateError VolumeUpgradeState = "error"
)
