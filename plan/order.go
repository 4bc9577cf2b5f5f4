package plan

import (
	"cmp"
	"slices"
	"strings"
)

// TargetNodes returns the nodes an upgrade covers, in the order they are
// upgraded: requested when it is not empty (duplicates and empty names
// dropped; unknown names are kept so that the plan shows them and the
// NodesKnown precheck refuses them), otherwise every node running the v2 data
// engine.
//
// The nodes that can be upgraded live on the snapshot's Longhorn come first
// (LiveVerdict): a node that cannot stalls the upgrade until its volumes are
// detached, and every node that needs nothing from the user is done by
// then. Within each group the order is by the number of attached v2 volumes
// whose target runs on the node, ascending, then by name. Why:
//   - least disruption first: a node hosting few targets needs few
//     switch-overs, so if something is wrong with the new image (an IM that
//     does not start, a slow rebuild) it shows on the node with the least at
//     stake, and the user can stop there;
//   - the first nodes done run the target image, and they are the preferred
//     temporary targets for the busier nodes that come later, so most moved
//     targets land on an instance manager that will not be replaced again;
//   - the name breaks ties so that the same cluster always gives the same
//     order (docs/design.md: the implementation the design was reviewed
//     with used map order, which is random).
func TargetNodes(c Cluster, requested []string) []string {
	return newView(c).order(c, requested)
}

func (v *view) order(c Cluster, requested []string) []string {
	var names []string
	if len(requested) > 0 {
		names = slices.DeleteFunc(slices.Clone(requested), func(n string) bool { return n == "" })
		slices.Sort(names)
		names = slices.Compact(names)
	} else {
		names = c.V2Nodes()
	}
	slices.SortStableFunc(names, func(a, b string) int {
		return cmp.Or(cmpBool(v.notLive[a], v.notLive[b]), cmp.Compare(v.targets[a], v.targets[b]), strings.Compare(a, b))
	})
	return names
}

// cmpBool orders false before true.
func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}
