package precheck

import (
	"fmt"
	"strings"

	"github.com/switchback-dev/switchback/plan"
)

// Check names. Each is the condition type its result is projected to.
const (
	// DataEngineSupported holds when spec.dataEngine is v2, the only engine
	// that can be upgraded live.
	DataEngineSupported = "DataEngineSupported"
	// NodesKnown holds when every node in spec.nodes exists and runs the v2
	// engine. Unknown nodes refuse the upgrade (docs/design.md, rule R4: it
	// is not started, and the user is told which names are wrong).
	NodesKnown = "NodesKnown"
	// AtLeastTwoNodes holds when at least two nodes run the v2 engine, so a
	// target has somewhere to go while its node's IM is replaced.
	AtLeastTwoNodes = "AtLeastTwoNodes"
	// SingleActiveUpgrade holds when no other upgrade manager is active.
	SingleActiveUpgrade = "SingleActiveUpgrade"
	// NoOtherUpgrader holds when Longhorn's own instance-manager upgrader is
	// off and idle, so that two upgraders never move the same engines.
	NoOtherUpgrader = "NoOtherUpgrader"
	// DefaultImageOnAllNodesReady holds when the target image is present on
	// every node to upgrade (the name the design gives it: docs/design.md, R3).
	DefaultImageOnAllNodesReady = "DefaultImageOnAllNodesReady"
	// NoVersionDrift holds when no node was left on an older instance-manager
	// image by an earlier, unfinished upgrade.
	NoVersionDrift = "NoVersionDrift"
	// ReplicaSchedulingAllowed holds when every node to upgrade that holds
	// replicas of attached v2 volumes lets Longhorn reuse them afterwards,
	// or the request accepts that it will not.
	ReplicaSchedulingAllowed = "ReplicaSchedulingAllowed"
	// FailedReplicasReusable holds when Longhorn would reuse the replicas
	// the upgrade fails (fast-replica-rebuild-enabled true for v2).
	FailedReplicasReusable = "FailedReplicasReusable"
	// TemporaryReplicasFit holds when, under spec.replicaPolicy
	// add-first, every temporary replica the upgrade asks for has a node
	// and disk with room outside the node in flight.
	TemporaryReplicasFit = "TemporaryReplicasFit"
	// VolumesHealthy holds when every attached v2 volume concerned by the
	// nodes to upgrade is healthy and has more than one replica.
	VolumesHealthy = "VolumesHealthy"
)

// Reasons. The reason is the machine-readable word; the message carries the
// names. They match the condition reasons of api/v1beta2 where one exists.
const (
	// ReasonChecksPassed is the reason of every check that holds.
	ReasonChecksPassed = "ChecksPassed"
	// ReasonUnsupportedDataEngine: spec.dataEngine is not v2.
	ReasonUnsupportedDataEngine = "UnsupportedDataEngine"
	// ReasonUnknownNodes: spec.nodes names nodes that do not exist.
	ReasonUnknownNodes = "UnknownNodes"
	// ReasonNodesWithoutV2Engine: spec.nodes names existing nodes that do not
	// run the v2 engine (and no unknown node).
	ReasonNodesWithoutV2Engine = "NodesWithoutV2Engine"
	// ReasonTooFewNodes: fewer than two nodes run the v2 engine.
	ReasonTooFewNodes = "TooFewNodes"
	// ReasonAnotherUpgradeActive: another manager is active.
	ReasonAnotherUpgradeActive = "AnotherUpgradeActive"
	// ReasonOtherUpgraderActive: Longhorn's own instance-manager upgrader
	// is switched on or at work.
	ReasonOtherUpgraderActive = "OtherUpgraderActive"
	// ReasonOtherUpgraderUnknown: Longhorn's own upgrader could not be read
	// before a node of a running upgrade, which is held until it can.
	ReasonOtherUpgraderUnknown = "OtherUpgraderUnknown"
	// ReasonImageNotReady: the target image is missing on a node to upgrade,
	// or there is no target image.
	ReasonImageNotReady = "ImageNotReady"
	// ReasonVersionDrift: an earlier upgrade left nodes on another image.
	ReasonVersionDrift = "VersionDrift"
	// ReasonReplicaSchedulingDisabled: a node to upgrade does not allow
	// replica scheduling and holds replicas of attached v2 volumes.
	ReasonReplicaSchedulingDisabled = "ReplicaSchedulingDisabled"
	// ReasonFastReplicaRebuildDisabled: Longhorn's fast-replica-rebuild-enabled
	// is not true for v2, so it reuses no failed v2 replica.
	ReasonFastReplicaRebuildDisabled = "FastReplicaRebuildDisabled"
	// ReasonNoRoomForTemporaryReplica: under add-first, a temporary
	// replica has no node and disk to land on.
	ReasonNoRoomForTemporaryReplica = "NoRoomForTemporaryReplica"
	// ReasonVolumeUnhealthy: a concerned volume is not healthy.
	ReasonVolumeUnhealthy = "VolumeUnhealthy"
	// ReasonSingleReplica: concerned volumes are healthy but one has a single
	// replica.
	ReasonSingleReplica = "SingleReplica"
)

