package longhornsim

import (
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/longhorn"
	"github.com/switchback-dev/switchback/sim"
)

// This file renders the simulator's state as Longhorn v1.12.1 shows it in
// its objects: pure functions from sim's views to longhorn's typed structs.
// The adapter's mapping (longhorn/mapping.go) reads these back; the tests
// check that the round trip gives the simulator's own view.

// finalizer keeps Longhorn's replicas until the manager has cleaned up, as
// Longhorn's replica controller does, so a deleted replica is visible while
// its deletion is in progress. Instance managers have none: a background
// delete removes one at once (RuleIMPodLingers).
const finalizer = "longhorn.io"

// ManagedByLabel marks the Kubernetes Nodes a Manager created, with its
// namespace as value: Nodes are cluster-scoped, and the manager touches
// only its own.
const ManagedByLabel = "switchback.dev/longhornsim"

// enginePort is the NVMe/TCP port of every simulated engine.
const enginePort = 20001

func condition(typ string, ok bool) longhorn.Condition {
	status := "False"
	if ok {
		status = "True"
	}
	return longhorn.Condition{Type: typ, Status: status}
}

func kubeNode(n dataplane.Node, namespace string) *longhorn.KubeNode {
	out := &longhorn.KubeNode{
		// The kubelet labels its node with its hostname.
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: map[string]string{ManagedByLabel: namespace, corev1.LabelHostname: n.Name}},
		Spec:       longhorn.KubeNodeSpec{Unschedulable: n.Cordoned},
		Status:     longhorn.KubeNodeStatus{Conditions: []longhorn.Condition{condition(longhorn.ConditionReady, n.Ready)}},
	}
	for _, img := range n.Images {
		out.Status.Images = append(out.Status.Images, longhorn.ContainerImage{Names: []string{img}})
	}
	return out
}

// servedNodeStatus is a Node's status as the simulated kubelet reports
// it: what the adapter reads, and the capacity a scheduler needs before it
// places a pod there (a node without allocatable pods takes none).
type servedNodeStatus struct {
	longhorn.KubeNodeStatus
	Capacity    map[string]string `json:"capacity"`
	Allocatable map[string]string `json:"allocatable"`
}

func nodeStatus(st longhorn.KubeNodeStatus) servedNodeStatus {
	capacity := map[string]string{"cpu": "16", "memory": "64Gi", "pods": "110"}
	return servedNodeStatus{KubeNodeStatus: st, Capacity: capacity, Allocatable: capacity}
}

// managerPod renders the node's longhorn-manager pod of Longhorn's
// DaemonSet, with the --instance-manager-image it runs with.
func managerPod(n dataplane.Node, namespace string) *longhorn.Pod {
	return &longhorn.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "longhorn-manager-" + n.Name, Namespace: namespace,
			Labels: map[string]string{longhorn.ManagerPodLabel: longhorn.ManagerPodLabelValue, ManagedByLabel: namespace}},
		Spec: longhorn.PodSpec{NodeName: n.Name, Containers: []longhorn.Container{{
			Name: longhorn.ManagerContainer, Image: "longhornio/longhorn-manager",
			Command: []string{"longhorn-manager", "-d", "daemon", longhorn.ManagerIMImageFlag, n.ManagerIMImage},
		}}},
	}
}

func longhornNode(n dataplane.Node, namespace string) *longhorn.LonghornNode {
	return &longhorn.LonghornNode{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, Namespace: namespace, Annotations: multipathAnnotation(n.NVMeMultipath)},
		Spec:       longhorn.LonghornNodeSpec{Name: n.Name, AllowScheduling: n.AllowScheduling, Tags: n.Tags, Disks: diskSpecs(n)},
		Status: longhorn.LonghornNodeStatus{Conditions: []longhorn.Condition{condition(longhorn.ConditionReady, n.Ready)},
			Zone: n.Zone, DiskStatus: diskStatus(n)},
	}
}

// diskSpecs and diskStatus render a node's disks as Longhorn's node
// controller reports them; none when the node has none.
func diskSpecs(n dataplane.Node) map[string]longhorn.DiskSpec {
	if len(n.Disks) == 0 {
		return nil
	}
	out := make(map[string]longhorn.DiskSpec, len(n.Disks))
	for _, d := range n.Disks {
		spec := longhorn.DiskSpec{Path: "/dev/" + d.Name, AllowScheduling: d.Schedulable, StorageReserved: d.StorageReserved, Tags: d.Tags}
		if d.Block {
			spec.Type = longhorn.DiskTypeBlock
		}
		out[d.Name] = spec
	}
	return out
}

