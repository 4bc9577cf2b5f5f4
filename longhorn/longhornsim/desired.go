package longhornsim

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/longhorn"
)

// This file renders the simulator's state as Longhorn would show it in its
// objects: pure functions from sim's views to longhorn's typed structs. The
// adapter's mapping (longhorn/fields.go) reads these back; the tests check
// that the round trip gives the simulator's own view.

// finalizer keeps Longhorn's objects until the manager has cleaned up, as
// Longhorn's controllers do, so a deleted IM or replica is visible while
// its deletion is in progress.
const finalizer = "longhorn.io/cleanup"

// ManagedByLabel marks the Kubernetes Nodes a Manager created, with its
// namespace as value: Nodes are cluster-scoped, and the manager touches
// only its own.
const ManagedByLabel = "switchback.dev/longhornsim"

func condition(typ string, ok bool) longhorn.Condition {
	status := "False"
	if ok {
		status = "True"
	}
	return longhorn.Condition{Type: typ, Status: status}
}

func kubeNode(n dataplane.Node, namespace string) *longhorn.KubeNode {
	out := &longhorn.KubeNode{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: map[string]string{ManagedByLabel: namespace}},
		Status:     longhorn.KubeNodeStatus{Conditions: []longhorn.Condition{condition(longhorn.ConditionReady, n.Ready)}},
	}
	for _, img := range n.Images {
		out.Status.Images = append(out.Status.Images, longhorn.ContainerImage{Names: []string{img}})
	}
	return out
}

func longhornNode(n dataplane.Node, namespace string) *longhorn.LonghornNode {
	return &longhorn.LonghornNode{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, Namespace: namespace},
		Spec:       longhorn.LonghornNodeSpec{Name: n.Name, DataEngineUpgradeRequested: n.UpgradeRequested},
		Status:     longhorn.LonghornNodeStatus{Conditions: []longhorn.Condition{condition(longhorn.ConditionReady, n.Ready)}},
	}
}

func instanceManager(im dataplane.InstanceManager, namespace string) *longhorn.InstanceManager {
	return &longhorn.InstanceManager{
		ObjectMeta: metav1.ObjectMeta{Name: im.Name, Namespace: namespace, Finalizers: []string{finalizer}},
		Spec: longhorn.InstanceManagerSpec{
			NodeID: im.Node, Image: im.Image, DataEngine: dataplane.DataEngineV2, Type: longhorn.InstanceManagerTypeAllInOne,
		},
		// The simulator's IM states are Longhorn's words.
		Status: longhorn.InstanceManagerStatus{CurrentState: string(im.State)},
	}
}

// engineName is the name of a volume's single engine.
func engineName(volume string) string { return volume + "-e-0" }

// volume renders a volume. Longhorn reports robustness "unknown" for a
// detached volume.
func volume(v dataplane.Volume, namespace string) *longhorn.Volume {
	out := &longhorn.Volume{
		ObjectMeta: metav1.ObjectMeta{Name: v.Name, Namespace: namespace},
		Spec: longhorn.VolumeSpec{
			NodeID: v.AttachedNode, NumberOfReplicas: v.NumberOfReplicas, DataEngine: v.DataEngine,
			Image: v.Image, TargetNodeID: v.DesiredTargetNode,
		},
		Status: longhorn.VolumeStatus{
			State: longhorn.VolumeDetached, Robustness: string(dataplane.RobustnessUnknown),
			CurrentImage: v.Image,
		},
	}
	if v.Attached() {
		out.Status.State = longhorn.VolumeAttached
		out.Status.Robustness = string(v.Robustness)
		out.Status.CurrentNodeID = v.AttachedNode
		out.Status.CurrentTargetNodeID = v.TargetNode
	}
	return out
}

