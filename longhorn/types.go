package longhorn

// This file is the adapter's knowledge of Longhorn's API objects: resources,
// names with a meaning, and the wire types, reduced to the fields read or
// written (the volume's and its parts' in types_volume.go). mapping.go and
// mapping_volume.go turn them into dataplane's types; patches.go holds
// the bodies the actions write; detect.go tells the Longhorn versions apart.
// Field names and types are Longhorn v1.12.1's (docs/longhorn-evidence.md).

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is Longhorn's API group and version.
var GroupVersion = schema.GroupVersion{Group: "longhorn.io", Version: "v1beta2"}

// Resources read or written by the adapter. KubeNodesResource and
// EventsResource are core Kubernetes resources; the others live in
// Longhorn's namespace.
var (
	NodesResource            = GroupVersion.WithResource("nodes")
	VolumesResource          = GroupVersion.WithResource("volumes")
	EnginesResource          = GroupVersion.WithResource("engines")
	EngineFrontendsResource  = GroupVersion.WithResource("enginefrontends")
	ReplicasResource         = GroupVersion.WithResource("replicas")
	InstanceManagersResource = GroupVersion.WithResource("instancemanagers")
	SettingsResource         = GroupVersion.WithResource("settings")
	SnapshotsResource        = GroupVersion.WithResource("snapshots")
	// VolumeAttachmentsResource holds the attachment tickets Longhorn sets
	// a volume's spec.nodeID from (one object per volume, named after it).
	VolumeAttachmentsResource = GroupVersion.WithResource("volumeattachments")
	KubeNodesResource         = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}
	EventsResource            = schema.GroupVersionResource{Version: "v1", Resource: "events"}
	// PodsResource holds, in Longhorn's namespace, the longhorn-manager pods
	// (ManagerPodLabel).
	PodsResource = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
)

// Resources of Longhorn's own instance-manager upgrader (a Longhorn that
// updates IMs in place). Their presence decides the in-place profile
// (detect.go); their objects are listed by LonghornUpgrader, so that
// Switchback never races that upgrader.
var (
	InstanceManagerUpgradesResource        = GroupVersion.WithResource("instancemanagerupgrades")
	InstanceManagerUpgradeControlsResource = GroupVersion.WithResource("instancemanagerupgradecontrols")
)

// Kind names, for objects built by the simulated manager.
const (
	KindNode            = "Node"
	KindVolume          = "Volume"
	KindEngine          = "Engine"
	KindEngineFrontend  = "EngineFrontend"
	KindReplica         = "Replica"
	KindInstanceManager = "InstanceManager"
	KindSetting         = "Setting"
	KindSnapshot        = "Snapshot"
	KindEvent           = "Event"
	// KindInstanceManagerUpgrade and KindInstanceManagerUpgradeControl are
	// the kinds of Longhorn's own upgrader (in-place profile only).
	KindInstanceManagerUpgrade        = "InstanceManagerUpgrade"
	KindInstanceManagerUpgradeControl = "InstanceManagerUpgradeControl"
)

