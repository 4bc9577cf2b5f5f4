package sim

import "slices"

// Rule names one behaviour of Longhorn v1.12.1's controllers that the
// simulator plays. Each is listed in Rules with the upstream code it comes
// from (sim/RULES.md is the table a reader reads); Config.Disable switches
// one off, so that a test can show it depends on the rule.
type Rule string

// The rules the simulator plays. Rules the simulated Longhorn manager
// (longhorn/longhornsim) plays on Longhorn's objects are listed too: that
// package reads them from the same Config.
const (
	// RuleRevertWhileSwitchingOver: a switch-over is reverted, in
	// preparing and in switching-over alike, while a replica of the volume
	// rebuilds or has just joined its engine without a mode, or its current
	// engine does not run.
	RuleRevertWhileSwitchingOver Rule = "revert-while-switching-over"
	// RuleRevertLeavesPathDown: a switch-over reverted (or withdrawn) after
	// the initiator's switching phase made the old path inaccessible leaves
	// it so: the volume has no usable path until a later switch-over
	// connects a new one.
	RuleRevertLeavesPathDown Rule = "revert-leaves-path-down"
	// RuleReplenishWithOneEngine: Longhorn reuses or adds replicas only
	// while the volume has a single engine, and its replica reconcile runs
	// before its switch-over code in the same pass, so the pass that first
	// sees a new spec.engineNodeID may start a rebuild.
	RuleReplenishWithOneEngine Rule = "replenish-with-one-engine"
	// RuleOneRebuildPerVolume: one replica of a volume rebuilds at a time.
	RuleOneRebuildPerVolume Rule = "one-rebuild-per-volume"
	// RuleReplenishmentWait: a new replica on another node waits
	// replica-replenishment-wait-interval from the moment the volume
	// degraded while a failed replica could be reused.
	RuleReplenishmentWait Rule = "replenishment-wait"
	// RuleReplicaLinkTimeout: a replica whose instance stops while an
	// engine still holds it in its RAID makes the engine's writes wait for
	// the replica link's fast-io-fail timeout (10 s).
	RuleReplicaLinkTimeout Rule = "replica-link-timeout"
	// RuleIMPodLingers: a deleted instance manager's pod (its SPDK target,
	// holding the node's hugepages and disks) lingers; a foreground delete
	// keeps the object until it is gone, and the node's next IM starts only
	// once no other IM object of the node is running.
	RuleIMPodLingers Rule = "im-pod-lingers"
	// RuleIMOverlapFails: an IM pod started beside a lingering one is
	// refused by the kubelet for want of hugepages (OutOfhugepages-2Mi):
	// the new IM is in error until the old pod is gone.
	RuleIMOverlapFails Rule = "im-overlap-fails"
	// RuleNoIMOnCordonedNode: Longhorn creates no instance-manager pod on
	// a cordoned node.
	RuleNoIMOnCordonedNode Rule = "no-im-on-cordoned-node"
	// RuleDefaultIMFollowsSetting: the node controller keeps an IM of the
	// default image on every node whose manager runs that image, deletes
	// idle IMs of any other image, and recreates the default one if it is
	// deleted.
	RuleDefaultIMFollowsSetting Rule = "default-im-follows-setting"
	// RuleShardsNotCounted: Longhorn removes an old-image IM that runs only
	// erasure-coded shards, as idle.
	RuleShardsNotCounted Rule = "shards-not-counted"
	// RuleSnapshotCRSync: every engine's snapshot sync, a switch-over's new
	// engine's included, deletes the Snapshot objects its (still empty)
	// snapshot list lacks; the snapshot controller then deletes the
	// snapshots once the volume has one engine again.
	RuleSnapshotCRSync Rule = "snapshot-cr-sync"
	// RuleV1120TargetIP: Longhorn v1.12.0 points the initiator at its
	// engine's pod IP (status.ip), v1.12.1 at its storage IP.
	RuleV1120TargetIP Rule = "v1.12.0-target-ip"
	// RuleNoSecondPathWithoutMultipath: the kernel of a node whose
	// nvme_core.multipath is N makes each NVMe path a device of its own,
	// so a switch-over of a blockdev volume attached there leaves the
	// volume's device without a usable path once the old one goes.
	RuleNoSecondPathWithoutMultipath Rule = "no-second-path-without-multipath"
	// RuleExtraReplicaCleanup: a volume with more healthy replicas than
	// its numberOfReplicas loses one only with data locality or replica
	// auto-balance on.
	RuleExtraReplicaCleanup Rule = "extra-replica-cleanup"
	// RuleReplicaSpace: a new replica lands only on a disk it fits on,
	// by what it holds and by its volume's size.
	RuleReplicaSpace Rule = "replica-space"
)

