package precheck

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/plan"
)

func checkNames(rs []Result) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Check)
	}
	return out
}

func TestRunHealthyCluster(t *testing.T) {
	c := cluster(3, vol("vol-1", "node-1", "node-1", "node-2", "node-3"))
	rs := Run(input(c))
	require.Equal(t, []string{
		"DataEngineSupported", "NodesKnown", "AtLeastTwoNodes", "SingleActiveUpgrade", "NoOtherUpgrader",
		"DefaultImageOnAllNodesReady", "NoVersionDrift", "ReplicaSchedulingAllowed", "FailedReplicasReusable", "TemporaryReplicasFit", "VolumesHealthy",
	}, checkNames(rs))
	assert.Equal(t, Names(), checkNames(rs))
	assert.Equal(t, []Result{
		{DataEngineSupported, true, ReasonChecksPassed, `data engine "v2" is supported`},
		{NodesKnown, true, ReasonChecksPassed, "spec.nodes is empty: every node with the v2 data engine is upgraded (3)"},
		{AtLeastTwoNodes, true, ReasonChecksPassed, "3 nodes run the v2 data engine"},
		{SingleActiveUpgrade, true, ReasonChecksPassed, "no other upgrade is active"},
		{NoOtherUpgrader, true, ReasonChecksPassed, "this Longhorn has no instance-manager upgrader of its own"},
		{DefaultImageOnAllNodesReady, true, ReasonChecksPassed, "instance-manager image im:v2 is present on every node to upgrade (3)"},
		{NoVersionDrift, true, ReasonChecksPassed, "the upgrade covers every node with the v2 data engine"},
		{ReplicaSchedulingAllowed, true, ReasonChecksPassed, "every node to upgrade that holds replicas of attached v2 volumes allows replica scheduling"},
		{FailedReplicasReusable, true, ReasonChecksPassed, "Longhorn reuses the replicas the upgrade fails (fast-replica-rebuild-enabled is true for v2)"},
		{TemporaryReplicasFit, true, ReasonChecksPassed, "spec.replicaPolicy is rebuild: no temporary replica is added"},
		{VolumesHealthy, true, ReasonChecksPassed, "every attached v2 volume on the nodes to upgrade is healthy and has more than one replica (1)"},
	}, rs)
	assert.True(t, Passed(rs))
	assert.Equal(t, "all 11 prechecks passed", Summary(rs))
}