func diskStatus(n dataplane.Node) map[string]*longhorn.DiskStatus {
	if len(n.Disks) == 0 {
		return nil
	}
	out := make(map[string]*longhorn.DiskStatus, len(n.Disks))
	for _, d := range n.Disks {
		out[d.Name] = &longhorn.DiskStatus{Conditions: []longhorn.Condition{condition(longhorn.ConditionSchedulable, d.Schedulable)},
			StorageAvailable: d.StorageAvailable, StorageScheduled: d.StorageScheduled, StorageMaximum: d.StorageMaximum, DiskUUID: n.Name + "-" + d.Name}
	}
	return out
}

// multipathAnnotation is the node's nvme_core.multipath as its worker
// would report it (none when unknown).
func multipathAnnotation(m dataplane.Multipath) map[string]string {
	if m == dataplane.MultipathUnknown {
		return nil
	}
	return map[string]string{longhorn.MultipathAnnotation: string(m)}
}

// instanceManager renders an IM with its status maps: Longhorn reports the
// instances of a running IM only.
func instanceManager(im dataplane.InstanceManager, in sim.IMInstances, namespace string) *longhorn.InstanceManager {
	out := &longhorn.InstanceManager{
		ObjectMeta: metav1.ObjectMeta{Name: im.Name, Namespace: namespace},
		Spec: longhorn.InstanceManagerSpec{
			NodeID: im.Node, Image: im.Image, DataEngine: dataplane.DataEngineV2, Type: longhorn.InstanceManagerTypeAllInOne,
		},
		// The simulator's IM states are Longhorn's words.
		Status: longhorn.InstanceManagerStatus{CurrentState: string(im.State)},
	}
	if im.State != dataplane.IMRunning {
		return out
	}
	procs := func(names []string) map[string]longhorn.InstanceProcess {
		if len(names) == 0 {
			return nil
		}
		m := make(map[string]longhorn.InstanceProcess, len(names))
		for _, n := range names {
			m[n] = longhorn.InstanceProcess{
				Spec:   longhorn.InstanceProcessSpec{Name: n, DataEngine: dataplane.DataEngineV2},
				Status: longhorn.InstanceProcessStatus{State: longhorn.StateRunning},
			}
		}
		return m
	}
	var engines, frontends []string
	for _, v := range in.Engines {
		engines = append(engines, engineName(v, im.Node))
	}
	for _, v := range in.NewEngines {
		engines = append(engines, engineName(v, im.Node))
	}
	for _, v := range in.Frontends {
		frontends = append(frontends, frontendName(v))
	}
	out.Status.InstanceEngines = procs(engines)
	out.Status.InstanceEngineFrontends = procs(frontends)
	out.Status.InstanceReplicas = procs(in.Replicas)
	var shards []string
	for i := range im.Shards {
		shards = append(shards, fmt.Sprintf("%s-shard-%d", im.Node, i))
	}
	out.Status.InstanceShards = procs(shards)
	return out
}

// engineName is the name of a volume's engine on a node: Longhorn names
// engines <volume>-e-<suffix>, and a switch-over creates a second engine on
// the destination, which then stays. A detached volume's engine, stopped,
// is on no node.
func engineName(volume, node string) string {
	if node == "" {
		return volume + "-e-0"
	}
	return volume + "-e-" + node
}

// frontendName is the name of a volume's EngineFrontend (Longhorn names them
// <volume>-ef-<n>).
func frontendName(volume string) string { return volume + "-ef-0" }

// engineIP is the made-up storage IP of a node: the address engines and
// replicas listen on, which EngineFrontends name.
func engineIP(node string) string { return madeUpIP(node, 10) }

// podIP is the made-up pod IP of a node's instance manager: the storage IP
// unless the cluster has a storage network.
func podIP(node string, storageNetwork bool) string {
	if !storageNetwork {
		return engineIP(node)
	}
	return madeUpIP(node, 172)
}

func madeUpIP(node string, first byte) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(node)) // hash writes never fail
	sum := h.Sum32()
	return fmt.Sprintf("%d.%d.%d.%d", first, byte(sum>>16), byte(sum>>8), byte(sum)|1)
}

// replicaPort is the NVMe-oF port of every simulated replica.
const replicaPort = 20002

// replicaAddress is where a replica on node listens.
func replicaAddress(node string) string { return fmt.Sprintf("%s:%d", engineIP(node), replicaPort) }

// render is what the simulated manager renders objects with beyond the
// simulator's views: the Longhorn version's address field (RuleV1120TargetIP)
// and whether engines have a storage network.
type render struct {
	// v1120 targets initiators at the engine's pod IP, as v1.12.0 does.
	v1120          bool
	storageNetwork bool
}