// RuleInfo describes one rule: what Longhorn does and where its code says so.
type RuleInfo struct {
	Rule Rule
	// Does says what Longhorn does.
	Does string
	// Evidence is the upstream code, as LM@v1.12.1:path:lines (longhorn-manager),
	// SPDK@v1.12.1:... (longhorn-spdk-engine), k8s:... (Kubernetes) or
	// linux:... (the kernel).
	Evidence string
	// Played says which package plays it: sim, or longhornsim on
	// Longhorn's objects.
	Played string
}

// Rules lists every rule, in the order of sim/RULES.md.
var Rules = []RuleInfo{
	{RuleRevertWhileSwitchingOver, "a switch-over is reverted while a replica is WO or in the engine with no mode yet, or the current engine does not run, in preparing and switching-over (not finalizing)",
		"LM@v1.12.1:controller/volume_controller.go:6462-6500, 6550, 6595, 6720-6756", "sim"},
	{RuleRevertLeavesPathDown, "a revert after the initiator's switching phase leaves the old path inaccessible: the next promoting call goes to the old address, which the data plane takes as a no-op",
		"LM@v1.12.1:controller/volume_controller.go:6502-6543; controller/engine_frontend_controller.go:474-486; SPDK@v1.12.1:pkg/spdk/enginefrontend.go:1481-1492, 2010-2035", "sim"},
	{RuleReplenishWithOneEngine, "replicas are reused or added only with exactly one Engine object; the replica reconcile runs before the switch-over code in the same pass",
		"LM@v1.12.1:controller/volume_controller.go:615-673 (619 before 651), 943, 957, 998", "sim"},
	{RuleOneRebuildPerVolume, "no replica is added while one is WO or in the engine with no mode; one per pass",
		"LM@v1.12.1:controller/volume_controller.go:3703-3705, 3716-3719; controller/engine_controller.go:3123-3145; SPDK@v1.12.1:pkg/spdk/engine.go:847-851", "sim"},
	{RuleReplenishmentWait, "a new replica elsewhere waits replica-replenishment-wait-interval (600 s) from status.lastDegradedAt while a failed replica is potentially reusable, whatever its node's scheduling",
		"LM@v1.12.1:scheduler/replica_scheduler.go:1044-1090, 1189-1203, 1583-1605; types/setting.go:1110-1123", "sim"},
	{RuleReplicaLinkTimeout, "stopping a replica the engine's RAID still holds makes writes wait for the replica link's fast-io-fail timeout (10 s); Longhorn's own two-step waits for the engine first (replica deletion only)",
		"SPDK@v1.12.1:pkg/spdk/types.go:53-73; LM@v1.12.1:controller/replica_controller.go:261-270, 684-762", "sim"},
	{RuleIMPodLingers, "Longhorn deletes IMs in the foreground; the IM pod blocks its owner's deletion; the next v2 IM waits while another IM object of the node is not stopped",
		"LM@v1.12.1:datastore/longhorn.go:4730-4745, 4772-4777; controller/instance_manager_controller.go:359-363, 425-455", "sim, longhornsim (plays the garbage collector)"},
	{RuleIMOverlapFails, "an IM pod admitted beside a terminating one fails OutOfhugepages-2Mi (terminating pods still count); Longhorn recreates it under a 1-120 s backoff",
		"k8s:pkg/kubelet/lifecycle/predicate.go; LM@v1.12.1:controller/instance_manager_controller.go:514-519, 745-752, 2127", "sim"},
	{RuleNoIMOnCordonedNode, "no IM pod is created while the Kubernetes node is cordoned (spec.unschedulable)",
		"LM@v1.12.1:controller/instance_manager_controller.go:735-743; datastore/kubernetes.go:767-775", "sim"},
	{RuleDefaultIMFollowsSetting, "the node controller deletes idle IMs whose image is neither the default nor its own flag's, and creates the default-image IM only when its manager's --instance-manager-image is the default (recreating it if deleted)",
		"LM@v1.12.1:controller/node_controller.go:1150-1244", "sim"},
	{RuleShardsNotCounted, "an IM's in-use check counts engines, engine frontends and replicas only, never shards or shard groups",
		"LM@v1.12.1:controller/node_controller.go:1160-1168; k8s/pkg/apis/longhorn/v1beta2/instancemanager.go:250-255", "sim"},
	{RuleSnapshotCRSync, "syncSnapshotCRs runs for every engine not being deleted and deletes the Snapshot objects its status.snapshots lacks (nil for a new engine); the snapshot controller deletes the snapshot from every replica once one running engine is left",
		"LM@v1.12.1:controller/engine_controller.go:402-404, 1572-1631; controller/snapshot_controller.go:435-539, 754-768, 808-876", "longhornsim"},
	{RuleV1120TargetIP, "v1.12.0 sets the EngineFrontend's target from the engine's status.ip; v1.12.1 from status.storageIP",
		"LM@v1.12.0:controller/volume_controller.go:2568-2569, 5620-5621, 5698, 5712; LM@v1.12.1:controller/volume_controller.go:2986-2987, 6533-6534, 6611, 6625", "longhornsim"},
	{RuleNoSecondPathWithoutMultipath, "without native NVMe multipath (nvme_core.multipath=N) each path to a namespace is a device of its own: the path a switch-over adds does not serve the volume's device, which has no usable path once the old one is inaccessible",
		"linux:drivers/nvme/host/multipath.c (module_param multipath, 0444), drivers/nvme/host/core.c (nvme_alloc_ns: a disk per controller without multipath); LM@v1.12.1:controller/monitor/environment_check_monitor.go:327-344 (checks multipathd only)", "sim"},
	{RuleExtraReplicaCleanup, "with more healthy replicas than spec.numberOfReplicas, one is deleted only when data locality is not disabled (the smallest-named healthy one off the engine's node) or replica auto-balance is not disabled (ignored follows the global setting, disabled by default; its choice is by node, zone and disk); with both disabled none is, whatever the count",
		"LM@v1.12.1:controller/volume_controller.go:1321-1356, 1643-1704, 1706-1739, 3636-3638", "sim"},
	{RuleReplicaSpace, "a new replica lands only on a schedulable disk of its engine's type where storageAvailable less the volume's actualSize stays above storage-minimal-available-percentage (25) of storageMaximum, and spec.size plus storageScheduled stays within storage-over-provisioning-percentage (100) of storageMaximum less storageReserved; storageScheduled counts every replica on the disk, failed ones too",
		"LM@v1.12.1:scheduler/replica_scheduler.go:138-205, 531-615, 1225-1262, 1311-1348, 1426-1446; controller/node_controller.go:969-1011; types/setting.go:690-713", "sim"},
}

// On reports whether the simulated Longhorn plays rule (Config.Disable
// switches rules off).
func (c Config) On(rule Rule) bool { return !slices.Contains(c.Disable, rule) }

func (s *Sim) on(rule Rule) bool { return s.cfg.On(rule) }

// Config returns the configuration the simulator runs with.
func (s *Sim) Config() Config {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cfg
}
