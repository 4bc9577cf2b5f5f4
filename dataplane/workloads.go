package dataplane

// Workloads is what moving a node's workloads needs to read around it (see
// package workloadmove): the Kubernetes objects behind the initiators of
// the v2 volumes attached to the node.
type Workloads struct {
	// Node is the node read around.
	Node string
	// Pods are the pods bound to Node, and the share-manager pods of RWX
	// volumes attached to it wherever they run.
	Pods []Pod
	// Claims bind the PersistentVolumeClaims the pods name to the Longhorn
	// volumes behind them.
	Claims []Claim
	// Volumes are the Longhorn volumes the claims name, and those with an
	// attachment ticket for Node, with their tickets.
	Volumes []Volume
	// Budgets are the PodDisruptionBudgets that select the pods, by
	// ObjectRef.String().
	Budgets map[string]Budget
	// CSIPluginNotReady says why Longhorn's CSI plugin on Node (its
	// longhorn-csi-plugin pod) cannot unmount the volumes of a pod evicted
	// now, which would then hang in Terminating; "" when it runs Ready.
	CSIPluginNotReady string
	// RolloutPending names a Longhorn DaemonSet (longhorn-manager,
	// longhorn-csi-plugin) whose rollout is not done, and how far it is: a
	// NoSchedule taint would keep its new pod off the node; "" when none.
	RolloutPending string
}

// ObjectRef names a namespaced Kubernetes object.
type ObjectRef struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// String is namespace/name.
func (r ObjectRef) String() string { return r.Namespace + "/" + r.Name }

// Pod is a pod as moving a workload sees it.
type Pod struct {
	ObjectRef
	// UID is metadata.uid: the pod of that name now, not one recreated
	// under it.
	UID string
	// Node is spec.nodeName.
	Node string
	// Terminal reports phase Succeeded or Failed; Deleting, a deletion
	// timestamp.
	Terminal, Deleting bool
	// Ready is the pod's Ready condition.
	Ready bool
	// Controller is the kind of its controlling owner (ReplicaSet,
	// StatefulSet, DaemonSet, Job...); "" when nothing would recreate it.
	Controller string
	// Mirror reports a static pod's mirror: the kubelet runs it from a file
	// on the node, and the API cannot move it.
	Mirror bool
	// Claims are the PersistentVolumeClaims its volumes name, in its
	// namespace.
	Claims []string
	// ToleratesTaint reports that it tolerates the NoSchedule taint a move
	// puts on its node: the scheduler could put it straight back.
	ToleratesTaint bool
	// PinnedBy says what makes Node the only node that may run it (a
	// nodeName its controller's template sets, or a node selector or
	// required node affinity no other node satisfies); "" when another
	// node could.
	PinnedBy string
	// ShareManagerOf is the RWX volume whose NFS server the pod is; "" for
	// any other pod.
	ShareManagerOf string
	// Budgets name (ObjectRef.String()) the PodDisruptionBudgets selecting
	// it.
	Budgets []string
}

// Claim is a bound PersistentVolumeClaim and the Longhorn volume of its
// PersistentVolume (the CSI volume handle of driver.longhorn.io).
type Claim struct {
	ObjectRef
	Volume string
}

// Ticket is one attachment ticket of a volume's Longhorn VolumeAttachment.
type Ticket struct {
	ID string
	// Type is the attacher type (AttacherCSI, AttacherLonghornAPI...).
	Type string
	// Node is the node the ticket asks the volume to be attached to.
	Node string
}

// The attacher types of Longhorn's attachment tickets that moving a
// workload tells apart; every other type is Longhorn's own work (restore,
// expansion, eviction, rebuilding, clone, backing image), which ends by
// itself.
const (
	AttacherCSI          = "csi-attacher"
	AttacherLonghornAPI  = "longhorn-api"
	AttacherShareManager = "share-manager-controller"
	AttacherSnapshot     = "snapshot-controller"
	AttacherBackup       = "backup-controller"
)

// Budget is a PodDisruptionBudget's status as the eviction API reads it.
type Budget struct {
	ObjectRef
	// Observed reports status.observedGeneration ≥ metadata.generation:
	// until the disruption controller has counted the budget, the API
	// refuses every eviction it covers.
	Observed bool
	// DisruptionsAllowed is status.disruptionsAllowed.
	DisruptionsAllowed int32
}

// WorkloadTaintKey is the key of the NoSchedule taint moving a node's
// workloads puts on it, so that what is evicted is not scheduled back. It
// is never NoExecute (the kubelet would refuse the node's new instance
// manager pod) and never a cordon (Longhorn starts no instance-manager pod
// on a cordoned node).
const WorkloadTaintKey = "upgrade.switchback.io/moving-workloads"

// UpgradePendingTaintKey is the key of the PreferNoSchedule taint an
// upgrade that moves workloads puts on the nodes it has still to come to,
// and takes off each once it is upgraded: the scheduler then prefers the
// nodes already upgraded (or not upgraded at all) for the pods it moves,
// so that a workload moves once, not again when the node it landed on
// comes next. A preference only: where no other node fits, a pod still
// lands on a marked node. The taint's value is the UID of the manager
// that put it there, so that a manager takes off only its own marks.
const UpgradePendingTaintKey = "upgrade.switchback.io/upgrade-pending"
