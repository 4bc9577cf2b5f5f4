package longhorn

// This file is the adapter's only knowledge of Longhorn's API: resources,
// the fields read and written, how Longhorn's states map onto dataplane's,
// and the patch bodies. Where released Longhorn differs from the reviewed
// design (README.md, "Where Longhorn differs"), the difference is handled
// here and nowhere else, so a future Longhorn version changes one file.

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/switchback-dev/switchback/dataplane"
)

// GroupVersion is Longhorn's API group and version.
var GroupVersion = schema.GroupVersion{Group: "longhorn.io", Version: "v1beta2"}

// Resources read or written by the adapter. KubeNodesResource is the core
// Kubernetes Node (cluster-scoped); the others live in Longhorn's namespace.
var (
	NodesResource            = GroupVersion.WithResource("nodes")
	VolumesResource          = GroupVersion.WithResource("volumes")
	EnginesResource          = GroupVersion.WithResource("engines")
	ReplicasResource         = GroupVersion.WithResource("replicas")
	InstanceManagersResource = GroupVersion.WithResource("instancemanagers")
	SettingsResource         = GroupVersion.WithResource("settings")
	SnapshotsResource        = GroupVersion.WithResource("snapshots")
	KubeNodesResource        = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}
)

// Kind names, for objects built by the simulated manager.
const (
	KindNode            = "Node"
	KindVolume          = "Volume"
	KindEngine          = "Engine"
	KindReplica         = "Replica"
	KindInstanceManager = "InstanceManager"
	KindSetting         = "Setting"
	KindSnapshot        = "Snapshot"
)

// Names and values with a meaning in Longhorn.
const (
	// SettingDefaultInstanceManagerImage names the setting whose value is the
	// image new instance managers get: the upgrade's target.
	SettingDefaultInstanceManagerImage = "default-instance-manager-image"
	// ConditionReady is the Ready condition of Longhorn and Kubernetes nodes.
	ConditionReady = "Ready"
	// DisableV2Label on a Kubernetes node turns the v2 data engine off there.
	DisableV2Label = "node.longhorn.io/disable-v2-data-engine"
	// VolumeLabel is the label Longhorn puts on a volume's snapshots.
	VolumeLabel = "longhornvolume"
	// SnapshotNameAnnotation keeps the snapshot name the upgrade asked for on
	// the Snapshot object, whose own name must be unique per namespace
	// (see SnapshotObjectName).
	SnapshotNameAnnotation = "switchback.dev/snapshot-name"
	// InstanceManagerTypeAllInOne is the type of v2 instance managers: one
	// process holds the node's engines and replicas.
	InstanceManagerTypeAllInOne = "aio"
)

// Longhorn's instance states (replicas and engines: spec.desireState,
// status.currentState) and instance-manager states.
const (
	StateRunning  = "running"
	StateStarting = "starting"
	StateStopping = "stopping"
	StateStopped  = "stopped"
	StateError    = "error"
	StateUnknown  = "unknown"
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

// LonghornNodeSpec holds the node's upgrade flag.
type LonghornNodeSpec struct {
	Name string `json:"name"`
	// DataEngineUpgradeRequested is the design's flag: while set, Longhorn
	// schedules nothing new on the node's v2 engine. Not in released
	// Longhorn's schema (an apiserver with that schema prunes it; the
	// adapter detects this, see errFieldPruned).
	DataEngineUpgradeRequested bool `json:"dataEngineUpgradeRequested"`
}

// LonghornNodeStatus holds the node's conditions (Ready).
type LonghornNodeStatus struct {
	Conditions []Condition `json:"conditions"`
}

// KubeNode is a core Kubernetes Node, reduced to the fields used.
type KubeNode struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Status            KubeNodeStatus `json:"status"`
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

// Volume is a volumes.longhorn.io object, reduced to the fields used.
type Volume struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              VolumeSpec   `json:"spec"`
	Status            VolumeStatus `json:"status"`
}

