// Package dataplane is the boundary between the upgrade logic and a Longhorn
// cluster: the few reads a precheck, planner or node step needs, and the few
// actions a step takes. Two implementations exist: the simulator (sim/) and
// the adapter over Longhorn's custom resources (longhorn/).
//
// Every action is idempotent (calling it again with the same arguments is a
// no-op) because node workers are redelivered commands and restart mid-step;
// deleting something already gone succeeds.
//
// What a node may be put through depends on the Longhorn behind the data
// plane: Platform says which Profile it is, and the profile says where
// initiators live and how an instance manager is replaced.
//
// Robustness of a detached volume is computed from its replicas like an
// attached one's (Longhorn itself reports "unknown" for it); the health gate
// reads replica counts, not robustness.
package dataplane

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// ErrNotFound is matched (errors.Is) when a named object does not exist.
var ErrNotFound = errors.New("not found")

// ErrRefused is matched when an action does not apply to the object as it is
// (moving the target of a v1 volume, deleting an instance manager that still
// runs instances): retrying as is cannot help.
var ErrRefused = errors.New("refused")

// ErrSwitchingPaths refuses to change a volume's engine node while its
// initiator switches paths (Volume.PathsSwitching: Longhorn would accept
// the change and leave the old path inaccessible). Every data plane checks it on fresh state at the
// write, since the step decided on an observation that may be a moment old;
// it passes once the switch is done, so it is not a refusal.
var ErrSwitchingPaths = fmt.Errorf("status.switchoverState is %s and the initiator is switching paths: the engine node must not change until it is done", SwitchoverSwitchingOver)

// ErrDisruptionBudget refuses an eviction, for now, to keep a
// PodDisruptionBudget (the eviction API's 429): asked again later it may
// pass, so it is not a refusal.
var ErrDisruptionBudget = errors.New("the eviction would break a PodDisruptionBudget")

// ErrReplicaInEngine refuses to stop a replica's instance while a running
// engine still holds it in its RAID: the engine's writes would wait on the
// dead replica link until its I/O timeout. It passes once the engine has
// removed the replica, so it is not a refusal.
var ErrReplicaInEngine = errors.New("a running engine still holds the replica in its RAID: its instance must not stop until the engine has removed it")

// DataEngineV2 is the only data engine Switchback upgrades.
const DataEngineV2 = "v2"

// Node is a Kubernetes/Longhorn node as the upgrade sees it.
type Node struct {
	Name  string
	Ready bool
	// V2 reports whether the node runs the v2 data engine.
	V2 bool
	// AllowScheduling is Longhorn's node spec.allowScheduling: whether new
	// replicas, and reuses of failed ones, may land on the node. The upgrade
	// turns it off while the node's instance manager is replaced and
	// restores the value it recorded.
	AllowScheduling bool
	// Images present on the node (pulled), for DefaultImageOnAllNodesReady.
	Images []string
	// Cordoned is the Kubernetes node's spec.unschedulable: Longhorn starts
	// no instance-manager pod on a cordoned node, so a node whose IM is
	// replaced while cordoned would wait for it forever.
	Cordoned bool
	// ManagerIMImage is the --instance-manager-image the node's
	// longhorn-manager runs with ("" when no manager pod runs there):
	// Longhorn creates the node's new IM only once it is the default image,
	// that is once the manager's DaemonSet rolled out there.
	ManagerIMImage string
	// NVMeMultipath is the node's kernel nvme_core.multipath, as its worker
	// reported it.
	NVMeMultipath Multipath
	// WorkloadTainted reports that the Kubernetes node carries the
	// NoSchedule taint WorkloadTaintKey.
	WorkloadTainted bool
	// UpgradePendingMark is the value of the Kubernetes node's
	// PreferNoSchedule taint UpgradePendingTaintKey (the UID of the
	// manager that put it there), "" without one.
	UpgradePendingMark string
	// Zone is Longhorn's node status.zone (the Kubernetes node's
	// topology.kubernetes.io/zone), "" when it has none.
	Zone string
	// Tags are the node's spec.tags, matched against a volume's
	// nodeSelector.
	Tags []string
	// Disks are the node's Longhorn disks, sorted by name, as
	// Reader.Disks reports them (Nodes does not: what a disk holds costs
	// a read of every replica on it); plan.Read fills them in.
	Disks []Disk
}

