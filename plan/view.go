package plan

import (
	"slices"
	"strings"

	"github.com/switchback-dev/switchback/dataplane"
)

// view indexes a Cluster once so that choosing a target for every volume of
// a large plan stays linear in the number of nodes per volume, instead of
// rescanning every IM and volume per candidate.
type view struct {
	// nodes are sorted by name; of duplicate names, the first is kept.
	nodes []dataplane.Node
	// running maps a node to the sorted distinct images of its running v2 IMs.
	running map[string][]string
	// targets maps a node to the number of attached v2 volumes whose target
	// runs there.
	targets map[string]int
	// notLive holds the nodes that cannot be upgraded live on the
	// snapshot's Longhorn.
	notLive map[string]bool
	// sets caches candidates by upgrading node and image; upgraded and fly
	// clear it.
	sets map[string]candidateSet
	// flying are the nodes of the wave being planned: none hosts a
	// temporary target.
	flying map[string]bool
}

func newView(c Cluster) *view {
	v := &view{running: map[string][]string{}, targets: c.TargetCounts, notLive: NotLive(c.Platform.Profile, c.Volumes)}
	v.nodes = slices.Clone(c.Nodes)
	slices.SortStableFunc(v.nodes, func(a, b dataplane.Node) int { return strings.Compare(a.Name, b.Name) })
	v.nodes = slices.CompactFunc(v.nodes, func(a, b dataplane.Node) bool { return a.Name == b.Name })
	for _, im := range c.InstanceManagers {
		if isV2IM(im) && im.State == dataplane.IMRunning {
			v.running[im.Node] = append(v.running[im.Node], im.Image)
		}
	}
	for n, imgs := range v.running {
		slices.Sort(imgs)
		v.running[n] = slices.Compact(imgs)
	}
	if v.targets == nil {
		v.targets = dataplane.CountTargets(c.Volumes)
	}
	return v
}

// upgraded makes the view look as it will once node's upgrade completed:
// its only IM runs image. Targets are unchanged because switching back
// returns them to their node.
func (v *view) upgraded(node, image string) {
	v.sets = nil
	v.running[node] = []string{image}
}

// fly makes nodes the wave being planned.
func (v *view) fly(nodes []string) {
	v.sets = nil
	v.flying = map[string]bool{}
	for _, n := range nodes {
		v.flying[n] = true
	}
}