// targetIP is where an initiator is pointed at an engine on node.
func (r render) targetIP(node string) string {
	if r.v1120 {
		return podIP(node, r.storageNetwork)
	}
	return engineIP(node)
}

// dataEngine is the value Longhorn stores: "v1" or "v2", never empty.
func dataEngine(v dataplane.Volume) string {
	if v.DataEngine == dataplane.DataEngineV2 {
		return dataplane.DataEngineV2
	}
	return longhorn.DataEngineV1
}

// volume renders a volume. Longhorn reports robustness "unknown" for a
// detached volume, and no engine node.
func volume(v dataplane.Volume, vi sim.VolumeInstances, namespace string) *longhorn.Volume {
	out := &longhorn.Volume{
		ObjectMeta: metav1.ObjectMeta{Name: v.Name, Namespace: namespace},
		Spec: longhorn.VolumeSpec{
			NodeID: v.AttachedNode, EngineNodeID: v.EngineNode, NumberOfReplicas: v.NumberOfReplicas,
			DataEngine: dataEngine(v), Frontend: v.Frontend, DisableFrontend: v.Frontend == "",
			ReplicaAutoBalance: v.ReplicaAutoBalance, DataLocality: v.DataLocality,
		},
		Status: longhorn.VolumeStatus{State: longhorn.VolumeDetached, Robustness: string(dataplane.RobustnessUnknown),
			ActualSize: v.ActualSize, LastOnDemandSnapshotHashingCompleteAt: v.Hashing.CompletedAt},
	}
	if v.Size > 0 {
		out.Spec.Size = strconv.FormatInt(v.Size, 10)
	}
	out.Spec.SnapshotDataIntegrity = longhorn.SnapshotDataIntegrityIgnored
	if v.Hashing.Disabled {
		out.Spec.SnapshotDataIntegrity = longhorn.SnapshotDataIntegrityDisabled
	}
	if v.ShareManager {
		out.Spec.AccessMode = longhorn.AccessModeRWX
	}
	if v.Attached() {
		out.Status.State = longhorn.VolumeAttached
		out.Status.Robustness = string(v.Robustness)
		out.Status.CurrentNodeID = v.AttachedNode
		out.Status.CurrentEngineNodeID = v.TargetNode
		out.Status.SwitchoverState = string(v.Switchover)
		if !vi.DegradedAt.IsZero() {
			out.Status.LastDegradedAt = vi.DegradedAt.UTC().Format(time.RFC3339)
		}
	}
	return out
}