// IMState is an instance manager's lifecycle state.
type IMState string

// Instance manager states.
const (
	IMStarting IMState = "starting"
	IMRunning  IMState = "running"
	IMStopped  IMState = "stopped"
	IMError    IMState = "error"
)

// InstanceManager is one v2 instance manager: the single process holding every
// v2 engine, engine frontend and replica of its node.
type InstanceManager struct {
	Name  string
	Node  string
	Image string
	// DataEngine is v2 for every IM a Reader lists; empty is taken as v2.
	DataEngine string
	State      IMState
	// Engines, Frontends and Replicas count the instances the IM runs or is
	// starting (Longhorn's status maps): engines (targets), engine frontends
	// (initiators of volumes attached to the node) and replicas. Longhorn
	// removes an old-image IM only once all three are zero.
	Engines, Frontends, Replicas int
	// Shards counts the erasure-coded shard and shard-group instances the
	// IM runs or starts. Longhorn does not count them before it removes an
	// old-image IM, so replacing one that runs shards loses them.
	Shards int
	// Deleting reports that the IM's object is being deleted: its pod, and
	// the SPDK target holding the node's hugepages and disks, may still
	// run. Longhorn starts the node's next IM only once it is gone.
	Deleting bool
}

// Busy reports whether the IM runs or starts any instance, shards included:
// no data plane deletes such an IM.
func (im InstanceManager) Busy() bool { return im.Engines+im.Frontends+im.Replicas+im.Shards > 0 }

// FrontendsOn counts the engine frontends (initiators) the IMs of node
// among ims list.
func FrontendsOn(ims []InstanceManager, node string) int {
	n := 0
	for _, im := range ims {
		if im.Node == node {
			n += im.Frontends
		}
	}
	return n
}

// Holds counts the instances replacing the IM would cut on profile p: its
// engines and replicas, and its engine frontends unless the initiators
// survive the IM there.
func (im InstanceManager) Holds(p Profile) (engines, frontends, replicas int) {
	if p.InitiatorsSurviveIM() {
		return im.Engines, 0, im.Replicas
	}
	return im.Engines, im.Frontends, im.Replicas
}

// ReplicaState is a replica's lifecycle state.
type ReplicaState string

// Replica states.
const (
	ReplicaRunning ReplicaState = "running"
	// ReplicaRebuilding is a replica being written to but not read from
	// (Longhorn's mode WO), or starting to be.
	ReplicaRebuilding ReplicaState = "rebuilding"
	ReplicaStopped    ReplicaState = "stopped"
	ReplicaError      ReplicaState = "error"
)

// Replica is one copy of a volume's data on one node.
type Replica struct {
	Name  string
	Node  string
	State ReplicaState
	// Failed reports spec.failedAt set: the replica serves no I/O, Longhorn
	// takes it out of the volume's engine, and may reuse it later (clearing
	// the stamp) once its node allows replica scheduling.
	Failed bool
	// InEngine reports that a running engine of the volume still holds the
	// replica in its RAID: its engine's replica mode map lists it, by name
	// or, while the engine removes it, by address (UNKNOWN-tcp://ip:port).
	// Stopping its instance then would make the engine's writes wait for
	// the replica link's I/O timeout.
	InEngine bool
	// Running reports that its instance runs or starts in its node's
	// instance manager, whatever its health: what must stop before that
	// instance manager goes.
	Running bool
	// RebuildProgress is the percentage of its rebuild done, as the
	// volume's engine reports it (status.rebuildStatus); 0 when it is not
	// being rebuilt.
	RebuildProgress int
}

