package v1beta2

// Condition types used in status.conditions of both kinds.
//
// Preconditions of an upgrade are conditions (docs/design.md, rule R3),
// so that a user sees which one holds the upgrade back and why; the summary
// conditions Ready, Progressing, Stalled and Degraded follow the usual
// Kubernetes meaning so that generic tools (kubectl wait, kstatus) work.
const (
	// ConditionDefaultImageOnAllNodesReady is True when the target
	// instance-manager image is pulled and ready on every node to upgrade.
	ConditionDefaultImageOnAllNodesReady = "DefaultImageOnAllNodesReady"
	// ConditionDataEngineSupported is True when spec.dataEngine is one the
	// controller upgrades (v2). Admission refuses others; the condition
	// covers a manager written while the webhook was down.
	ConditionDataEngineSupported = "DataEngineSupported"
	// ConditionNodesKnown is True when every node named in spec.nodes exists
	// and runs the v2 engine; False names the unknown ones.
	ConditionNodesKnown = "NodesKnown"
	// ConditionNoVersionDrift is True when no node was left on an older
	// instance-manager version by an earlier subset upgrade.
	ConditionNoVersionDrift = "NoVersionDrift"
	// ConditionSingleActiveUpgrade is True when no other manager is active.
	ConditionSingleActiveUpgrade = "SingleActiveUpgrade"
	// ConditionNoOtherUpgrader is True when Longhorn's own instance-manager
	// upgrader is off and idle. It is checked again before each node: False
	// later means the upgrade is held between nodes until it is off.
	ConditionNoOtherUpgrader = "NoOtherUpgrader"
	// ConditionAtLeastTwoNodes is True when the cluster has at least two nodes
	// with the v2 engine, so that targets have somewhere to go.
	ConditionAtLeastTwoNodes = "AtLeastTwoNodes"
	// ConditionVolumesHealthy is True when every attached v2 volume concerned
	// by the nodes to upgrade is healthy and has more than one replica.
	ConditionVolumesHealthy = "VolumesHealthy"
	// ConditionReady is True when the upgrade completed.
	ConditionReady = "Ready"
	// ConditionProgressing is True while the upgrade moves forward.
	ConditionProgressing = "Progressing"
	// ConditionStalled is True when the upgrade waits on something only the
	// user can fix (for example a volume stuck on the upgrading node); the
	// state is kept, not set to error, and the upgrade goes on once fixed.
	ConditionStalled = "Stalled"
	// ConditionDegraded is True when the upgrade ended in error.
	ConditionDegraded = "Degraded"
)

// Condition reasons. A reason is a CamelCase machine-readable word; the
// condition message carries the human details (node or volume names).
const (
	// ReasonChecksPassed is the reason of a precondition that holds.
	ReasonChecksPassed = "ChecksPassed"
	// ReasonImageNotReady is the reason DefaultImageOnAllNodesReady is False.
	ReasonImageNotReady = "ImageNotReady"
	// ReasonUnknownNodes is the reason NodesKnown is False.
	ReasonUnknownNodes = "UnknownNodes"
	// ReasonNodesWithoutV2Engine is the reason NodesKnown is False when the
	// named nodes exist but none of them runs the v2 engine.
	ReasonNodesWithoutV2Engine = "NodesWithoutV2Engine"
	// ReasonUnsupportedDataEngine is the reason DataEngineSupported is False.
	ReasonUnsupportedDataEngine = "UnsupportedDataEngine"
	// ReasonVersionDrift is the reason NoVersionDrift is False.
	ReasonVersionDrift = "VersionDrift"
	// ReasonAnotherUpgradeActive is the reason SingleActiveUpgrade is False.
	ReasonAnotherUpgradeActive = "AnotherUpgradeActive"
	// ReasonOtherUpgraderActive is the reason NoOtherUpgrader is False (and
	// Stalled True while an upgrade is held for it).
	ReasonOtherUpgraderActive = "OtherUpgraderActive"
	// ReasonOtherUpgraderUnknown is the reason NoOtherUpgrader is Unknown
	// (and Stalled True) while a running upgrade is held because Longhorn's
	// own upgrader cannot be read.
	ReasonOtherUpgraderUnknown = "OtherUpgraderUnknown"
	// ReasonTooFewNodes is the reason AtLeastTwoNodes is False.
	ReasonTooFewNodes = "TooFewNodes"
	// ReasonVolumeUnhealthy is the reason VolumesHealthy is False because a
	// concerned volume is not healthy.
	ReasonVolumeUnhealthy = "VolumeUnhealthy"
	// ReasonSingleReplica is the reason VolumesHealthy is False because a
	// concerned volume has only one replica.
	ReasonSingleReplica = "SingleReplica"
	// ReasonPending is used while nothing has been checked yet.
	ReasonPending = "Pending"
	// ReasonUpgrading is the reason Progressing is True.
	ReasonUpgrading = "Upgrading"
	// ReasonVolumeBlocked is the reason Stalled is True when a volume keeps a
	// node upgrade from moving on.
	ReasonVolumeBlocked = "VolumeBlocked"
	// ReasonCompleted is the reason Ready is True.
	ReasonCompleted = "Completed"
	// ReasonFailed is the reason Degraded is True and Ready False after an
	// error.
	ReasonFailed = "Failed"
	// ReasonCancelled is used on every summary condition after a cancel.
	ReasonCancelled = "Cancelled"
)
