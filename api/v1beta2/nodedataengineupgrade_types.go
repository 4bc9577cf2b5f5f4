package v1beta2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodeDataEngineUpgradeSpec names the node to upgrade and fixes the target.
// Every field is immutable: the controller creates the object from the
// manager's plan, and a change would make the recorded history disagree with
// what is being done on the node.
type NodeDataEngineUpgradeSpec struct {
	// NodeID is the Kubernetes name of the node to upgrade.
	//
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.nodeID is immutable",reason=FieldValueForbidden
	NodeID string `json:"nodeID"`

	// DataEngine is the data engine to upgrade; only v2.
	//
	// +required
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.dataEngine is immutable",reason=FieldValueForbidden
	DataEngine DataEngineType `json:"dataEngine"`

	// InstanceManagerImage is the instance-manager image the node is moved
	// to.
	//
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.instanceManagerImage is immutable",reason=FieldValueForbidden
	InstanceManagerImage string `json:"instanceManagerImage"`

	// DataEngineUpgradeManager is the name of the manager, in the same
	// namespace, this node upgrade belongs to.
	//
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.dataEngineUpgradeManager is immutable",reason=FieldValueForbidden
	DataEngineUpgradeManager string `json:"dataEngineUpgradeManager"`
}

// VolumeUpgradeStatus is the state of one volume concerned by a node's
// upgrade.
type VolumeUpgradeStatus struct {
	// State is the volume's state.
	//
	// +optional
	State VolumeUpgradeState `json:"state,omitempty"`

	// Message says what the volume waits for, what blocks it, or why it
	// failed.
	//
	// +optional
	Message string `json:"message,omitempty"`
}

// NodeDataEngineUpgradeStatus is projected from the node's event history;
// only the controller writes it, through the /status subresource.
type NodeDataEngineUpgradeStatus struct {
	// ObservedGeneration is the metadata.generation the status was computed
	// for.
	//
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// StreamSequence is the JetStream sequence of the last event folded into
	// this status.
	//
	// +optional
	// +kubebuilder:validation:Minimum=0
	StreamSequence uint64 `json:"streamSequence,omitempty"`

	// State is the step the node's upgrade is at.
	//
	// +optional
	State NodeUpgradeState `json:"state,omitempty"`

	// Message explains the state: what is being done, what blocks, or the
	// error.
	//
	// +optional
	Message string `json:"message,omitempty"`

	// Volumes maps each v2 volume concerned by this node to its state.
	//
	// +optional
	Volumes map[string]VolumeUpgradeStatus `json:"volumes,omitempty"`

	// VolumeCount is the number of entries in Volumes, kept for the printer
	// column since a column cannot count map entries.
	//
	// +optional
	// +kubebuilder:validation:Minimum=0
	VolumeCount int32 `json:"volumeCount"`

	// Rebuild sums the rebuilds of the volumes whose replicas the node's
	// upgrade failed, as its history recorded them; absent before any was
	// planned.
	//
	// +optional
	Rebuild *NodeRebuildStatus `json:"rebuild,omitempty"`

	// Conditions hold the node's summary (Ready, Progressing, Stalled,
	// Degraded) and the checks that apply to one node.
	//
	// +optional
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`
}

// NodeDataEngineUpgrade is the upgrade of the V2 data engine on one node. The
// controller creates one per node of a DataEngineUpgradeManager's plan, owned
// by the manager; users watch it, they do not create it.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=lhnu,categories=longhorn;switchback
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.spec.nodeID`,description="The node being upgraded"
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.state`,description="The node upgrade step"
// +kubebuilder:printcolumn:name="Volumes",type=integer,JSONPath=`.status.volumeCount`,description="Volumes concerned by this node"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type NodeDataEngineUpgrade struct {
	metav1.TypeMeta `json:",inline"`
	// Standard object metadata.
	//
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec fixes the node and the target; immutable.
	//
	// +required
	Spec NodeDataEngineUpgradeSpec `json:"spec"`

	// Status is the projected progress of the node's upgrade.
	//
	// +optional
	Status NodeDataEngineUpgradeStatus `json:"status,omitempty"`
}

// NodeDataEngineUpgradeList is a list of NodeDataEngineUpgrade.
//
// +kubebuilder:object:root=true
type NodeDataEngineUpgradeList struct {
	metav1.TypeMeta `json:",inline"`
	// Standard list metadata.
	//
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`

	// Items are the node upgrades.
	Items []NodeDataEngineUpgrade `json:"items"`
}

// NodeRebuildStatus is what a node's rebuilds were expected to copy and
// how long they were seen under way. Longhorn reports no byte count: the
// bytes are the plan's (a reused replica copies what was written since its
// hashed snapshots; an unhashed one, the volume's actual size).
type NodeRebuildStatus struct {
	// Volumes counts the volumes whose rebuild was planned; Hashed those
	// whose snapshots were hashed first; Finished those seen healthy again.
	//
	// +optional
	Volumes int32 `json:"volumes,omitempty"`
	// +optional
	Hashed int32 `json:"hashed,omitempty"`
	// +optional
	Finished int32 `json:"finished,omitempty"`

	// ExpectedBytes is what the rebuilds were expected to copy, FullBytes
	// what whole copies would have.
	//
	// +optional
	ExpectedBytes int64 `json:"expectedBytes,omitempty"`
	// +optional
	FullBytes int64 `json:"fullBytes,omitempty"`

	// Seconds is the time from the first rebuild seen under way to the
	// last seen over.
	//
	// +optional
	Seconds int64 `json:"seconds,omitempty"`

	// TemporaryReplicas counts the temporary replicas this node's upgrade
	// added (spec.replicaPolicy add-first), kept until the upgrade ends.
	//
	// +optional
	TemporaryReplicas int32 `json:"temporaryReplicas,omitempty"`
}