// Healthy reports whether the replica serves I/O.
func (r Replica) Healthy() bool { return r.State == ReplicaRunning }

// Active reports whether the replica serves or is being rebuilt: it counts
// towards the volume's replicas without a new rebuild.
func (r Replica) Active() bool { return r.State == ReplicaRunning || r.State == ReplicaRebuilding }

// Robustness is Longhorn's volume health summary.
type Robustness string

// Volume robustness values.
const (
	RobustnessHealthy  Robustness = "healthy"
	RobustnessDegraded Robustness = "degraded"
	RobustnessFaulted  Robustness = "faulted"
	RobustnessUnknown  Robustness = "unknown"
)

// RobustnessOf is Longhorn's rule for a volume with running of its desired
// replicas running: healthy with all of them, faulted with none.
func RobustnessOf(running, desired int) Robustness {
	switch {
	case running == 0:
		return RobustnessFaulted
	case running < desired:
		return RobustnessDegraded
	default:
		return RobustnessHealthy
	}
}

// SwitchoverState is Longhorn's status.switchoverState of a v2 volume whose
// target is being moved; "" when none is under way.
type SwitchoverState string

// Switch-over states.
const (
	SwitchoverNone SwitchoverState = ""
	// SwitchoverPreparing: a second engine is being created on the new node.
	// Changing the engine node now is safe: Longhorn drops that engine.
	SwitchoverPreparing SwitchoverState = "preparing"
	// SwitchoverSwitchingOver: the initiator is moving its path to the new
	// engine. The engine node must not change until this ends: the old
	// path may already be inaccessible.
	SwitchoverSwitchingOver SwitchoverState = "switching-over"
	// SwitchoverFinalizing: the old engine is being removed.
	SwitchoverFinalizing SwitchoverState = "finalizing"
	// SwitchoverReverting: the move failed; Longhorn drops the new engine and
	// tries again while the engine node still differs.
	SwitchoverReverting SwitchoverState = "reverting"
)

// Frontends a volume's initiator can use (spec.frontend).
const (
	FrontendBlockdev = "blockdev"
	FrontendNVMf     = "nvmf"
	FrontendUblk     = "ublk"
	FrontendISCSI    = "iscsi"
)

