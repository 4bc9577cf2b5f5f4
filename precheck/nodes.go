package precheck

import (
	"slices"
	"strings"
)

// CheckNodesKnown passes when every node of spec.nodes exists and runs the v2
// engine. It fails naming every unknown node, sorted: docs/design.md (rule R4) asks
// that such an upgrade is not started rather than silently narrowed to the
// nodes that exist. spec.nodes is immutable, so the fix is a new manager.
func CheckNodesKnown(in Input) Result {
	c := in.Cluster
	if len(in.RequestedNodes) == 0 {
		return pass(NodesKnown, "spec.nodes is empty: every node with the v2 data engine is upgraded (%d)", len(c.V2Nodes()))
	}
	var unknown, notV2 []string
	for _, name := range in.RequestedNodes {
		n, ok := c.Node(name)
		switch {
		case !ok:
			unknown = append(unknown, name)
		case !n.V2:
			notV2 = append(notV2, name)
		}
	}
	unknown, notV2 = sortedUnique(unknown), sortedUnique(notV2)
	var parts []string
	if len(unknown) > 0 {
		parts = append(parts, "spec.nodes names unknown nodes: "+strings.Join(unknown, ", "))
	}
	if len(notV2) > 0 {
		parts = append(parts, "spec.nodes names nodes without the v2 data engine: "+strings.Join(notV2, ", "))
	}
	if len(parts) > 0 {
		reason := ReasonUnknownNodes
		if len(unknown) == 0 {
			reason = ReasonNodesWithoutV2Engine
		}
		return fail(NodesKnown, reason,
			"%s; the upgrade does not start: spec.nodes cannot change, so name only existing nodes with the v2 data engine in a new manager",
			strings.Join(parts, "; "))
	}
	return pass(NodesKnown, "every node in spec.nodes exists and runs the v2 data engine (%d)", len(sortedUnique(in.RequestedNodes)))
}

// CheckAtLeastTwoNodes passes when at least two nodes run the v2 engine: a
// target must move to another node's instance manager while its own is
// replaced, so a single-node cluster cannot be upgraded live.
func CheckAtLeastTwoNodes(in Input) Result {
	v2 := in.Cluster.V2Nodes()
	if len(v2) < 2 {
		which := ""
		if len(v2) == 1 {
			which = " (" + v2[0] + ")"
		}
		return fail(AtLeastTwoNodes, ReasonTooFewNodes,
			"%d node(s) run the v2 data engine%s; at least 2 are needed so that each target has another node to move to",
			len(v2), which)
	}
	return pass(AtLeastTwoNodes, "%d nodes run the v2 data engine", len(v2))
}

// CheckDefaultImageOnAllNodesReady passes when the target image is present on
// every node to upgrade, so that the new instance manager starts at once
// instead of pulling while the node's targets wait elsewhere. The message
// lists the nodes missing it, sorted.
func CheckDefaultImageOnAllNodesReady(in Input) Result {
	if in.TargetImage == "" {
		return fail(DefaultImageOnAllNodesReady, ReasonImageNotReady,
			"no target instance-manager image: the default instance-manager image is not set")
	}
	nodes := upgradeNodes(in)
	var missing []string
	for _, name := range nodes {
		n, _ := in.Cluster.Node(name)
		if !slices.Contains(n.Images, in.TargetImage) {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return fail(DefaultImageOnAllNodesReady, ReasonImageNotReady,
			"instance-manager image %s is not present on nodes: %s", in.TargetImage, strings.Join(missing, ", "))
	}
	if len(nodes) == 0 {
		return pass(DefaultImageOnAllNodesReady, "no node to upgrade")
	}
	return pass(DefaultImageOnAllNodesReady, "instance-manager image %s is present on every node to upgrade (%d)",
		in.TargetImage, len(nodes))
}
