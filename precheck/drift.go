package precheck

import (
	"slices"
	"strings"

	"github.com/switchback-dev/switchback/plan"
)

// CheckNoVersionDrift passes when this upgrade cannot leave the cluster on
// more than two instance-manager versions, and no earlier upgrade was left
// half done on another version.
//
// Subsets are allowed (some nodes now, the others later), so nodes outside
// this upgrade may lag behind, but all on one single image, and that image
// must be the one the nodes to upgrade run now: then the cluster only ever
// holds the old and the target version. It passes when:
//   - the upgrade covers every v2 node (it finishes whatever was left), or
//   - every node outside it already runs the target image, or
//   - the nodes outside it that do not run the target image all run one image
//     X, and every node to upgrade runs X (or already the target image, for
//     which the upgrade changes nothing).
//
// Otherwise an earlier upgrade was left behind, and a new one would add a
// third version: refused, listing nodes and images. Nodes without any v2
// instance manager are ignored: Longhorn creates theirs from the default
// image, which is the target.
func CheckNoVersionDrift(in Input) Result {
	c, target := in.Cluster, in.TargetImage
	requested := map[string]bool{}
	for _, n := range in.RequestedNodes {
		requested[n] = true
	}
	// behind: nodes outside this upgrade not on the target image, by name.
	var behind []string
	images := map[string]string{}
	outside := 0
	for _, name := range c.V2Nodes() {
		if len(requested) == 0 || requested[name] {
			continue
		}
		outside++
		img := c.InstanceManagerImage(name)
		if img == "" || img == target {
			continue
		}
		behind = append(behind, name)
		images[img] = name
	}
	if outside == 0 {
		return pass(NoVersionDrift, "the upgrade covers every node with the v2 data engine")
	}
	if len(behind) == 0 {
		return pass(NoVersionDrift, "every node outside this upgrade already runs %s", target)
	}
	if len(images) > 1 {
		return fail(NoVersionDrift, ReasonVersionDrift,
			"nodes outside this upgrade run different instance-manager images: %s; finish the earlier upgrade first",
			nodeImages(c, behind))
	}
	old := c.InstanceManagerImage(behind[0])
	var odd []string
	for _, name := range upgradeNodes(in) {
		img := c.InstanceManagerImage(name)
		if img != "" && img != old && img != target {
			odd = append(odd, name)
		}
	}
	if len(odd) > 0 {
		slices.Sort(odd)
		return fail(NoVersionDrift, ReasonVersionDrift,
			"nodes to upgrade run %s while the nodes outside this upgrade run %s (%s); finish the earlier upgrade first",
			nodeImages(c, odd), old, strings.Join(behind, ", "))
	}
	return pass(NoVersionDrift, "nodes outside this upgrade all run %s; the upgrade leaves no image other than it and %s", old, target)
}

// nodeImages renders "n3=im:v1.8.0, n4=im:v1.9.0" for sorted names.
func nodeImages(c plan.Cluster, names []string) string {
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = n + "=" + c.InstanceManagerImage(n)
	}
	return strings.Join(parts, ", ")
}