// Volume is a Longhorn volume with its engine placement.
type Volume struct {
	Name       string
	DataEngine string
	// NumberOfReplicas is the desired replica count; 0 means not reported,
	// and readers then count Replicas instead.
	NumberOfReplicas int
	// AttachedNode is where the volume is attached: the initiator (Longhorn's
	// EngineFrontend), next to the workload. Empty when detached.
	AttachedNode string
	// TargetNode is where the engine, and so the NVMe-oF target, currently
	// runs (status.currentEngineNodeID); empty when detached. Readers take
	// an empty one on an attached volume as AttachedNode.
	TargetNode string
	// EngineNode is spec.engineNodeID as set: the node the engine should run
	// on; "" means "follow AttachedNode". It persists across detach.
	EngineNode string
	// Switchover is status.switchoverState.
	Switchover SwitchoverState
	// PathsSwitching reports that the initiator has begun switching its
	// paths to the new engine (its EngineFrontend reports a switch-over
	// phase): from then until Longhorn ends the switch-over, changing the
	// engine node could leave the old path inaccessible. Before it, in
	// switching-over too, the old path is whole.
	PathsSwitching bool
	// TargetReady reports that the engine on TargetNode is the volume's only
	// engine, runs, and is what the active initiator is connected to: a
	// switch-over has fully ended there.
	TargetReady bool
	// SwitchoverError is the text of the last failed switch-over attempt
	// Longhorn reported (its FailedSwitchover Warning), "" when none since
	// the last switch-over succeeded.
	SwitchoverError string
	// Frontend is spec.frontend; "" when the volume has none (or it is
	// disabled).
	Frontend   string
	Robustness Robustness
	Replicas   []Replica
	// ReplenishAt is, for a degraded attached volume, when Longhorn may
	// build a new replica of it on another node: status.lastDegradedAt plus
	// the setting replica-replenishment-wait-interval while a failed
	// replica could still be reused, the moment it degraded otherwise. Zero
	// when it is not degraded. A rebuild that starts while the volume's
	// target moves makes Longhorn revert the move.
	ReplenishAt time.Time
	// Away is the controller's record that a node's upgrade moves the
	// volume's target away and back (see TargetAway); nil when none.
	Away *TargetAway
	// InitiatorMultipath is the NVMeMultipath of the attached node, whose
	// kernel holds the initiator's paths during a switch-over.
	InitiatorMultipath Multipath
	// ShareManager reports an RWX volume served through a share-manager
	// pod (spec.accessMode rwx, not migratable): it is attached where that
	// pod runs, and its workloads reach it over NFS from any node.
	ShareManager bool
	// Migratable is spec.migratable: Longhorn moves the volume between
	// nodes by live migration.
	Migratable bool
	// NoReplicaReuse reports that Longhorn would not reuse the volume's
	// failed replicas when it rebuilds: a v2 volume while the setting
	// fast-replica-rebuild-enabled is not true for v2. It then neither
	// reuses one nor waits for one, and builds a new replica elsewhere at
	// once.
	NoReplicaReuse bool
	// StrictLocal reports spec.dataLocality strict-local: its only replica
	// is on its node, and it cannot be attached anywhere else.
	StrictLocal bool
	// ReplicaAutoBalance and DataLocality are spec.replicaAutoBalance and
	// spec.dataLocality as set ("" when not reported): what a temporary
	// replica's raise turns off and its end restores.
	ReplicaAutoBalance string
	DataLocality       string
	// Tickets are its Longhorn VolumeAttachment's tickets; read only where
	// a Workloads is.
	Tickets []Ticket
	// ActualSize is status.actualSize: the bytes its replicas hold, every
	// snapshot and the head: what a rebuild that copies everything copies.
	ActualSize int64
	// Hashing is its snapshots' hashing.
	Hashing SnapshotHashing
	// Size is spec.size: what Longhorn schedules on a disk for each
	// replica.
	Size int64
	// NodeSelector and DiskSelector are spec.nodeSelector and
	// spec.diskSelector: the tags a node and a disk must carry to hold one
	// of its replicas.
	NodeSelector, DiskSelector []string
	// SoftAntiAffinity says whether Longhorn may put a new replica on a
	// node that already holds one of the volume's, HardZoneAntiAffinity
	// whether it must not put one in a zone that does: from
	// spec.replicaSoftAntiAffinity and spec.replicaZoneSoftAntiAffinity,
	// or when they are ignored the settings replica-soft-anti-affinity
	// (false by default) and replica-zone-soft-anti-affinity (true by
	// default, so both are false at Longhorn's defaults).
	SoftAntiAffinity, HardZoneAntiAffinity bool
}

// TargetAway is the controller's record, kept on the volume, that the
// upgrade of Node moves the volume's target to Temporary and back to
// exactly EngineNodeBefore. It is a projection of the node upgrade's
// history (the switch-over it recorded), written by the controller alone:
// on the Longhorn data plane the workers' admission policy lets the worker
// of Node change spec.engineNodeID only to Temporary or EngineNodeBefore of
// such a record, so a worker cannot move, or pull onto its node, a target
// its node's upgrade never moved.
type TargetAway struct {
	// Node is the upgrading node the target left.
	Node string
	// EngineNodeBefore is spec.engineNodeID before the switch-over ("" =
	// follow the attached node): where the target comes back to.
	EngineNodeBefore string
	// Temporary is where the target goes while Node is upgraded.
	Temporary string
}

