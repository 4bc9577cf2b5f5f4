package longhorn

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Volume is a volumes.longhorn.io object, reduced to the fields used.
type Volume struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              VolumeSpec   `json:"spec"`
	Status            VolumeStatus `json:"status"`
}

// VolumeSpec is the desired placement of a volume.
type VolumeSpec struct {
	// NodeID is the node the volume is attached to: the initiator (the
	// EngineFrontend) runs there. Longhorn's VolumeAttachment controller
	// sets it from the attachment tickets.
	NodeID string `json:"nodeID"`
	// EngineNodeID is where the engine (the target) should run; "" follows
	// NodeID. Nothing in Longhorn v1.12 writes it: it is the switch-over's
	// knob.
	EngineNodeID     string `json:"engineNodeID"`
	NumberOfReplicas int    `json:"numberOfReplicas"`
	// DataEngine is v1 or v2; empty means v1 (Longhorn's default).
	DataEngine      string `json:"dataEngine,omitempty"`
	Image           string `json:"image"`
	Frontend        string `json:"frontend"`
	DisableFrontend bool   `json:"disableFrontend"`
	// AccessMode is rwo, rwop or rwx: an rwx volume that is not migratable
	// is served over NFS by a share-manager pod, and is attached where that
	// pod runs.
	AccessMode string `json:"accessMode,omitempty"`
	// Migratable volumes move between nodes by live migration.
	Migratable bool `json:"migratable,omitempty"`
	// DataLocality is disabled, best-effort or strict-local.
	DataLocality string `json:"dataLocality,omitempty"`
	// ReplicaAutoBalance is ignored (follow the setting
	// replica-auto-balance), disabled, least-effort or best-effort.
	ReplicaAutoBalance string `json:"replicaAutoBalance,omitempty"`
	// SnapshotDataIntegrity is ignored (follow the setting
	// snapshot-data-integrity), disabled, enabled or fast-check.
	SnapshotDataIntegrity string `json:"snapshotDataIntegrity,omitempty"`
	// SnapshotHashingRequestedAt asks for the on-demand hashing of every
	// user snapshot taken before it (RFC 3339).
	SnapshotHashingRequestedAt string `json:"snapshotHashingRequestedAt,omitempty"`
	// Size is the volume's size in bytes, an int64 Longhorn serves as a
	// string (format int64).
	Size string `json:"size,omitempty"`
	// NodeSelector and DiskSelector are the tags a node and a disk must
	// carry to hold a replica of the volume.
	NodeSelector []string `json:"nodeSelector,omitempty"`
	DiskSelector []string `json:"diskSelector,omitempty"`
	// ReplicaSoftAntiAffinity and ReplicaZoneSoftAntiAffinity are
	// ignored (follow the setting), enabled or disabled.
	ReplicaSoftAntiAffinity     string `json:"replicaSoftAntiAffinity,omitempty"`
	ReplicaZoneSoftAntiAffinity string `json:"replicaZoneSoftAntiAffinity,omitempty"`
}

// Longhorn's spec.accessMode and spec.dataLocality values a mapping reads.
const (
	AccessModeRWX           = "rwx"
	DataLocalityStrictLocal = "strict-local"
)

// VolumeAttachment is a volumeattachments.longhorn.io object, reduced to the
// fields used: who asks for the volume to be attached where.
type VolumeAttachment struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              VolumeAttachmentSpec `json:"spec"`
}

// VolumeAttachmentSpec names the volume and its attachment tickets by id.
type VolumeAttachmentSpec struct {
	Volume            string                      `json:"volume"`
	AttachmentTickets map[string]AttachmentTicket `json:"attachmentTickets,omitempty"`
}

// AttachmentTicket is one request to attach the volume to NodeID, by an
// attacher Type (csi-attacher, longhorn-api, snapshot-controller, …).
type AttachmentTicket struct {
	ID     string `json:"id"`
	Type   string `json:"type"`
	NodeID string `json:"nodeID"`
}

// VolumeStatus is the observed state of a volume.
type VolumeStatus struct {
	State         string `json:"state"`
	Robustness    string `json:"robustness"`
	CurrentNodeID string `json:"currentNodeID"`
	// CurrentEngineNodeID is where the active engine runs.
	CurrentEngineNodeID string `json:"currentEngineNodeID"`
	// SwitchoverState is the progress of an engine switch-over; "" when none.
	SwitchoverState string `json:"switchoverState"`
	CurrentImage    string `json:"currentImage"`
	// LastDegradedAt is when the volume last became degraded (RFC 3339);
	// "" while it is not.
	LastDegradedAt string `json:"lastDegradedAt"`
	// ActualSize is the bytes the volume's snapshots and head hold.
	ActualSize int64 `json:"actualSize,omitempty"`
	// LastOnDemandSnapshotHashingCompleteAt is set to
	// spec.snapshotHashingRequestedAt once that request is done.
	LastOnDemandSnapshotHashingCompleteAt string `json:"lastOnDemandSnapshotHashingCompleteAt,omitempty"`
}