// engine renders the volume's engine: the replicas in service or
// rebuilding are in its address map, with RW or WO modes while attached.
func engine(v dataplane.Volume, namespace string) *longhorn.Engine {
	out := &longhorn.Engine{
		ObjectMeta: metav1.ObjectMeta{Name: engineName(v.Name), Namespace: namespace},
		Spec:       longhorn.EngineSpec{VolumeName: v.Name, NodeID: v.AttachedNode, DataEngine: v.DataEngine, Active: true},
		Status:     longhorn.EngineStatus{CurrentState: longhorn.StateStopped},
	}
	if v.Attached() {
		out.Status.CurrentState = longhorn.StateRunning
	}
	for _, r := range v.Replicas {
		mode := ""
		switch r.State {
		case dataplane.ReplicaRunning:
			mode = longhorn.ModeRW
		case dataplane.ReplicaRebuilding:
			mode = longhorn.ModeWO
		default:
			continue
		}
		if out.Spec.ReplicaAddressMap == nil {
			out.Spec.ReplicaAddressMap = map[string]string{}
		}
		out.Spec.ReplicaAddressMap[r.Name] = "tcp://" + r.Node + ":20001"
		if v.Attached() {
			if out.Status.ReplicaModeMap == nil {
				out.Status.ReplicaModeMap = map[string]string{}
			}
			out.Status.ReplicaModeMap[r.Name] = mode
		}
	}
	return out
}

// replica renders a replica as Longhorn shows each simulator state:
//
//   - running: an attached volume's replica runs; a detached volume's is
//     stopped, with healthyAt set (a healthy copy at rest);
//   - rebuilding: running, never healthy since (healthyAt cleared);
//   - stopped (failed on purpose): desireState stopped, failedAt set;
//   - error: currentState error, failedAt set.
//
// Stamps already set on the existing object are kept, so a replica does not
// change on every round; now is the stamp for new ones.
func replica(v dataplane.Volume, r dataplane.Replica, imName string, existing *longhorn.Replica, now, namespace string) *longhorn.Replica {
	out := &longhorn.Replica{
		ObjectMeta: metav1.ObjectMeta{Name: r.Name, Namespace: namespace, Finalizers: []string{finalizer}},
		Spec: longhorn.ReplicaSpec{
			NodeID: r.Node, VolumeName: v.Name, EngineName: engineName(v.Name), DataEngine: v.DataEngine,
		},
		Status: longhorn.ReplicaStatus{InstanceManagerName: imName},
	}
	keep := func(old, fresh string) string {
		if old != "" {
			return old
		}
		return fresh
	}
	var failedAt, healthyAt string
	if existing != nil {
		failedAt, healthyAt = existing.Spec.FailedAt, existing.Spec.HealthyAt
	}
	switch r.State {
	case dataplane.ReplicaRunning:
		out.Spec.HealthyAt = keep(healthyAt, now)
		if v.Attached() {
			out.Spec.DesireState, out.Status.CurrentState = longhorn.StateRunning, longhorn.StateRunning
		} else {
			out.Spec.DesireState, out.Status.CurrentState = longhorn.StateStopped, longhorn.StateStopped
		}
	case dataplane.ReplicaRebuilding:
		out.Spec.DesireState, out.Status.CurrentState = longhorn.StateRunning, longhorn.StateRunning
	case dataplane.ReplicaStopped:
		out.Spec.DesireState, out.Status.CurrentState = longhorn.StateStopped, longhorn.StateStopped
		out.Spec.FailedAt, out.Spec.HealthyAt = keep(failedAt, now), healthyAt
	default: // error
		out.Spec.DesireState, out.Status.CurrentState = longhorn.StateStopped, longhorn.StateError
		out.Spec.FailedAt, out.Spec.HealthyAt = keep(failedAt, now), healthyAt
	}
	return out
}

// sameReplicaSpec compares what the manager owns of a replica's spec;
// stamps are compared by presence only.
func sameReplicaSpec(a, b longhorn.ReplicaSpec) bool {
	return a.DesireState == b.DesireState && (a.FailedAt == "") == (b.FailedAt == "") &&
		(a.HealthyAt == "") == (b.HealthyAt == "") && a.NodeID == b.NodeID && a.VolumeName == b.VolumeName
}