// Allows reports whether the record lets the upgrade of node set the
// volume's engine node to engineNode: to the temporary target, or back to
// the engine node before. A nil record allows nothing.
func (a *TargetAway) Allows(node, engineNode string) bool {
	return a != nil && a.Node == node && (engineNode == a.EngineNodeBefore || (a.Temporary != "" && engineNode == a.Temporary))
}

// Attached reports whether the volume is attached somewhere.
func (v Volume) Attached() bool { return v.AttachedNode != "" }

// TargetHost is the node whose v2 IM serves the volume's target: the load a
// temporary target adds to a node. It is "" unless the volume is an attached
// v2 volume; an empty TargetNode means the target runs next to the initiator.
func (v Volume) TargetHost() string {
	if v.DataEngine != DataEngineV2 || v.AttachedNode == "" {
		return ""
	}
	if v.TargetNode != "" {
		return v.TargetNode
	}
	return v.AttachedNode
}

// EngineHome is where the engine goes when EngineNode is engineNode: that
// node, or the attached node for "".
func (v Volume) EngineHome(engineNode string) string {
	if engineNode != "" {
		return engineNode
	}
	return v.AttachedNode
}

// CanSwitchTarget reports whether Longhorn can move the volume's target
// while it serves I/O: only an NVMe/TCP frontend (blockdev, nvmf) has a
// switch-over path; ublk has none, and a volume without a frontend has no
// initiator to switch.
func (v Volume) CanSwitchTarget() bool {
	return v.Frontend == FrontendBlockdev || v.Frontend == FrontendNVMf
}

// FrontendBlocker says, for a volume whose target cannot be switched over
// (CanSwitchTarget false), why and what to do; "" when it can.
func (v Volume) FrontendBlocker() string {
	if v.CanSwitchTarget() {
		return ""
	}
	return fmt.Sprintf("volume %s has frontend %q, which Longhorn cannot switch over to another node (only blockdev and nvmf can): detach it", v.Name, v.Frontend)
}

// Rebuilding reports whether any replica is being rebuilt.
func (v Volume) Rebuilding() bool {
	return slices.ContainsFunc(v.Replicas, func(r Replica) bool { return r.State == ReplicaRebuilding })
}

// CountTargets counts TargetHost over vols, per node: what TargetCounts
// returns, for readers that have no index of their own.
func CountTargets(vols []Volume) map[string]int {
	out := map[string]int{}
	for _, v := range vols {
		if h := v.TargetHost(); h != "" {
			out[h]++
		}
	}
	return out
}

// HealthyReplicasOff counts the healthy replicas on other nodes than node:
// what the volume keeps serving from while node is upgraded.
func (v Volume) HealthyReplicasOff(node string) int {
	n := 0
	for _, r := range v.Replicas {
		if r.Node != node && r.Healthy() {
			n++
		}
	}
	return n
}

// HealthyNodesOff counts the nodes other than node holding a healthy
// replica of v, the replica named except ("" for none) left out: two
// replicas on one node protect against that node's loss no better than
// one.
func (v Volume) HealthyNodesOff(node, except string) int {
	var nodes []string
	for _, r := range v.Replicas {
		if r.Node != node && r.Name != except && r.Healthy() && !slices.Contains(nodes, r.Node) {
			nodes = append(nodes, r.Node)
		}
	}
	return len(nodes)
}

// HealthyReplicas counts replicas that serve I/O.
func (v Volume) HealthyReplicas() int {
	n := 0
	for _, r := range v.Replicas {
		if r.Healthy() {
			n++
		}
	}
	return n
}