// Names and values with a meaning in Longhorn.
const (
	// SettingDefaultInstanceManagerImage names the setting whose value is the
	// image new instance managers get: the upgrade's target.
	SettingDefaultInstanceManagerImage = "default-instance-manager-image"
	// SettingCurrentLonghornVersion names the setting holding the installed
	// version ("v1.12.1"), written by Longhorn once its upgrade is done.
	SettingCurrentLonghornVersion = "current-longhorn-version"
	// SettingReplicaReplenishmentWaitInterval names the setting (seconds,
	// 600 by default) Longhorn waits from a volume's degradation before it
	// builds a new replica elsewhere while a failed one could be reused.
	SettingReplicaReplenishmentWaitInterval = "replica-replenishment-wait-interval"
	// DefaultReplicaReplenishmentWaitInterval is that setting's default.
	DefaultReplicaReplenishmentWaitInterval = 600 * time.Second
	// SettingFastReplicaRebuildEnabled names the data-engine-specific
	// setting whose v2 value lets Longhorn reuse failed v2 replicas: a JSON
	// object of "true"/"false" by engine, default both true
	// (LM@v1.12.1 types/setting.go:1589-1598).
	SettingFastReplicaRebuildEnabled = "fast-replica-rebuild-enabled"
	// UnknownReplicaPrefix starts the key under which an engine's mode map
	// lists a replica it still holds but no longer knows by name (a failed
	// replica being removed): UNKNOWN-tcp://<storageIP>:<port>.
	UnknownReplicaPrefix = "UNKNOWN-"
	// ForegroundDeletionFinalizer is the finalizer the apiserver puts on an
	// object deleted with foreground propagation, until its dependents
	// (an IM's pod) are gone.
	ForegroundDeletionFinalizer = "foregroundDeletion"
	// InstanceManagerUpgradeControlName is the name of the singleton
	// upgrade control of Longhorn's own upgrader (LM#4676:types/types.go).
	InstanceManagerUpgradeControlName = "longhorn-instance-manager-upgrade-control"
	// ManagerPodLabel and ManagerPodLabelValue select the longhorn-manager
	// pods of Longhorn's DaemonSet; ManagerContainer is their container and
	// ManagerIMImageFlag the flag naming the instance-manager image the
	// manager creates IMs of.
	ManagerPodLabel      = "app"
	ManagerPodLabelValue = "longhorn-manager"
	ManagerContainer     = "longhorn-manager"
	ManagerIMImageFlag   = "--instance-manager-image"
	// ConditionReady is the Ready condition of Longhorn and Kubernetes nodes.
	ConditionReady = "Ready"
	// ConditionSchedulable is a Longhorn disk's condition that it may take
	// replicas.
	ConditionSchedulable = "Schedulable"
	// DiskTypeBlock is the disk type of the v2 data engine.
	DiskTypeBlock = "block"
	// Settings the replica scheduler applies to every disk and volume
	// (LM@v1.12.1 types/setting.go:622-631, 690-713, 1021-1030), and their
	// defaults.
	SettingStorageOverProvisioningPercentage = "storage-over-provisioning-percentage"
	SettingStorageMinimalAvailablePercentage = "storage-minimal-available-percentage"
	SettingReplicaSoftAntiAffinity           = "replica-soft-anti-affinity"
	SettingReplicaZoneSoftAntiAffinity       = "replica-zone-soft-anti-affinity"
	DefaultStorageOverProvisioningPercentage = 100
	DefaultStorageMinimalAvailablePercentage = 25
	// DisableV2Label on a Kubernetes node turns the v2 data engine off there.
	DisableV2Label = "node.longhorn.io/disable-v2-data-engine"
	// VolumeLabel is the label Longhorn puts on a volume's engines,
	// replicas and snapshots.
	VolumeLabel = "longhornvolume"
	// SnapshotNameAnnotation keeps the snapshot name the upgrade asked for on
	// the Snapshot object, whose own name must be unique per namespace
	// (see SnapshotObjectName).
	SnapshotNameAnnotation = "switchback.dev/snapshot-name"
	// TargetAwayAnnotation on a Volume is the controller's record of its
	// target away (dataplane.TargetAway), "<node>,<engine node before>,<temporary
	// node>" (node names hold no comma). The workers' admission policy
	// (deploy/rbac/worker-admission-policy.yaml) reads it: the worker of
	// <node> may set spec.engineNodeID only to the temporary node (the
	// target leaving) or to the engine node before (coming home), and never
	// writes the annotation itself.
	TargetAwayAnnotation = "switchback.dev/target-away"
	// MultipathAnnotation is, on a Longhorn node, its kernel's
	// nvme_core.multipath (Y or N) as the node's worker read it from sysfs
	// (dataplane.HostReporter): Longhorn reads no such thing, and the
	// controller and `switchback plan` cannot read a node's kernel.
	MultipathAnnotation = "switchback.dev/nvme-multipath"
	// InstanceManagerTypeAllInOne is the type of v2 instance managers: one
	// process holds the node's engines, engine frontends and replicas.
	InstanceManagerTypeAllInOne = "aio"
	// DataEngineV1 is Longhorn's v1 engine; an empty spec.dataEngine means it.
	DataEngineV1 = "v1"
	// ReasonFailedSwitchover is the reason of the Warning Longhorn's
	// EngineFrontend controller records on an EngineFrontend whose target
	// switch failed; ReasonSwitchover that of the Normal one on success.
	ReasonFailedSwitchover = "FailedSwitchover"
	ReasonSwitchover       = "Switchover"
)

