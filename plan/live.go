package plan

import (
	"fmt"
	"slices"
	"strings"

	"github.com/switchback-dev/switchback/dataplane"
)

// initiatorNode is the node whose IM runs vol's initiator: the attached node
// of an attached v2 volume, else "".
func initiatorNode(v dataplane.Volume) string {
	if v.DataEngine != dataplane.DataEngineV2 {
		return ""
	}
	return v.AttachedNode
}

// Initiators lists, sorted, the attached v2 volumes whose initiator runs on
// node: the volumes attached there.
func Initiators(vols []dataplane.Volume, node string) []string {
	var out []string
	for _, v := range vols {
		if node != "" && initiatorNode(v) == node {
			out = append(out, v.Name)
		}
	}
	slices.Sort(out)
	return out
}

// NotLive is the set of nodes LiveVerdict refuses on profile p, computed
// over the whole cluster's volumes at once.
func NotLive(p dataplane.Profile, vols []dataplane.Volume) map[string]bool {
	out := map[string]bool{}
	if p.InitiatorsSurviveIM() {
		return out
	}
	for _, v := range vols {
		if n := initiatorNode(v); n != "" {
			out[n] = true
		}
	}
	return out
}

// LiveVerdict says whether node's instance manager can be replaced on a
// Longhorn of profile p without cutting I/O: on a profile whose initiators
// die with their node's IM, a node holding initiators of attached v2
// volumes (vols may hold any volumes; those attached elsewhere are ignored)
// cannot. why names those volumes and the remedies when ok is false.
func LiveVerdict(p dataplane.Profile, node string, vols []dataplane.Volume) (ok bool, why string) {
	if p.InitiatorsSurviveIM() {
		return true, ""
	}
	held := Initiators(vols, node)
	if len(held) == 0 {
		return true, ""
	}
	return false, fmt.Sprintf("node %s holds the initiators of attached v2 volumes %s: on Longhorn %s an initiator runs in "+
		"the instance manager of the node its volume is attached to, and replacing that instance manager would fault "+
		"those volumes; detach them or move their workloads to another node (or run a Longhorn that updates instance "+
		"managers in place), and the upgrade goes on by itself", node, strings.Join(held, ", "), p)
}

// SingleReplicaWhile lists, sorted, the attached v2 volumes concerned by
// node that will serve from a single healthy replica while node is
// upgraded: their replica there is failed, and one healthy replica is left
// elsewhere.
func SingleReplicaWhile(vols []dataplane.Volume, node string) []string {
	var out []string
	for _, v := range vols {
		if v.DataEngine != dataplane.DataEngineV2 || !v.Attached() {
			continue
		}
		here := slices.ContainsFunc(v.Replicas, func(r dataplane.Replica) bool { return r.Node == node })
		if here && v.HealthyReplicasOff(node) == 1 {
			out = append(out, v.Name)
		}
	}
	slices.Sort(out)
	return out
}

// DefaultsNote says what a profile's defaults mean for which nodes can be
// upgraded live, for the plan's reader.
func DefaultsNote(p dataplane.Profile) string {
	if p.InitiatorsSurviveIM() {
		return "initiators survive their node's instance-manager update: every node can be upgraded live once its targets moved away"
	}
	return "an engine follows its volume's attachment node unless spec.engineNodeID says otherwise, so by default a node " +
		"with attached v2 volumes holds both their initiators and their targets and cannot be upgraded live; nodes " +
		"holding only replicas, or targets of volumes attached elsewhere, can"
}