// Reader is the read side: what prechecks, the planner and steps observe.
type Reader interface {
	// Platform says which Longhorn the data plane drives.
	Platform(ctx context.Context) (Platform, error)
	// Nodes lists every node, v2 or not.
	Nodes(ctx context.Context) ([]Node, error)
	// Node returns one node or an error matching ErrNotFound.
	Node(ctx context.Context, name string) (Node, error)
	// DefaultInstanceManagerImage is the image new v2 IMs get (Longhorn setting
	// default-instance-manager-image): the upgrade's target.
	DefaultInstanceManagerImage(ctx context.Context) (string, error)
	// InstanceManagers lists the v2 IMs, of one node or of all nodes when node is "".
	InstanceManagers(ctx context.Context, node string) ([]InstanceManager, error)
	// Volumes lists every volume, v1 and v2.
	Volumes(ctx context.Context) ([]Volume, error)
	// Volume returns one volume or an error matching ErrNotFound.
	Volume(ctx context.Context, name string) (Volume, error)
	// VolumesOn lists the volumes attached to node, with their target on
	// node, or with a replica on node, sorted by name: all a node's upgrade
	// may concern, without listing the whole cluster at every step.
	VolumesOn(ctx context.Context, node string) ([]Volume, error)
	// TargetCounts counts, per node, the volumes whose TargetHost is that
	// node (nodes hosting none are absent). Choosing a temporary target needs
	// only these counts; reading them from an index instead of listing every
	// volume keeps a node step's cost from growing with the cluster.
	TargetCounts(ctx context.Context) (map[string]int, error)
	// LonghornUpgrader reads what Longhorn's own instance-manager upgrader
	// shows (zero on a Longhorn without one).
	LonghornUpgrader(ctx context.Context) (LonghornUpgrader, error)
	// Workloads reads what moving node's workloads needs (see Workloads).
	Workloads(ctx context.Context, node string) (Workloads, error)
	// Snapshots lists the volume's snapshots, oldest first (ErrNotFound
	// for a volume gone).
	Snapshots(ctx context.Context, volume string) ([]Snapshot, error)
	// RebuildSettings reads Longhorn's settings on rebuilding the replicas
	// an upgrade fails.
	RebuildSettings(ctx context.Context) (RebuildSettings, error)
	// Disks reads every node's Longhorn disks, by node, each sorted by
	// name (nodes without disks are absent).
	Disks(ctx context.Context) (map[string][]Disk, error)
}

// RebuildSettings are Longhorn's settings that decide what becomes of the
// replicas a node's upgrade fails while the node is away.
type RebuildSettings struct {
	// ReplenishWait is replica-replenishment-wait-interval (600 s by
	// default): how long after a volume degrades Longhorn waits for a
	// failed replica to become reusable before it builds a new one on
	// another node, a whole copy. Negative waits for ever.
	ReplenishWait time.Duration `json:"replenishWait"`
}