// Longhorn's instance states (replicas, engines, engine frontends:
// spec.desireState, status.currentState) and instance-manager states.
const (
	StateRunning   = "running"
	StateStarting  = "starting"
	StateStopping  = "stopping"
	StateStopped   = "stopped"
	StateError     = "error"
	StateUnknown   = "unknown"
	StateUpgrading = "upgrading" // an IM updating its image in place
)

// Volume states (status.state) that matter here.
const (
	VolumeAttached = "attached"
	VolumeDetached = "detached"
)

// Replica modes in an engine's status.replicaModeMap.
const (
	ModeRW  = "RW"  // in service
	ModeWO  = "WO"  // rebuilding: written to, not read from
	ModeERR = "ERR" // failed in the engine
)

// Condition is a status condition (Longhorn's and Kubernetes' share these
// fields).
type Condition struct {
	Type    string `json:"type"`
	Status  string `json:"status"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// LonghornNode is a nodes.longhorn.io object, reduced to the fields used.
type LonghornNode struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              LonghornNodeSpec   `json:"spec"`
	Status            LonghornNodeStatus `json:"status"`
}

// LonghornNodeSpec holds the node's replica scheduling switch, its tags
// and its disks.
type LonghornNodeSpec struct {
	Name string `json:"name"`
	// AllowScheduling: new replicas, and reuses of failed ones, may land on
	// the node.
	AllowScheduling bool `json:"allowScheduling"`
	// Tags are matched against a volume's nodeSelector.
	Tags []string `json:"tags,omitempty"`
	// Disks are the node's disks by name.
	Disks map[string]DiskSpec `json:"disks,omitempty"`
}

// DiskSpec is one disk of a node's spec: where replicas may be scheduled.
type DiskSpec struct {
	// Type is filesystem or block (DiskTypeBlock, the only type a v2
	// replica lands on).
	Type              string   `json:"diskType,omitempty"`
	Path              string   `json:"path,omitempty"`
	AllowScheduling   bool     `json:"allowScheduling"`
	EvictionRequested bool     `json:"evictionRequested"`
	StorageReserved   int64    `json:"storageReserved"`
	Tags              []string `json:"tags,omitempty"`
}

// LonghornNodeStatus holds the node's conditions (Ready), zone and disks'
// status.
type LonghornNodeStatus struct {
	Conditions []Condition `json:"conditions"`
	// Zone is the Kubernetes node's topology.kubernetes.io/zone.
	Zone string `json:"zone,omitempty"`
	// DiskStatus is each disk's status by the name in spec.disks.
	DiskStatus map[string]*DiskStatus `json:"diskStatus,omitempty"`
}

// DiskStatus is one disk's storage as Longhorn measured it, and its
// Schedulable condition.
type DiskStatus struct {
	Conditions       []Condition `json:"conditions,omitempty"`
	StorageAvailable int64       `json:"storageAvailable"`
	StorageScheduled int64       `json:"storageScheduled"`
	StorageMaximum   int64       `json:"storageMaximum"`
	DiskUUID         string      `json:"diskUUID,omitempty"`
}

// KubeNode is a core Kubernetes Node, reduced to the fields used.
type KubeNode struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              KubeNodeSpec   `json:"spec,omitempty"`
	Status            KubeNodeStatus `json:"status"`
}

// KubeNodeSpec holds the node's cordon: Longhorn creates no
// instance-manager pod on an unschedulable node.
type KubeNodeSpec struct {
	Unschedulable bool `json:"unschedulable,omitempty"`
	// Taints hold the taint moving a node's workloads puts on it.
	Taints []Taint `json:"taints,omitempty"`
}

// Taint is one of a Kubernetes node's spec.taints.
type Taint struct {
	Key    string `json:"key"`
	Value  string `json:"value,omitempty"`
	Effect string `json:"effect"`
}

// KubeNodeStatus holds the Ready condition and the images pulled on the node.
type KubeNodeStatus struct {
	Conditions []Condition      `json:"conditions"`
	Images     []ContainerImage `json:"images"`
}

// ContainerImage is one entry of a Node's status.images: the names (tags
// and digests) of one image present on the node.
type ContainerImage struct {
	Names []string `json:"names"`
}

// InstanceManager is an instancemanagers.longhorn.io object, reduced to the
// fields used.
type InstanceManager struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              InstanceManagerSpec   `json:"spec"`
	Status            InstanceManagerStatus `json:"status"`
}

// InstanceManagerSpec is the IM's node, image and engine.
type InstanceManagerSpec struct {
	NodeID     string `json:"nodeID"`
	Image      string `json:"image"`
	DataEngine string `json:"dataEngine"`
	Type       string `json:"type"`
}

// InstanceManagerStatus is the IM's state and the instances it runs, by
// instance name.
type InstanceManagerStatus struct {
	CurrentState            string                     `json:"currentState"`
	InstanceEngines         map[string]InstanceProcess `json:"instanceEngines,omitempty"`
	InstanceEngineFrontends map[string]InstanceProcess `json:"instanceEngineFrontends,omitempty"`
	InstanceReplicas        map[string]InstanceProcess `json:"instanceReplicas,omitempty"`
	// InstanceShards and InstanceShardGroups are erasure-coded shards
	// (experimental), which Longhorn does not count before removing an IM.
	InstanceShards      map[string]InstanceProcess `json:"instanceShards,omitempty"`
	InstanceShardGroups map[string]InstanceProcess `json:"instanceShardGroups,omitempty"`
}

// InstanceProcess is one instance an IM reports.
type InstanceProcess struct {
	Spec   InstanceProcessSpec   `json:"spec"`
	Status InstanceProcessStatus `json:"status"`
}

// InstanceProcessSpec names an instance.
type InstanceProcessSpec struct {
	Name       string `json:"name"`
	DataEngine string `json:"dataEngine,omitempty"`
}

// InstanceProcessStatus is an instance's state.
type InstanceProcessStatus struct {
	State string `json:"state"`
}

// Pod is a core Pod, reduced to the fields used: a longhorn-manager pod.
type Pod struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              PodSpec `json:"spec"`
}

// PodSpec is the node a pod runs on and its containers.
type PodSpec struct {
	NodeName   string      `json:"nodeName,omitempty"`
	Containers []Container `json:"containers"`
}

// Container is a container's name, image and command line.
type Container struct {
	Name    string   `json:"name"`
	Image   string   `json:"image,omitempty"`
	Command []string `json:"command,omitempty"`
	Args    []string `json:"args,omitempty"`
}

// Setting is a settings.longhorn.io object; its value is top-level.
type Setting struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Value             string `json:"value"`
}

// InstanceManagerUpgrade is an instancemanagerupgrades.longhorn.io object:
// Longhorn's own upgrader at work on one node (longhorn-manager PR #4676),
// reduced to the fields used.
type InstanceManagerUpgrade struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              InstanceManagerUpgradeSpec   `json:"spec"`
	Status            InstanceManagerUpgradeStatus `json:"status"`
}

// InstanceManagerUpgradeSpec names the node upgraded and the image it goes
// to. The CRD requires both; only NodeID is read (the simulated manager
// writes TargetImage).
type InstanceManagerUpgradeSpec struct {
	NodeID      string `json:"nodeID"`
	TargetImage string `json:"targetImage"`
}

// InstanceManagerUpgradeStatus is the upgrade's phase: pending,
// relocating-engines, waiting-for-source-im, waiting-for-healthy-volumes,
// restoring-engines, completed or failed ("" before Longhorn's controller
// took it up).
type InstanceManagerUpgradeStatus struct {
	State string `json:"state,omitempty"`
}

// InstanceManagerUpgradeControl is an instancemanagerupgradecontrols.longhorn.io
// object: the cycle of Longhorn's own upgrader over the nodes, a singleton
// named InstanceManagerUpgradeControlName, reduced to the fields used.
type InstanceManagerUpgradeControl struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              InstanceManagerUpgradeControlSpec   `json:"spec"`
	Status            InstanceManagerUpgradeControlStatus `json:"status"`
}

// InstanceManagerUpgradeControlSpec is the image the cycle upgrades to
// (written by the simulated manager, not read).
type InstanceManagerUpgradeControlSpec struct {
	TargetImage string `json:"targetImage,omitempty"`
}

// InstanceManagerUpgradeControlStatus is where the cycle is: the node it is
// on ("" when none) and the progress of each node.
type InstanceManagerUpgradeControlStatus struct {
	CurrentNode string                        `json:"currentNode,omitempty"`
	Nodes       map[string]UpgradeControlNode `json:"nodes,omitempty"`
}

// UpgradeControlNode is one node of the cycle; State is pending,
// in-progress, completed or failed.
type UpgradeControlNode struct {
	State string `json:"state"`
}

// Snapshot is a snapshots.longhorn.io object, reduced to the fields used.
type Snapshot struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              SnapshotSpec   `json:"spec"`
	Status            SnapshotStatus `json:"status"`
}

// SnapshotSpec asks Longhorn to take a snapshot of a volume.
type SnapshotSpec struct {
	Volume         string            `json:"volume"`
	CreateSnapshot bool              `json:"createSnapshot"`
	Labels         map[string]string `json:"labels,omitempty"`
}

// SnapshotStatus reports whether the snapshot was taken, where it sits in
// its volume's chain, its size and its checksum once hashed.
type SnapshotStatus struct {
	ReadyToUse   bool   `json:"readyToUse"`
	CreationTime string `json:"creationTime,omitempty"`
	Error        string `json:"error,omitempty"`
	Parent       string `json:"parent,omitempty"`
	MarkRemoved  bool   `json:"markRemoved,omitempty"`
	UserCreated  bool   `json:"userCreated,omitempty"`
	Size         int64  `json:"size,omitempty"`
	Checksum     string `json:"checksum,omitempty"`
}

// Event is a core Kubernetes Event, reduced to the fields used: Longhorn
// reports a failed switch-over only as a Warning on the EngineFrontend.
type Event struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	InvolvedObject    ObjectReference `json:"involvedObject"`
	Reason            string          `json:"reason"`
	Message           string          `json:"message"`
	Type              string          `json:"type"`
	Count             int             `json:"count,omitempty"`
	FirstTimestamp    metav1.Time     `json:"firstTimestamp,omitempty"`
	LastTimestamp     metav1.Time     `json:"lastTimestamp,omitempty"`
}

// ObjectReference names an Event's object.
type ObjectReference struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
}

// FromUnstructured converts u into out (a pointer to one of this file's
// types). Fields the types do not name are ignored, which is what lets the
// adapter read objects of any Longhorn version.
func FromUnstructured(u *unstructured.Unstructured, out any) error {
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.UnstructuredContent(), out); err != nil {
		return fmt.Errorf("decode %s %s: %w", u.GetKind(), u.GetName(), err)
	}
	return nil
}

// ToUnstructured converts one of this file's types into an object of the
// given kind (KubeNode becomes a core v1 Node, Event a core v1 Event).
func ToUnstructured(obj any, kind string) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", kind, err)
	}
	u := &unstructured.Unstructured{Object: m}
	switch obj.(type) {
	case *KubeNode, *Event, *Pod:
		u.SetAPIVersion("v1")
	default:
		u.SetAPIVersion(GroupVersion.String())
	}
	u.SetKind(kind)
	return u, nil
}
