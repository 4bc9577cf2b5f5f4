package events

// ManagerState is the lifecycle state of a DataEngineUpgradeManager.
type ManagerState string

// Manager states. Cancelled is terminal and only reached through deletion of the
// manager (there is no cancel verb); it is kept in history so replay can tell a
// cancelled upgrade from a failed one.
const (
	ManagerPending      ManagerState = "pending"
	ManagerInitializing ManagerState = "initializing"
	ManagerUpgrading    ManagerState = "upgrading"
	ManagerCompleted    ManagerState = "completed"
	ManagerError        ManagerState = "error"
	ManagerCancelled    ManagerState = "cancelled"
)

// Terminal reports whether no further transition is allowed from s.
func (s ManagerState) Terminal() bool {
	return s == ManagerCompleted || s == ManagerError || s == ManagerCancelled
}

// NodeState is the lifecycle state of a NodeDataEngineUpgrade.
type NodeState string

// Node states, in the order a node upgrade walks them (docs/upgrade-flows.md).
const (
	NodePending                  NodeState = "pending"
	NodeInitializing             NodeState = "initializing"
	NodeFailingReplicas          NodeState = "failing-replicas"
	NodeSwitchingOver            NodeState = "switching-over"
	NodeUpgradingInstanceManager NodeState = "upgrading-instance-manager"
	NodeSwitchingBack            NodeState = "switching-back"
	NodeRebuildingReplica        NodeState = "rebuilding-replica"
	NodeFinalizing               NodeState = "finalizing"
	NodeCompleted                NodeState = "completed"
	NodeError                    NodeState = "error"
	NodeCancelled                NodeState = "cancelled"
)

// NodeSteps lists the working states of a node upgrade in execution order; each
// one is left for the next by a NodeStateChanged event, and the last one by
// NodeUpgradeCompleted.
var NodeSteps = []NodeState{
	NodePending,
	NodeInitializing,
	NodeFailingReplicas,
	NodeSwitchingOver,
	NodeUpgradingInstanceManager,
	NodeSwitchingBack,
	NodeRebuildingReplica,
	NodeFinalizing,
}

// Terminal reports whether no further transition is allowed from s.
func (s NodeState) Terminal() bool {
	return s == NodeCompleted || s == NodeError || s == NodeCancelled
}

// Next returns the step that follows s, or NodeCompleted after the last step.
// ok is false when s is not a working step.
func (s NodeState) Next() (next NodeState, ok bool) {
	for i, step := range NodeSteps {
		if step == s {
			if i == len(NodeSteps)-1 {
				return NodeCompleted, true
			}
			return NodeSteps[i+1], true
		}
	}
	return "", false
}

// Valid reports whether s is one of the known node states.
func (s NodeState) Valid() bool {
	_, ok := s.Next()
	return ok || s.Terminal()
}

// VolumeState is the state of one volume inside a node upgrade.
type VolumeState string

// Volume states.
const (
	VolumePending       VolumeState = "pending"
	VolumeSwitchingOver VolumeState = "switching-over"
	VolumeSwitchedOver  VolumeState = "switched-over"
	VolumeSwitchingBack VolumeState = "switching-back"
	VolumeSwitchedBack  VolumeState = "switched-back"
	VolumeCompleted     VolumeState = "completed"
	VolumeError         VolumeState = "error"
)

// Valid reports whether s is one of the known volume states.
func (s VolumeState) Valid() bool {
	switch s {
	case VolumePending, VolumeSwitchingOver, VolumeSwitchedOver, VolumeSwitchingBack,
		VolumeSwitchedBack, VolumeCompleted, VolumeError:
		return true
	}
	return false
}