// Actions are what node steps do. Each is idempotent.
type Actions interface {
	// SetReplicaScheduling sets the node's spec.allowScheduling.
	SetReplicaScheduling(ctx context.Context, node string, allow bool) error
	// CreateSnapshot takes a volume snapshot named name (no-op if it exists).
	CreateSnapshot(ctx context.Context, volume, name string) error
	// DeleteSnapshot removes the snapshot named name (no-op if gone).
	DeleteSnapshot(ctx context.Context, volume, name string) error
	// FailReplica marks a replica failed (spec.failedAt): Longhorn takes it
	// out of the volume's engine, which removes it from its RAID, and
	// leaves its instance running; Longhorn reuses or replaces it later.
	FailReplica(ctx context.Context, volume, replica string) error
	// StopReplica stops the instance of a failed replica (spec.desireState
	// stopped) once no running engine holds it (Replica.InEngine false). It
	// is refused with ErrReplicaInEngine while one does, and with
	// ErrRefused for a replica that is not failed (Longhorn would start it
	// again).
	StopReplica(ctx context.Context, volume, replica string) error
	// SetEngineNode sets the volume's spec.engineNodeID ("" = follow the
	// attached node), which makes Longhorn switch its target over.
	SetEngineNode(ctx context.Context, volume, node string) error
	// DeleteInstanceManager deletes an IM that runs no instance; one that
	// does is refused (ErrRefused). Longhorn then starts the node's IM of
	// the default image.
	DeleteInstanceManager(ctx context.Context, name string) error
	// SetInstanceManagerImage sets an IM's spec.image, which a Longhorn of
	// ProfileInPlace applies to the running IM; refused (ErrRefused) on
	// other profiles.
	SetInstanceManagerImage(ctx context.Context, name, image string) error
	// TaintNode puts the NoSchedule taint WorkloadTaintKey on the
	// Kubernetes node, so that the pods moved off it are not scheduled
	// back; UntaintNode takes it off.
	TaintNode(ctx context.Context, node string) error
	UntaintNode(ctx context.Context, node string) error
	// EvictPod asks the eviction API to evict the pod (namespace/name) of
	// that uid, as `kubectl drain` does, so that PodDisruptionBudgets hold:
	// a refusal to keep one is ErrDisruptionBudget; a pod gone, or of
	// another uid, is a no-op.
	EvictPod(ctx context.Context, pod, uid string) error
	// RestartShareManager deletes the share-manager pod (namespace/name)
	// of an RWX volume, of that uid: Longhorn starts it again where the
	// scheduler puts it, and the volume follows it. A pod gone, or of
	// another uid (started again already), is a no-op.
	RestartShareManager(ctx context.Context, pod, uid string) error
}

// ReplicaCounter changes a volume's replica count for a temporary replica
// (spec.replicaPolicy add-first). Only the controller holds one: the
// change adds a replica on, and its end deletes one from, a node that is
// not the upgrading node.
type ReplicaCounter interface {
	// SetReplicaCount sets the volume's spec.numberOfReplicas,
	// spec.replicaAutoBalance and spec.dataLocality (an empty one is left
	// as it is). Setting what the volume has is a no-op; a volume gone is
	// an error matching ErrNotFound.
	SetReplicaCount(ctx context.Context, volume string, spec ReplicaSpec) error
	// DeleteReplica deletes the volume's replica; one gone is success.
	DeleteReplica(ctx context.Context, volume, replica string) error
}

// ReplicaSpec is what ReplicaCounter sets on a volume.
type ReplicaSpec struct {
	NumberOfReplicas   int
	ReplicaAutoBalance string
	DataLocality       string
}

// The values of spec.replicaAutoBalance and spec.dataLocality a temporary
// replica needs: Longhorn's volume controller moves and deletes no replica
// of a volume with both, whatever its count (LM@v1.12.1
// controller/volume_controller.go:1321-1356, cleanupExtraHealthyReplicas).
const (
	AutoBalanceDisabled  = "disabled"
	DataLocalityDisabled = "disabled"
)

// TargetRecorder keeps the controller's records of targets away
// (Volume.Away). Only the controller writes them; the node steps read them.
type TargetRecorder interface {
	// RecordTargetAway sets the volume's record (nil removes it). Setting
	// the record it has is a no-op; a volume gone is an error matching
	// ErrNotFound.
	RecordTargetAway(ctx context.Context, volume string, away *TargetAway) error
}

// NodeMarker keeps the controller's marks of the nodes an upgrade that
// moves workloads has still to come to (UpgradePendingTaintKey).
type NodeMarker interface {
	// MarkUpgradePending sets the value of the mark on the Kubernetes
	// node to mark, or takes the mark off when mark is "", leaving every
	// other taint alone. Asking for what the node has is a no-op; a node
	// gone is an error matching ErrNotFound.
	MarkUpgradePending(ctx context.Context, node, mark string) error
}

// DataPlane is a whole cluster: reads, actions and the controller's
// records of targets away, marks of nodes still to come and requests to
// hash snapshots.
type DataPlane interface {
	Reader
	Actions
	TargetRecorder
	NodeMarker
	SnapshotHasher
	ReplicaCounter
}