// engines renders the volume's engines: one, and during a switch-over a
// second on the destination, not active until it ends. The active engine's
// address map lists the replicas in service or rebuilding in it (a failed
// one leaves it at once); its mode map lists them RW or WO, a failed
// replica it still holds under its address (UNKNOWN-tcp://ip:port) while it
// removes it, and a replica whose link died under its name, ERR. The new
// engine of a switch-over holds the replicas in service.
func engines(v dataplane.Volume, vi sim.VolumeInstances, r render, namespace string) []*longhorn.Engine {
	cur := &longhorn.Engine{
		ObjectMeta: metav1.ObjectMeta{Name: engineName(v.Name, v.TargetNode), Namespace: namespace,
			Labels: map[string]string{longhorn.VolumeLabel: v.Name}},
		Spec: longhorn.EngineSpec{VolumeName: v.Name, NodeID: v.TargetNode, DataEngine: dataEngine(v),
			DesireState: longhorn.StateStopped, Active: true},
		Status: longhorn.EngineStatus{CurrentState: longhorn.StateStopped},
	}
	serving := map[string]string{}
	modes := map[string]string{}
	for _, rep := range v.Replicas {
		switch {
		case rep.Failed && rep.InEngine && slices.Contains(vi.DeadLinks, rep.Name):
			modes[rep.Name] = longhorn.ModeERR
		case rep.Failed && rep.InEngine:
			modes[longhorn.UnknownReplicaPrefix+"tcp://"+replicaAddress(rep.Node)] = longhorn.ModeRW
		case rep.Failed || !rep.InEngine:
		case rep.State == dataplane.ReplicaRunning:
			cur.Spec.ReplicaAddressMap = add(cur.Spec.ReplicaAddressMap, rep.Name, replicaAddress(rep.Node))
			modes[rep.Name] = longhorn.ModeRW
			serving[rep.Name] = replicaAddress(rep.Node)
		case rep.State == dataplane.ReplicaRebuilding:
			cur.Spec.ReplicaAddressMap = add(cur.Spec.ReplicaAddressMap, rep.Name, replicaAddress(rep.Node))
			modes[rep.Name] = longhorn.ModeWO
			if v.Attached() {
				if cur.Status.RebuildStatus == nil {
					cur.Status.RebuildStatus = map[string]*longhorn.RebuildStatus{}
				}
				cur.Status.RebuildStatus["tcp://"+replicaAddress(rep.Node)] = &longhorn.RebuildStatus{IsRebuilding: true, Progress: rep.RebuildProgress, State: "in_progress"}
			}
		}
	}
	if v.Attached() {
		cur.Spec.DesireState = longhorn.StateRunning
		cur.Status.CurrentState = longhorn.StateRunning
		if !vi.EngineRunning {
			cur.Status.CurrentState = longhorn.StateError
		}
		cur.Status.IP, cur.Status.StorageIP, cur.Status.Port = podIP(v.TargetNode, r.storageNetwork), engineIP(v.TargetNode), enginePort
		cur.Status.ReplicaModeMap = modes
	}
	out := []*longhorn.Engine{cur}
	if vi.SwitchoverTo != "" {
		next := &longhorn.Engine{
			ObjectMeta: metav1.ObjectMeta{Name: engineName(v.Name, vi.SwitchoverTo), Namespace: namespace,
				Labels: map[string]string{longhorn.VolumeLabel: v.Name}},
			Spec: longhorn.EngineSpec{VolumeName: v.Name, NodeID: vi.SwitchoverTo, DataEngine: dataEngine(v),
				DesireState: longhorn.StateRunning},
			Status: longhorn.EngineStatus{CurrentState: longhorn.StateStarting},
		}
		if vi.NewEngineRunning {
			next.Spec.ReplicaAddressMap = maps.Clone(serving)
			next.Status.CurrentState = longhorn.StateRunning
			next.Status.IP, next.Status.StorageIP, next.Status.Port = podIP(vi.SwitchoverTo, r.storageNetwork), engineIP(vi.SwitchoverTo), enginePort
			next.Status.ReplicaModeMap = map[string]string{}
			for name := range serving {
				next.Status.ReplicaModeMap[name] = longhorn.ModeRW
			}
		}
		out = append(out, next)
	}
	return out
}

func add(m map[string]string, k, v string) map[string]string {
	if m == nil {
		m = map[string]string{}
	}
	m[k] = v
	return m
}

// frontend renders an attached v2 volume's EngineFrontend: on the attached
// node, connected to the current engine; while its paths are switched it
// names the new engine in spec and reports its last completed phase.
func frontend(v dataplane.Volume, vi sim.VolumeInstances, r render, namespace string) *longhorn.EngineFrontend {
	target := v.TargetNode
	out := &longhorn.EngineFrontend{
		ObjectMeta: metav1.ObjectMeta{Name: frontendName(v.Name), Namespace: namespace},
		Spec: longhorn.EngineFrontendSpec{VolumeName: v.Name, NodeID: v.AttachedNode, DataEngine: dataplane.DataEngineV2,
			DesireState: longhorn.StateRunning, Frontend: v.Frontend, Active: true,
			EngineName: engineName(v.Name, target), TargetIP: r.targetIP(target), TargetPort: enginePort},
		Status: longhorn.EngineFrontendStatus{CurrentState: longhorn.StateRunning, TargetIP: r.targetIP(target), TargetPort: enginePort},
	}
	if !vi.InitiatorRunning {
		out.Status.CurrentState = longhorn.StateError
	}
	if v.Switchover == dataplane.SwitchoverSwitchingOver && vi.SwitchoverTo != "" && vi.NewEngineRunning {
		out.Spec.EngineName = engineName(v.Name, vi.SwitchoverTo)
		out.Spec.TargetIP = r.targetIP(vi.SwitchoverTo)
		out.Status.SwitchoverPhase = vi.PathPhase
	}
	return out
}

