package v1beta2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DataEngineUpgradeManagerSpec is the user's intent: which data engine to
// upgrade and on which nodes. It cannot change once created: the plan (node
// order, target image) is fixed from it when the upgrade starts, and the
// review ruled that changing the node set mid-way is not allowed. To upgrade
// other nodes, finish or delete this manager and create another.
//
// An absent and an empty nodes list both mean "every v2 node", so the rule
// treats them alike; listType=set makes the comparison ignore order.
//
// +kubebuilder:validation:XValidation:rule="(has(self.nodes) ? self.nodes : []) == (has(oldSelf.nodes) ? oldSelf.nodes : [])",message="spec.nodes is immutable: delete this DataEngineUpgradeManager and create a new one to upgrade other nodes",fieldPath=".nodes",reason=FieldValueForbidden
// +kubebuilder:validation:XValidation:rule="(has(self.allowNodesWithoutReplicaScheduling) && self.allowNodesWithoutReplicaScheduling) == (has(oldSelf.allowNodesWithoutReplicaScheduling) && oldSelf.allowNodesWithoutReplicaScheduling)",message="spec.allowNodesWithoutReplicaScheduling is immutable",fieldPath=".allowNodesWithoutReplicaScheduling",reason=FieldValueForbidden
// +kubebuilder:validation:XValidation:rule="(has(self.initiatorPolicy) ? self.initiatorPolicy : 'wait') == (has(oldSelf.initiatorPolicy) ? oldSelf.initiatorPolicy : 'wait')",message="spec.initiatorPolicy is immutable",fieldPath=".initiatorPolicy",reason=FieldValueForbidden
// +kubebuilder:validation:XValidation:rule="(has(self.replicaPolicy) ? self.replicaPolicy : 'rebuild') == (has(oldSelf.replicaPolicy) ? oldSelf.replicaPolicy : 'rebuild')",message="spec.replicaPolicy is immutable",fieldPath=".replicaPolicy",reason=FieldValueForbidden
type DataEngineUpgradeManagerSpec struct {
	// DataEngine is the data engine to upgrade. Only v2 is supported.
	//
	// +required
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.dataEngine is immutable",reason=FieldValueForbidden
	DataEngine DataEngineType `json:"dataEngine"`

	// Nodes lists the nodes to upgrade, by Kubernetes node name. Empty means
	// every node running the v2 data engine. Names must be unique and valid
	// DNS-1123 subdomains; unknown nodes are refused at admission
	// and again by the controller.
	//
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=1000
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Nodes []string `json:"nodes,omitempty"`

	// AllowNodesWithoutReplicaScheduling accepts nodes to upgrade whose
	// Longhorn spec.allowScheduling is already false and that hold replicas
	// of attached v2 volumes. Their replicas are failed like any others,
	// but Longhorn never reuses a replica on a node that does not allow
	// scheduling: it rebuilds them on other nodes once its
	// replica-replenishment-wait-interval has passed, and on a cluster with
	// no node to take them the volumes stay degraded and the node's upgrade
	// waits at rebuilding-replica. Without it, such nodes refuse the upgrade
	// (precheck ReplicaSchedulingAllowed).
	//
	// +optional
	AllowNodesWithoutReplicaScheduling bool `json:"allowNodesWithoutReplicaScheduling,omitempty"`

	// InitiatorPolicy says what a node's upgrade does, on a Longhorn whose
	// initiators run in the instance manager of the node a volume is
	// attached to (v1.12), when the node holds initiators of attached v2
	// volumes. wait (the default): it stalls (InitiatorsOnNode), touching
	// nothing, until they are detached or moved. move-workloads: it moves
	// them itself, as a careful operator would: a NoSchedule taint of its
	// own on the node (never a cordon), then the pods that use a v2 volume
	// attached there are evicted through the Eviction API (so
	// PodDisruptionBudgets hold) and the share-manager pods of RWX v2 volumes
	// attached there are restarted elsewhere; nothing else is touched. A pod
	// that could not move (a DaemonSet's, one nothing recreates, one only
	// that node may run, one tolerating the taint) stalls the node with its
	// name before anything is moved. The taint comes off once the node's new
	// instance manager runs, and on cancel and error.
	//
	// +optional
	// +kubebuilder:default=wait
	InitiatorPolicy InitiatorPolicy `json:"initiatorPolicy,omitempty"`

	// ReplicaPolicy says how a node's upgrade treats the replicas it fails
	// on the node, of attached v2 volumes. rebuild (the default): they are
	// failed and Longhorn rebuilds them once the node's new instance
	// manager runs; meanwhile each such volume runs on one copy fewer than
	// its numberOfReplicas. add-first: before any replica of a volume that
	// would drop below its numberOfReplicas healthy replicas is failed, the
	// volume's numberOfReplicas is raised by one (its replicaAutoBalance and
	// dataLocality disabled for the duration), Longhorn builds one temporary
	// replica on another node, and the node waits for it to be healthy. The
	// temporary replica is kept for the whole upgrade, so each volume pays
	// one whole copy per upgrade; at the end (also on cancel and error)
	// numberOfReplicas is lowered first, then exactly that replica is
	// deleted, then the volume's settings recorded before are restored.
	// The cluster must have room for it: a node without a replica of the
	// volume that schedules v2 replicas, with the space; until Longhorn
	// places it the node waits, and reports the wait stalled past the
	// copy's expected time.
	//
	// +optional
	// +kubebuilder:default=rebuild
	ReplicaPolicy ReplicaPolicy `json:"replicaPolicy,omitempty"`
}