// VolumeSpec is the desired placement of a volume.
type VolumeSpec struct {
	// NodeID is the node the volume is attached to (the initiator).
	NodeID           string `json:"nodeID"`
	NumberOfReplicas int    `json:"numberOfReplicas"`
	// DataEngine is v1 or v2; empty means v1 (Longhorn's default).
	DataEngine string `json:"dataEngine"`
	Image      string `json:"image"`
	// TargetNodeID is the design's target override. Not in released Longhorn.
	TargetNodeID string `json:"targetNodeID"`
}

// VolumeStatus is the observed state of a volume.
type VolumeStatus struct {
	State         string `json:"state"`
	Robustness    string `json:"robustness"`
	CurrentNodeID string `json:"currentNodeID"`
	// CurrentTargetNodeID is where the target runs, per the design. Not in
	// released Longhorn, where the target always runs on the attached node.
	CurrentTargetNodeID string `json:"currentTargetNodeID"`
	CurrentImage        string `json:"currentImage"`
}

// Engine is an engines.longhorn.io object, reduced to the fields used.
type Engine struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              EngineSpec   `json:"spec"`
	Status            EngineStatus `json:"status"`
}

// EngineSpec says which replicas the engine uses.
type EngineSpec struct {
	VolumeName string `json:"volumeName"`
	NodeID     string `json:"nodeID"`
	DataEngine string `json:"dataEngine"`
	// Active marks the engine serving the volume (a migration has two).
	Active bool `json:"active"`
	// ReplicaAddressMap lists the replicas (name → address) the engine
	// connects to; removing an entry takes the replica out of the engine.
	ReplicaAddressMap map[string]string `json:"replicaAddressMap"`
}

// EngineStatus reports the mode of each replica in the engine.
type EngineStatus struct {
	CurrentState   string            `json:"currentState"`
	ReplicaModeMap map[string]string `json:"replicaModeMap"`
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
	NodeID     string `json:"nodeID"`
	VolumeName string `json:"volumeName"`
	EngineName string `json:"engineName"`
	DataEngine string `json:"dataEngine"`
	// DesireState is running or stopped.
	DesireState string `json:"desireState"`
	// FailedAt is set (RFC 3339) when the replica failed or was failed on
	// purpose; Longhorn never counts such a replica as healthy again until
	// it clears the stamp to reuse it for a rebuild.
	FailedAt string `json:"failedAt"`
	// HealthyAt is set once the replica has held a full copy of the data.
	HealthyAt string `json:"healthyAt"`
}

// ReplicaStatus is the replica's instance state.
type ReplicaStatus struct {
	CurrentState        string `json:"currentState"`
	InstanceManagerName string `json:"instanceManagerName"`
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

// InstanceManagerStatus is the IM's state.
type InstanceManagerStatus struct {
	CurrentState string `json:"currentState"`
}

// Setting is a settings.longhorn.io object; its value is top-level.
type Setting struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Value             string `json:"value"`
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

// SnapshotStatus reports whether the snapshot was taken.
type SnapshotStatus struct {
	ReadyToUse   bool   `json:"readyToUse"`
	CreationTime string `json:"creationTime,omitempty"`
	Error        string `json:"error,omitempty"`
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
// given kind (KubeNode becomes a core v1 Node).
func ToUnstructured(obj any, kind string) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", kind, err)
	}
	u := &unstructured.Unstructured{Object: m}
	if _, ok := obj.(*KubeNode); ok {
		u.SetAPIVersion("v1")
	} else {
		u.SetAPIVersion(GroupVersion.String())
	}
	u.SetKind(kind)
	return u, nil
}

// SnapshotObjectName is the name of the Snapshot object for a snapshot named
// name of volume. Snapshot objects share one namespace while the upgrade
// names its snapshots per manager and node (the same name for every
// volume), so the volume goes into the object name; a long result is cut
// and made unique with a hash so it stays a valid name (at most 63
// characters, like Longhorn's own snapshot names).
func SnapshotObjectName(volume, name string) string {
	full := name + "-" + volume
	if len(full) <= 63 {
		return full
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(full)) // hash writes never fail
	sum := fmt.Sprintf("%08x", h.Sum32())
	return strings.TrimRight(full[:63-len(sum)-1], "-.") + "-" + sum
}

// ---- Reading: Longhorn → dataplane ----

