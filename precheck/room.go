package precheck

import (
	"strings"

	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/plan"
)

// CheckTemporaryReplicasFit passes when, under spec.replicaPolicy
// add-first, every temporary replica the upgrade will ask for has a place:
// a node outside the one being upgraded that holds no replica of the
// volume, schedules replicas, matches its selectors and has a disk with
// the space, each placement taking its space before the next
// (plan.PlaceTemporaryReplicas). Without it the node's upgrade would wait
// for a replica Longhorn cannot build. Under rebuild it passes: no
// temporary replica is added.
func CheckTemporaryReplicasFit(in Input) Result {
	if in.ReplicaPolicy != events.ReplicaPolicyAddFirst {
		return pass(TemporaryReplicasFit, "spec.replicaPolicy is %s: no temporary replica is added", events.ReplicaPolicyRebuild)
	}
	p := plan.PlaceTemporaryReplicas(in.Cluster, plan.Build(in.Cluster, in.RequestedNodes, in.TargetImage))
	var placed int
	var problems []string
	for _, n := range p.Nodes {
		for _, t := range n.TemporaryReplicas {
			if t.Placed() {
				placed++
				continue
			}
			problems = append(problems, t.Reason)
		}
	}
	if len(problems) == 0 && placed == 0 {
		return pass(TemporaryReplicasFit, "no volume needs a temporary replica: each keeps its numberOfReplicas on nodes other than the one upgraded")
	}
	if len(problems) == 0 {
		return pass(TemporaryReplicasFit, "the %d temporary replica(s) of replicaPolicy add-first fit on nodes that hold no replica of their volume", placed)
	}
	return fail(TemporaryReplicasFit, ReasonNoRoomForTemporaryReplica,
		"%s; free space or add a disk or node Longhorn can schedule on, or create the manager with spec.replicaPolicy %s",
		strings.Join(problems, "; "), events.ReplicaPolicyRebuild)
}