// Engine is an engines.longhorn.io object, reduced to the fields used.
type Engine struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              EngineSpec   `json:"spec"`
	Status            EngineStatus `json:"status"`
}

// EngineSpec says where the engine runs and which replicas it uses.
type EngineSpec struct {
	VolumeName  string `json:"volumeName"`
	NodeID      string `json:"nodeID"`
	DataEngine  string `json:"dataEngine,omitempty"`
	Image       string `json:"image"`
	DesireState string `json:"desireState"`
	// Active marks the engine serving the volume (a switch-over has two).
	Active bool `json:"active"`
	// ReplicaAddressMap lists the replicas (name → address) the engine
	// connects to; Longhorn's volume controller owns it.
	ReplicaAddressMap map[string]string `json:"replicaAddressMap"`
}

// EngineStatus reports the engine's state, its target address and the mode
// of each replica.
type EngineStatus struct {
	CurrentState        string `json:"currentState"`
	InstanceManagerName string `json:"instanceManagerName"`
	// IP is the engine's pod IP, StorageIP the address its target listens
	// on (the storage network's, when one is set).
	IP             string            `json:"ip"`
	StorageIP      string            `json:"storageIP"`
	Port           int               `json:"port"`
	ReplicaModeMap map[string]string `json:"replicaModeMap"`
	// RebuildStatus is each rebuild under way, by the address of the
	// replica being rebuilt (tcp://ip:port).
	RebuildStatus map[string]*RebuildStatus `json:"rebuildStatus,omitempty"`
}

// RebuildStatus is one rebuild as an engine reports it.
type RebuildStatus struct {
	IsRebuilding bool   `json:"isRebuilding"`
	Progress     int    `json:"progress"`
	State        string `json:"state,omitempty"`
	Error        string `json:"error,omitempty"`
}

// EngineFrontend is an enginefrontends.longhorn.io object (the v2
// initiator), reduced to the fields used.
type EngineFrontend struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              EngineFrontendSpec   `json:"spec"`
	Status            EngineFrontendStatus `json:"status"`
}

// EngineFrontendSpec names the node the initiator runs on and the engine
// (target) it should be connected to.
type EngineFrontendSpec struct {
	VolumeName  string `json:"volumeName"`
	NodeID      string `json:"nodeID"`
	DataEngine  string `json:"dataEngine,omitempty"`
	Image       string `json:"image"`
	DesireState string `json:"desireState"`
	Frontend    string `json:"frontend"`
	EngineName  string `json:"engineName"`
	TargetIP    string `json:"targetIP"`
	TargetPort  int    `json:"targetPort"`
	Active      bool   `json:"active"`
}

// EngineFrontendStatus reports the initiator's state and the target it is
// connected to.
type EngineFrontendStatus struct {
	CurrentState        string `json:"currentState"`
	InstanceManagerName string `json:"instanceManagerName"`
	TargetIP            string `json:"targetIP"`
	TargetPort          int    `json:"targetPort"`
	// SwitchoverPhase is the last completed phase of a path switch; ""
	// when none is under way.
	SwitchoverPhase string `json:"switchoverPhase,omitempty"`
}

// Replica is a replicas.longhorn.io object, reduced to the fields used.
type Replica struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              ReplicaSpec   `json:"spec"`
	Status            ReplicaStatus `json:"status"`
}

// ReplicaSpec is the replica's placement, desired state and health stamps.
type ReplicaSpec struct {
	NodeID              string `json:"nodeID"`
	VolumeName          string `json:"volumeName"`
	EngineName          string `json:"engineName"`
	MigrationEngineName string `json:"migrationEngineName"`
	DataEngine          string `json:"dataEngine,omitempty"`
	Image               string `json:"image"`
	// DesireState is running or stopped.
	DesireState string `json:"desireState"`
	// FailedAt is set (RFC 3339) when the replica failed or was failed on
	// purpose; Longhorn never counts such a replica as healthy again until
	// it clears the stamp to reuse it for a rebuild. LastFailedAt goes with it.
	FailedAt     string `json:"failedAt"`
	LastFailedAt string `json:"lastFailedAt"`
	// HealthyAt is set once the replica has held a full copy of the data.
	HealthyAt string `json:"healthyAt"`
}

// ReplicaStatus is the replica's instance state and, while it runs, the
// address its NVMe-oF export listens on (an engine names a replica it is
// removing by it).
type ReplicaStatus struct {
	CurrentState        string `json:"currentState"`
	InstanceManagerName string `json:"instanceManagerName"`
	StorageIP           string `json:"storageIP,omitempty"`
	Port                int    `json:"port,omitempty"`
}