func conditionTrue(conds []Condition, typ string) bool {
	for _, c := range conds {
		if c.Type == typ {
			return c.Status == "True"
		}
	}
	return false
}

// toNode maps a Longhorn node and its Kubernetes node. Ready needs both to
// say Ready: Longhorn's condition covers its own manager pod, the
// Kubernetes one the kubelet. A missing Kubernetes node is NotReady. The
// node runs the v2 engine when it has a v2 instance manager and is not
// labelled to disable it.
func toNode(ln *LonghornNode, kn *KubeNode, hasV2IM bool) dataplane.Node {
	n := dataplane.Node{
		Name:             ln.Name,
		Ready:            conditionTrue(ln.Status.Conditions, ConditionReady),
		V2:               hasV2IM,
		UpgradeRequested: ln.Spec.DataEngineUpgradeRequested,
	}
	if kn == nil {
		n.Ready = false
		return n
	}
	n.Ready = n.Ready && conditionTrue(kn.Status.Conditions, ConditionReady)
	if kn.Labels[DisableV2Label] == "true" {
		n.V2 = false
	}
	for _, img := range kn.Status.Images {
		for _, name := range img.Names {
			n.Images = append(n.Images, imageAliases(name)...)
		}
	}
	slices.Sort(n.Images)
	n.Images = slices.Compact(n.Images)
	return n
}

// imageAliases returns name and the shorter forms the Longhorn setting may
// use for it: the kubelet reports Docker Hub images fully qualified
// ("docker.io/longhornio/x:v1"), the setting usually does not
// ("longhornio/x:v1").
func imageAliases(name string) []string {
	out := []string{name}
	for _, prefix := range []string{"docker.io/", "index.docker.io/"} {
		if rest, ok := strings.CutPrefix(name, prefix); ok {
			out = append(out, rest)
			if short, ok := strings.CutPrefix(rest, "library/"); ok {
				out = append(out, short)
			}
		}
	}
	return out
}

// isV2 reports whether a data-engine field names the v2 engine; empty is v1,
// Longhorn's default.
func isV2(dataEngine string) bool { return dataEngine == dataplane.DataEngineV2 }

// dataEngineOf returns the engine a volume uses, "" read as v1.
func dataEngineOf(v *Volume) string {
	if v.Spec.DataEngine == "" {
		return "v1"
	}
	return v.Spec.DataEngine
}

// imState maps an instance manager's state. An IM being deleted is stopped
// whatever it last reported: the node step must not delete it again, and a
// target must not be moved onto it. "unknown" (Longhorn lost contact) and
// an IM with no state yet are starting: not running, and not failed either,
// since only a sustained error may fail a node upgrade. A state this
// adapter does not know is also taken as starting, which stalls the step
// visibly rather than failing it.
func imState(im *InstanceManager) dataplane.IMState {
	if im.DeletionTimestamp != nil {
		return dataplane.IMStopped
	}
	switch im.Status.CurrentState {
	case StateRunning:
		return dataplane.IMRunning
	case StateStopped:
		return dataplane.IMStopped
	case StateError:
		return dataplane.IMError
	default: // starting, unknown, "", anything new
		return dataplane.IMStarting
	}
}

func toInstanceManager(im *InstanceManager) dataplane.InstanceManager {
	return dataplane.InstanceManager{
		Name:       im.Name,
		Node:       im.Spec.NodeID,
		Image:      im.Spec.Image,
		DataEngine: im.Spec.DataEngine,
		State:      imState(im),
	}
}