// Input is everything the checks look at: a cluster snapshot and the
// manager's spec, plus the other managers that are still active.
type Input struct {
	// Cluster is the snapshot the checks run against.
	Cluster plan.Cluster
	// DataEngine is spec.dataEngine.
	DataEngine string
	// RequestedNodes is spec.nodes; empty means every v2 node.
	RequestedNodes []string
	// TargetImage is the instance-manager image the upgrade moves to.
	TargetImage string
	// ActiveUpgrades are the other managers that are not completed, error or
	// cancelled, as namespace/name.
	ActiveUpgrades []string
	// AllowNodesWithoutReplicaScheduling is the spec field of that name.
	AllowNodesWithoutReplicaScheduling bool
	// ReplicaPolicy is spec.replicaPolicy ("" is rebuild).
	ReplicaPolicy string
}

// Result is the outcome of one check.
type Result struct {
	// Check is the check's name: the condition type.
	Check string `json:"check"`
	// Passed is the condition's status.
	Passed bool `json:"passed"`
	// Reason is a CamelCase word: ReasonChecksPassed or why it failed.
	Reason string `json:"reason"`
	// Message says, for a human, what holds or what is wrong, naming nodes,
	// volumes and images.
	Message string `json:"message"`
}

// checks is the fixed order of Run. It goes from the request itself to the
// cluster: first what is wrong with the spec whatever the cluster
// (DataEngineSupported, NodesKnown), then the cluster's shape
// (AtLeastTwoNodes), other upgrades (SingleActiveUpgrade, then Longhorn's
// own upgrader: NoOtherUpgrader), the image
// (DefaultImageOnAllNodesReady), versions (NoVersionDrift), the nodes'
// settings (ReplicaSchedulingAllowed), Longhorn's (FailedReplicasReusable),
// the room add-first needs (TemporaryReplicasFit), and last the
// volumes, the most detailed and the most likely to change from one try to
// the next. The order is also the order of the precheck events and conditions.
var checks = []struct {
	name string
	run  func(Input) Result
}{
	{DataEngineSupported, CheckDataEngineSupported},
	{NodesKnown, CheckNodesKnown},
	{AtLeastTwoNodes, CheckAtLeastTwoNodes},
	{SingleActiveUpgrade, CheckSingleActiveUpgrade},
	{NoOtherUpgrader, CheckNoOtherUpgrader},
	{DefaultImageOnAllNodesReady, CheckDefaultImageOnAllNodesReady},
	{NoVersionDrift, CheckNoVersionDrift},
	{ReplicaSchedulingAllowed, CheckReplicaSchedulingAllowed},
	{FailedReplicasReusable, CheckFailedReplicasReusable},
	{TemporaryReplicasFit, CheckTemporaryReplicasFit},
	{VolumesHealthy, CheckVolumesHealthy},
}

// Run evaluates every check in the fixed order (see Names), each on the whole
// input and regardless of the others' results, so the user sees all problems
// at once.
func Run(in Input) []Result {
	out := make([]Result, 0, len(checks))
	for _, c := range checks {
		out = append(out, c.run(in))
	}
	return out
}

// Names returns the check names in the order Run evaluates them.
func Names() []string {
	out := make([]string, len(checks))
	for i, c := range checks {
		out[i] = c.name
	}
	return out
}

// Passed reports whether every result passed. No result at all is not a
// pass: an upgrade nothing was checked for must not start.
func Passed(results []Result) bool {
	if len(results) == 0 {
		return false
	}
	for _, r := range results {
		if !r.Passed {
			return false
		}
	}
	return true
}

// Summary says in one line whether the checks passed and, if not, which ones
// failed, in order.
func Summary(results []Result) string {
	if len(results) == 0 {
		return "no precheck was run"
	}
	var failed []string
	for _, r := range results {
		if !r.Passed {
			failed = append(failed, r.Check)
		}
	}
	if len(failed) == 0 {
		return fmt.Sprintf("all %d prechecks passed", len(results))
	}
	return fmt.Sprintf("%d of %d prechecks failed: %s", len(failed), len(results), strings.Join(failed, ", "))
}

func pass(check, format string, args ...any) Result {
	return Result{Check: check, Passed: true, Reason: ReasonChecksPassed, Message: fmt.Sprintf(format, args...)}
}

func fail(check, reason, format string, args ...any) Result {
	return Result{Check: check, Passed: false, Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// upgradeNodes are the nodes this upgrade covers that exist and run the v2
// engine, in plan order. Nodes NodesKnown refuses are left out of the other
// checks so that each problem is reported once, by the check it belongs to.
func upgradeNodes(in Input) []string {
	var out []string
	for _, name := range plan.TargetNodes(in.Cluster, in.RequestedNodes) {
		if n, ok := in.Cluster.Node(name); ok && n.V2 {
			out = append(out, name)
		}
	}
	return out
}