// ReplicaPolicy is how a node upgrade keeps the redundancy of the volumes
// whose replicas it fails.
//
// +kubebuilder:validation:Enum=rebuild;add-first
type ReplicaPolicy string

// The replica policies.
const (
	ReplicaPolicyRebuild  ReplicaPolicy = "rebuild"
	ReplicaPolicyAddFirst ReplicaPolicy = "add-first"
)

// InitiatorPolicy is what a node upgrade does with the initiators its
// instance manager cannot keep.
//
// +kubebuilder:validation:Enum=wait;move-workloads
type InitiatorPolicy string

// The initiator policies.
const (
	InitiatorPolicyWait          InitiatorPolicy = "wait"
	InitiatorPolicyMoveWorkloads InitiatorPolicy = "move-workloads"
)

// UpgradeNodeStatus is the manager's summary of one node's upgrade; the
// details are in the node's NodeDataEngineUpgrade.
type UpgradeNodeStatus struct {
	// State is the node's upgrade state.
	//
	// +optional
	State NodeUpgradeState `json:"state,omitempty"`

	// Message says what the node waits for or why it failed.
	//
	// +optional
	Message string `json:"message,omitempty"`
}

// DataEngineUpgradeManagerStatus is projected from the upgrade's event
// history; only the controller writes it, through the /status subresource.
type DataEngineUpgradeManagerStatus struct {
	// ObservedGeneration is the metadata.generation the status was computed
	// for.
	//
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// StreamSequence is the JetStream sequence of the last event folded into
	// this status. Writers compare it to skip stale projections; readers use
	// it to find the matching point of the history.
	//
	// +optional
	// +kubebuilder:validation:Minimum=0
	StreamSequence uint64 `json:"streamSequence,omitempty"`

	// State is the manager's state.
	//
	// +optional
	State UpgradeState `json:"state,omitempty"`

	// Message explains the state: what is being done, what blocks, or the
	// error.
	//
	// +optional
	Message string `json:"message,omitempty"`

	// InstanceManagerImage is the target instance-manager image, captured
	// from Longhorn's default image when the upgrade started, so that a later
	// change of the default does not move the target mid-upgrade.
	//
	// +optional
	InstanceManagerImage string `json:"instanceManagerImage,omitempty"`

	// UpgradingNode is the node being upgraded now, if any.
	//
	// +optional
	UpgradingNode string `json:"upgradingNode,omitempty"`

	// UpgradeNodes maps each node of the plan to its upgrade summary.
	//
	// +optional
	// +kubebuilder:validation:MaxProperties=1000
	UpgradeNodes map[string]UpgradeNodeStatus `json:"upgradeNodes,omitempty"`

	// CompletedNodes is the number of nodes of the plan whose upgrade
	// completed. It is kept next to TotalNodes for the printer columns, since
	// a column cannot count map entries.
	//
	// +optional
	// +kubebuilder:validation:Minimum=0
	CompletedNodes int32 `json:"completedNodes"`

	// TotalNodes is the number of nodes in the plan.
	//
	// +optional
	// +kubebuilder:validation:Minimum=0
	TotalNodes int32 `json:"totalNodes"`

	// Conditions hold the preconditions (DefaultImageOnAllNodesReady,
	// NodesKnown, NoVersionDrift, SingleActiveUpgrade, AtLeastTwoNodes,
	// VolumesHealthy) and the summary (Ready, Progressing, Stalled,
	// Degraded).
	//
	// +optional
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`
}

// DataEngineUpgradeManager asks for a live upgrade of the Longhorn V2 data
// engine, node by node, without interrupting volume I/O. Deleting it cancels
// the upgrade once the node in flight is back to a safe point.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=lhum,categories=longhorn;switchback
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.state`,description="The upgrade state"
// +kubebuilder:printcolumn:name="Upgrading Node",type=string,JSONPath=`.status.upgradingNode`,description="The node being upgraded"
// +kubebuilder:printcolumn:name="Completed",type=integer,JSONPath=`.status.completedNodes`,description="Nodes whose upgrade completed"
// +kubebuilder:printcolumn:name="Total",type=integer,JSONPath=`.status.totalNodes`,description="Nodes in the plan"
// +kubebuilder:printcolumn:name="Initiators",type=string,JSONPath=`.spec.initiatorPolicy`,priority=1,description="What a node does with initiators its instance manager cannot keep"
// +kubebuilder:printcolumn:name="Replicas",type=string,JSONPath=`.spec.replicaPolicy`,priority=1,description="How a node keeps the redundancy of the volumes whose replicas it fails"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type DataEngineUpgradeManager struct {
	metav1.TypeMeta `json:",inline"`
	// Standard object metadata.
	//
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the user's intent; immutable.
	//
	// +required
	Spec DataEngineUpgradeManagerSpec `json:"spec"`

	// Status is the projected progress of the upgrade.
	//
	// +optional
	Status DataEngineUpgradeManagerStatus `json:"status,omitempty"`
}

// DataEngineUpgradeManagerList is a list of DataEngineUpgradeManager.
//
// +kubebuilder:object:root=true
type DataEngineUpgradeManagerList struct {
	metav1.TypeMeta `json:",inline"`
	// Standard list metadata.
	//
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`

	// Items are the managers.
	Items []DataEngineUpgradeManager `json:"items"`
}