func TestRunReportsEveryProblemAtOnce(t *testing.T) {
	// One v2 node without the target image nor replica scheduling, a
	// single-replica volume whose failed replica Longhorn would not reuse, another
	// upgrade active, Longhorn's own upgrader on, a v1 request naming a
	// ghost, asking for add-first with no other node to take a temporary
	// replica: each check finds its own
	// problem, whatever the others found. NoVersionDrift needs two v2 nodes to
	// fail, so it is the one check that holds here (and fails in the drift
	// tests).
	c := plan.Cluster{
		Nodes:            []dataplane.Node{{Name: "node-1", Ready: true, V2: true, Images: []string{oldIM}}, {Name: "node-2", Ready: true}},
		InstanceManagers: []dataplane.InstanceManager{runningIM("node-1", oldIM)},
		Volumes:          []dataplane.Volume{vol("vol-1", "node-1", "node-1")},
		Upgrader:         dataplane.LonghornUpgrader{Settings: map[string]string{dataplane.SettingV2IMAutoUpgrade: "true"}},
	}
	c.Volumes[0].NoReplicaReuse = true
	in := Input{Cluster: c, DataEngine: "v1", RequestedNodes: []string{"node-1", "ghost"}, TargetImage: newIM, ActiveUpgrades: []string{"longhorn-system/earlier"},
		ReplicaPolicy: events.ReplicaPolicyAddFirst}
	assert.Equal(t, []Result{
		{DataEngineSupported, false, ReasonUnsupportedDataEngine, `data engine "v1" is not supported: only "v2" can be upgraded live`},
		{NodesKnown, false, ReasonUnknownNodes, "spec.nodes names unknown nodes: ghost; the upgrade does not start: spec.nodes cannot change, so name only existing nodes with the v2 data engine in a new manager"},
		{AtLeastTwoNodes, false, ReasonTooFewNodes, "1 node(s) run the v2 data engine (node-1); at least 2 are needed so that each target has another node to move to"},
		{SingleActiveUpgrade, false, ReasonAnotherUpgradeActive, "another upgrade is active: longhorn-system/earlier; wait until it completes or delete it"},
		{NoOtherUpgrader, false, ReasonOtherUpgraderActive, `Longhorn's own instance-manager upgrader would race this upgrade: setting allow-v2-instance-manager-automatic-upgrade is "true": set it to "false"`},
		{DefaultImageOnAllNodesReady, false, ReasonImageNotReady, "instance-manager image im:v2 is not present on nodes: node-1"},
		{NoVersionDrift, true, ReasonChecksPassed, "the upgrade covers every node with the v2 data engine"},
		{ReplicaSchedulingAllowed, false, ReasonReplicaSchedulingDisabled, "nodes to upgrade do not allow replica scheduling (spec.allowScheduling is false) and hold replicas of attached v2 volumes: node-1 (replicas of vol-1); " +
			"Longhorn would not reuse those replicas after the upgrade but rebuild each on another node once replica-replenishment-wait-interval has passed: " +
			"allow scheduling on them, or set spec.allowNodesWithoutReplicaScheduling in a new manager"},
		{FailedReplicasReusable, false, ReasonFastReplicaRebuildDisabled, "Longhorn's setting fast-replica-rebuild-enabled is not true for v2, so it would reuse none of the replicas the upgrade fails " +
			`(attached v2 volumes vol-1) and would build each again on another node at once, a full copy that also reverts its target's move: set it to {"v1":"true","v2":"true"} (its default)`},
		{TemporaryReplicasFit, false, ReasonNoRoomForTemporaryReplica, "no node outside node-1 can take a temporary replica of volume vol-1: node-2 does not schedule replicas; " +
			"free space or add a disk or node Longhorn can schedule on, or create the manager with spec.replicaPolicy rebuild"},
		{VolumesHealthy, false, ReasonSingleReplica, "attached v2 volumes on the nodes to upgrade must be healthy and have more than one replica: vol-1 has a single replica"},
	}, Run(in))
	assert.False(t, Passed(Run(in)))
	assert.Equal(t, "10 of 11 prechecks failed: DataEngineSupported, NodesKnown, AtLeastTwoNodes, SingleActiveUpgrade, NoOtherUpgrader, DefaultImageOnAllNodesReady, ReplicaSchedulingAllowed, FailedReplicasReusable, TemporaryReplicasFit, VolumesHealthy", Summary(Run(in)))
}

func TestPassedAndSummary(t *testing.T) {
	ok := Result{Check: NodesKnown, Passed: true, Reason: ReasonChecksPassed}
	bad := Result{Check: VolumesHealthy, Reason: ReasonSingleReplica}
	assert.False(t, Passed(nil), "nothing checked is not a pass")
	assert.Equal(t, "no precheck was run", Summary(nil))
	assert.True(t, Passed([]Result{ok}))
	assert.False(t, Passed([]Result{ok, bad}))
	assert.Equal(t, "1 of 2 prechecks failed: VolumesHealthy", Summary([]Result{ok, bad}))
}

func TestRunIsPure(t *testing.T) {
	c := cluster(3, vol("b", "node-2", "node-2"), vol("a", "node-1", "node-1", "node-3"))
	in := input(c, "node-2", "node-1")
	in.ActiveUpgrades = []string{"ns/z", "ns/a"}
	first := Run(in)
	assert.Equal(t, first, Run(in))
	assert.Equal(t, []string{"node-2", "node-1"}, in.RequestedNodes, "Run must not reorder the input")
	assert.Equal(t, []string{"ns/z", "ns/a"}, in.ActiveUpgrades)
	assert.Equal(t, "b", in.Cluster.Volumes[0].Name)
}

func TestEachCheckReportsItsOwnName(t *testing.T) {
	for _, c := range checks {
		assert.Equal(t, c.name, c.run(Input{}).Check)
	}
}