// replicaState maps a replica. mode is its entry in the active engine's
// replicaModeMap ("" when absent), attached whether its volume is attached.
//
//   - failedAt set: the replica failed or was failed on purpose, and is never
//     healthy: error if its instance is in error, else stopped (it is, or is
//     being, stopped: Longhorn stops it and the step may delete it).
//   - an attached volume's running replica is what its engine says: RW
//     running, WO rebuilding, ERR error; not in the engine yet, it is
//     running if it was ever healthy (the engine status lags), else
//     rebuilding.
//   - a detached volume's replicas are stopped by Longhorn; one that held a
//     full copy (healthyAt set, not failed) is a healthy copy at rest and
//     reported running, as dataplane asks (see its package comment).
//   - starting is rebuilding (it is being brought in); stopping is stopped;
//     error, unknown (lost contact) and states this adapter does not know
//     are error: never counted as a healthy copy.
func replicaState(r *Replica, mode string, attached bool) dataplane.ReplicaState {
	if r.Spec.FailedAt != "" {
		if r.Status.CurrentState == StateError {
			return dataplane.ReplicaError
		}
		return dataplane.ReplicaStopped
	}
	healthyBefore := r.Spec.HealthyAt != ""
	switch r.Status.CurrentState {
	case StateRunning:
		if !attached {
			if healthyBefore {
				return dataplane.ReplicaRunning
			}
			return dataplane.ReplicaRebuilding
		}
		switch mode {
		case ModeRW:
			return dataplane.ReplicaRunning
		case ModeWO:
			return dataplane.ReplicaRebuilding
		case ModeERR:
			return dataplane.ReplicaError
		}
		if healthyBefore {
			return dataplane.ReplicaRunning
		}
		return dataplane.ReplicaRebuilding
	case StateStopped, "":
		if !attached && healthyBefore {
			return dataplane.ReplicaRunning
		}
		return dataplane.ReplicaStopped
	case StateStarting:
		return dataplane.ReplicaRebuilding
	case StateStopping:
		return dataplane.ReplicaStopped
	default: // error, unknown, anything new
		return dataplane.ReplicaError
	}
}

// attachedNode is spec.nodeID. Longhorn ≥ 1.5 attaches through
// VolumeAttachment objects but still sets spec.nodeID; status.currentNodeID
// is taken only when spec.nodeID is empty while the volume still reports
// attached (a detach in flight keeps serving I/O until it completes).
func attachedNode(v *Volume) string {
	if v.Spec.NodeID != "" {
		return v.Spec.NodeID
	}
	if v.Status.State == VolumeAttached {
		return v.Status.CurrentNodeID
	}
	return ""
}

// activeEngine picks the engine serving the volume: the active one, else the
// one on the attached node, else any (sorted, for determinism).
func activeEngine(engines []*Engine, attached string) *Engine {
	var onNode, first *Engine
	for _, e := range engines {
		if e.DeletionTimestamp != nil {
			continue
		}
		if e.Spec.Active {
			return e
		}
		if onNode == nil && attached != "" && e.Spec.NodeID == attached {
			onNode = e
		}
		if first == nil {
			first = e
		}
	}
	if onNode != nil {
		return onNode
	}
	return first
}

// toVolume maps a volume with its replicas and engines (any order).
//
// The target is status.currentTargetNodeID; when Longhorn does not report
// it (released Longhorn has no such field) the target is on the attached
// node, where released Longhorn always runs the engine. A detached volume
// has no target. Replicas being deleted are left out: they serve nothing
// and the step that deleted them must see them gone. Robustness is
// Longhorn's for an attached volume; for a detached one, for which Longhorn
// says "unknown", it is computed from the replicas as dataplane asks.
func toVolume(v *Volume, replicas []*Replica, engines []*Engine) dataplane.Volume {
	out := dataplane.Volume{
		Name:              v.Name,
		DataEngine:        dataEngineOf(v),
		NumberOfReplicas:  v.Spec.NumberOfReplicas,
		AttachedNode:      attachedNode(v),
		DesiredTargetNode: v.Spec.TargetNodeID,
		Image:             v.Spec.Image,
	}
	if out.AttachedNode != "" {
		out.TargetNode = v.Status.CurrentTargetNodeID
		if out.TargetNode == "" {
			out.TargetNode = out.AttachedNode
		}
	}
	var modes map[string]string
	if e := activeEngine(engines, out.AttachedNode); e != nil {
		modes = e.Status.ReplicaModeMap
	}
	sorted := slices.Clone(replicas)
	slices.SortFunc(sorted, func(a, b *Replica) int { return strings.Compare(a.Name, b.Name) })
	for _, r := range sorted {
		if r.DeletionTimestamp != nil {
			continue
		}
		out.Replicas = append(out.Replicas, dataplane.Replica{
			Name:  r.Name,
			Node:  r.Spec.NodeID,
			State: replicaState(r, modes[r.Name], out.AttachedNode != ""),
		})
	}
	if out.AttachedNode != "" {
		out.Robustness = robustness(v.Status.Robustness)
	} else {
		out.Robustness = computedRobustness(out)
	}
	return out
}

