package workloadmove

// The reasons a node cannot be emptied without a person (pins): with any
// of them nothing is moved.
const (
	// PinPodToleratesTaint: the pod tolerates the move's taint, so the
	// scheduler could put it straight back on the node.
	PinPodToleratesTaint = "PodToleratesTaint"
	// PinPodPinnedToNode: only this node may run the pod (its template's
	// nodeName, node selector or required node affinity).
	PinPodPinnedToNode = "PodPinnedToNode"
	// PinDaemonSetPod: its DaemonSet runs it on this node whatever happens.
	PinDaemonSetPod = "DaemonSetPod"
	// PinPodWithoutController: nothing would recreate the pod, so evicting
	// it would end the workload rather than move it.
	PinPodWithoutController = "PodWithoutController"
	// PinStaticPod: the kubelet runs it from a file on the node.
	PinStaticPod = "StaticPod"
	// PinSeveralBudgets: more than one PodDisruptionBudget selects the pod,
	// and the eviction API refuses to evict such a pod at all.
	PinSeveralBudgets = "SeveralDisruptionBudgets"
	// PinStrictLocalVolume: the volume's only replica lives on its node
	// (dataLocality strict-local): it cannot be attached anywhere else.
	PinStrictLocalVolume = "StrictLocalVolume"
	// PinMigratableVolume: Longhorn moves a migratable volume by live
	// migration, which a move does not drive.
	PinMigratableVolume = "MigratableVolume"
	// PinManualAttachment: someone attached the volume to the node through
	// Longhorn's API or UI (a longhorn-api ticket); only they may detach it.
	PinManualAttachment = "ManualAttachment"
)

// The reasons a node waits while it is being emptied: each ends by itself.
const (
	// WaitPodTerminating: a pod using the volume is being deleted or has
	// ended, and its volume is detached once the kubelet has unmounted it.
	WaitPodTerminating = "PodTerminating"
	// WaitDetach: no pod on the node uses the volume any more; Kubernetes
	// and Longhorn are detaching it (or, for an RWX volume, moving it
	// after its share-manager pod).
	WaitDetach = "WaitingForDetach"
	// WaitLonghornTicket: Longhorn's own work (a snapshot, backup, rebuild,
	// restore, expansion or eviction) holds the volume on the node until it
	// is done.
	WaitLonghornTicket = "LonghornTicketOnNode"
	// WaitFrontends: no volume is attached to the node any more, but its
	// instance manager still lists engine frontends.
	WaitFrontends = "FrontendsOnNode"
	// WaitDisruptionBudget: the eviction API refused an eviction (429) to
	// keep a PodDisruptionBudget; it is asked again.
	WaitDisruptionBudget = "DisruptionBudget"
	// WaitCSIPlugin: Longhorn's CSI plugin pod on the node does not run
	// Ready, so an evicted pod's volumes could not be unmounted; nothing
	// moves until it does.
	WaitCSIPlugin = "CSIPluginNotReady"
	// WaitLonghornRollout: a Longhorn DaemonSet is rolling out, and the
	// move's taint would keep its new pod off the node; nothing moves until
	// it is done.
	WaitLonghornRollout = "LonghornRolloutPending"
)
