package precheck

import (
	"fmt"
	"slices"
	"strings"

	"github.com/switchback-dev/switchback/dataplane"
)

// CheckReplicaSchedulingAllowed passes when every node to upgrade that holds
// a replica of an attached v2 volume allows replica scheduling (Longhorn's
// node spec.allowScheduling), or when the request accepts such nodes
// (spec.allowNodesWithoutReplicaScheduling).
//
// A node upgrade fails the node's replicas and counts on Longhorn reusing
// them once the new instance manager runs. Longhorn reuses a failed replica
// only on a node that allows scheduling, but still waits for it, up to its
// replica-replenishment-wait-interval, before it rebuilds one elsewhere: on
// such a node, every volume rebuilds a whole replica on another node after
// that wait, and stays degraded when no node can take one. The upgrade
// restores the node's setting as it found it, so it does not lift that by
// itself. The message names each node and the volumes concerned.
func CheckReplicaSchedulingAllowed(in Input) Result {
	var problems []string
	for _, name := range upgradeNodes(in) {
		n, _ := in.Cluster.Node(name)
		if n.AllowScheduling {
			continue
		}
		if vols := replicaVolumesOn(in.Cluster.Volumes, name); len(vols) > 0 {
			problems = append(problems, fmt.Sprintf("%s (replicas of %s)", name, strings.Join(vols, ", ")))
		}
	}
	switch {
	case len(problems) == 0:
		return pass(ReplicaSchedulingAllowed, "every node to upgrade that holds replicas of attached v2 volumes allows replica scheduling")
	case in.AllowNodesWithoutReplicaScheduling:
		return pass(ReplicaSchedulingAllowed, "spec.allowNodesWithoutReplicaScheduling accepts nodes that do not allow replica scheduling: %s; "+
			"Longhorn rebuilds their replicas on other nodes instead of reusing them", strings.Join(problems, "; "))
	}
	return fail(ReplicaSchedulingAllowed, ReasonReplicaSchedulingDisabled,
		"nodes to upgrade do not allow replica scheduling (spec.allowScheduling is false) and hold replicas of attached v2 volumes: %s; "+
			"Longhorn would not reuse those replicas after the upgrade but rebuild each on another node once replica-replenishment-wait-interval has passed: "+
			"allow scheduling on them, or set spec.allowNodesWithoutReplicaScheduling in a new manager",
		strings.Join(problems, "; "))
}

// CheckFailedReplicasReusable passes when Longhorn would reuse every
// replica the upgrade fails: those of attached v2 volumes on the nodes to
// upgrade. With fast-replica-rebuild-enabled not true for v2 (or a value
// Longhorn cannot read), Longhorn neither reuses a failed v2 replica nor
// waits for one: the moment a node's replicas are failed it builds each
// again on another node, a full copy, and a rebuild starting while the
// volume's target moves makes Longhorn revert the move. The fix is
// Longhorn's setting; no spec field accepts it.
func CheckFailedReplicasReusable(in Input) Result {
	var vols []string
	for _, name := range upgradeNodes(in) {
		for _, v := range in.Cluster.Volumes {
			if v.DataEngine == dataplane.DataEngineV2 && v.Attached() && v.NoReplicaReuse &&
				slices.ContainsFunc(v.Replicas, func(r dataplane.Replica) bool { return r.Node == name }) {
				vols = append(vols, v.Name)
			}
		}
	}
	slices.Sort(vols)
	vols = slices.Compact(vols)
	if len(vols) == 0 {
		return pass(FailedReplicasReusable, "Longhorn reuses the replicas the upgrade fails (fast-replica-rebuild-enabled is true for v2)")
	}
	return fail(FailedReplicasReusable, ReasonFastReplicaRebuildDisabled,
		"Longhorn's setting fast-replica-rebuild-enabled is not true for v2, so it would reuse none of the replicas the upgrade fails "+
			"(attached v2 volumes %s) and would build each again on another node at once, a full copy that also reverts its target's move: "+
			`set it to {"v1":"true","v2":"true"} (its default)`, strings.Join(vols, ", "))
}

// replicaVolumesOn names, sorted, the attached v2 volumes with a replica on
// node.
func replicaVolumesOn(vols []dataplane.Volume, node string) []string {
	var out []string
	for _, v := range vols {
		if v.DataEngine != dataplane.DataEngineV2 || !v.Attached() {
			continue
		}
		if slices.ContainsFunc(v.Replicas, func(r dataplane.Replica) bool { return r.Node == node }) {
			out = append(out, v.Name)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