// replica renders a replica as Longhorn shows each simulator state:
//
//   - running: an attached volume's replica runs; a detached volume's is
//     stopped, with healthyAt set (a healthy copy at rest);
//   - rebuilding: starting (its instance starting), or running in the
//     engine (WO), never healthy since (healthyAt cleared);
//   - failed: failedAt set, its instance running until it is stopped
//     (desireState stopped), or in error when it was lost.
//
// A running instance reports its address. Stamps already set on the
// existing object are kept, so a replica does not change on every round;
// now is the stamp for new ones.
func replica(v dataplane.Volume, vi sim.VolumeInstances, r dataplane.Replica, imName string, existing *longhorn.Replica, now, namespace string) *longhorn.Replica {
	out := &longhorn.Replica{
		ObjectMeta: metav1.ObjectMeta{Name: r.Name, Namespace: namespace, Finalizers: []string{finalizer},
			Labels: map[string]string{longhorn.VolumeLabel: v.Name}},
		Spec: longhorn.ReplicaSpec{
			NodeID: r.Node, VolumeName: v.Name, EngineName: engineName(v.Name, v.TargetNode), DataEngine: dataEngine(v),
		},
		Status: longhorn.ReplicaStatus{InstanceManagerName: imName},
	}
	if vi.SwitchoverTo != "" {
		out.Spec.MigrationEngineName = engineName(v.Name, vi.SwitchoverTo)
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
	switch {
	case r.Failed:
		out.Spec.FailedAt, out.Spec.HealthyAt = keep(failedAt, now), healthyAt
		out.Spec.LastFailedAt = out.Spec.FailedAt
		out.Spec.DesireState, out.Status.CurrentState = longhorn.StateStopped, longhorn.StateStopped
		if r.State == dataplane.ReplicaError {
			out.Status.CurrentState = longhorn.StateError
		}
		if r.Running {
			out.Spec.DesireState, out.Status.CurrentState = longhorn.StateRunning, longhorn.StateRunning
		}
	case r.State == dataplane.ReplicaRunning:
		out.Spec.HealthyAt = keep(healthyAt, now)
		if v.Attached() {
			out.Spec.DesireState, out.Status.CurrentState = longhorn.StateRunning, longhorn.StateRunning
		} else {
			out.Spec.DesireState, out.Status.CurrentState = longhorn.StateStopped, longhorn.StateStopped
		}
	case r.State == dataplane.ReplicaRebuilding:
		out.Spec.DesireState, out.Status.CurrentState = longhorn.StateRunning, longhorn.StateRunning
		if !r.InEngine {
			out.Status.CurrentState = longhorn.StateStarting
		}
	default: // stopped, not failed: a detached volume's copy never healthy
		out.Spec.DesireState, out.Status.CurrentState = longhorn.StateStopped, longhorn.StateStopped
	}
	if out.Status.CurrentState == longhorn.StateRunning || out.Status.CurrentState == longhorn.StateStarting {
		out.Status.StorageIP, out.Status.Port = engineIP(r.Node), replicaPort
	}
	return out
}

// sameReplicaSpec compares what the manager owns of a replica's spec;
// stamps are compared by presence only.
func sameReplicaSpec(a, b longhorn.ReplicaSpec) bool {
	return a.DesireState == b.DesireState && (a.FailedAt == "") == (b.FailedAt == "") &&
		(a.HealthyAt == "") == (b.HealthyAt == "") && a.NodeID == b.NodeID && a.VolumeName == b.VolumeName &&
		a.EngineName == b.EngineName && a.MigrationEngineName == b.MigrationEngineName
}

// upgradeControl renders the upgrade control of Longhorn's own upgrader as
// the simulator shows it, aimed at image (the simulator keeps no target of
// its own for that upgrader, which it never runs).
func upgradeControl(c dataplane.UpgradeControl, image, namespace string) *longhorn.InstanceManagerUpgradeControl {
	out := &longhorn.InstanceManagerUpgradeControl{
		ObjectMeta: metav1.ObjectMeta{Name: c.Name, Namespace: namespace},
		Spec:       longhorn.InstanceManagerUpgradeControlSpec{TargetImage: image},
		Status:     longhorn.InstanceManagerUpgradeControlStatus{CurrentNode: c.CurrentNode},
	}
	for node, st := range c.Nodes {
		if out.Status.Nodes == nil {
			out.Status.Nodes = make(map[string]longhorn.UpgradeControlNode, len(c.Nodes))
		}
		out.Status.Nodes[node] = longhorn.UpgradeControlNode{State: st}
	}
	return out
}

// imUpgrade renders one per-node upgrade of Longhorn's own upgrader, aimed
// at image (the CRD requires a target image).
func imUpgrade(u dataplane.IMUpgrade, image, namespace string) *longhorn.InstanceManagerUpgrade {
	return &longhorn.InstanceManagerUpgrade{
		ObjectMeta: metav1.ObjectMeta{Name: u.Name, Namespace: namespace},
		Spec:       longhorn.InstanceManagerUpgradeSpec{NodeID: u.Node, TargetImage: image},
		Status:     longhorn.InstanceManagerUpgradeStatus{State: u.State},
	}
}