func robustness(s string) dataplane.Robustness {
	switch r := dataplane.Robustness(s); r {
	case dataplane.RobustnessHealthy, dataplane.RobustnessDegraded, dataplane.RobustnessFaulted:
		return r
	default:
		return dataplane.RobustnessUnknown
	}
}

// computedRobustness is Longhorn's rule applied to replica states: healthy
// with every desired replica running, faulted with none.
func computedRobustness(v dataplane.Volume) dataplane.Robustness {
	running := v.HealthyReplicas()
	switch {
	case running == 0:
		return dataplane.RobustnessFaulted
	case running < v.NumberOfReplicas:
		return dataplane.RobustnessDegraded
	default:
		return dataplane.RobustnessHealthy
	}
}

// ---- Writing: the patch bodies ----

// mergePatch marshals a JSON merge patch (RFC 7386). The maps are built
// here from literals, so marshalling cannot fail.
func mergePatch(m map[string]any) []byte {
	b, err := json.Marshal(m)
	if err != nil {
		panic(fmt.Sprintf("longhorn: marshal patch: %v", err))
	}
	return b
}

// withResourceVersion adds a resourceVersion precondition to a merge patch:
// the apiserver refuses it with a Conflict if the object changed since it
// was read, so a decision taken on the object read holds when applied.
func withResourceVersion(m map[string]any, rv string) map[string]any {
	m["metadata"] = map[string]any{"resourceVersion": rv}
	return m
}

func patchNodeUpgradeRequested(requested bool) []byte {
	return mergePatch(map[string]any{"spec": map[string]any{"dataEngineUpgradeRequested": requested}})
}

func patchTargetNode(node string) []byte {
	return mergePatch(map[string]any{"spec": map[string]any{"targetNodeID": node}})
}

// patchVolumeImage carries the resourceVersion the volume was seen detached
// at: a volume attached meanwhile makes it fail instead of changing the
// image under a running engine.
func patchVolumeImage(image, rv string) []byte {
	return mergePatch(withResourceVersion(map[string]any{"spec": map[string]any{"image": image}}, rv))
}

// patchFailReplica is what Longhorn itself does to fail a replica: stop its
// instance (desireState) and stamp it failed (failedAt), which keeps it from
// being counted healthy or reused until Longhorn decides to rebuild it.
// failedAt is only written when not set, so repeating the call keeps the
// first stamp; the resourceVersion makes the decision atomic.
func patchFailReplica(failedAt, rv string) []byte {
	spec := map[string]any{"desireState": StateStopped}
	if failedAt != "" {
		spec["failedAt"] = failedAt
	}
	return mergePatch(withResourceVersion(map[string]any{"spec": spec}, rv))
}

// patchEngineDropReplica removes a replica from an engine's
// replicaAddressMap (null deletes a key in a merge patch), so the engine
// stops sending it I/O at once instead of when Longhorn's volume controller
// next reconciles the map from the failed stamp. Idempotent.
func patchEngineDropReplica(replica string) []byte {
	return mergePatch(map[string]any{"spec": map[string]any{"replicaAddressMap": map[string]any{replica: nil}}})
}

// newSnapshot is the Snapshot object asking Longhorn for a snapshot named
// name of volume.
func newSnapshot(namespace, volume, name string) *Snapshot {
	return &Snapshot{
		ObjectMeta: metav1.ObjectMeta{
			Name:        SnapshotObjectName(volume, name),
			Namespace:   namespace,
			Labels:      map[string]string{VolumeLabel: volume},
			Annotations: map[string]string{SnapshotNameAnnotation: name},
		},
		Spec: SnapshotSpec{Volume: volume, CreateSnapshot: true},
	}
}

// Fields the design adds and released Longhorn lacks; written values that
// come back empty mean the apiserver pruned them (see errFieldPruned).
const (
	fieldNodeUpgradeRequested = "spec.dataEngineUpgradeRequested"
	fieldVolumeTargetNode     = "spec.targetNodeID"
)
