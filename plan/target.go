package plan

import (
	"fmt"
	"slices"
	"strings"

	"github.com/switchback-dev/switchback/dataplane"
)

// ChooseTemporaryTarget picks the node that hosts vol's target while the
// instance manager of upgrading is replaced.
//
// A candidate must be Ready (a target on a NotReady node would cut I/O), run
// the v2 engine with a running IM (the target lives in that process), and
// not be the node upgrading. Among candidates it prefers, in order:
//  1. a node whose IM already runs targetImage: that IM will not be replaced
//     again during this upgrade, so the target moves once there and once back;
//  2. a node holding a healthy replica of vol: the target then reads and
//     writes one replica locally instead of over the network;
//  3. the node hosting the fewest targets, to spread the load (vol's own
//     target does not count against the node it already runs on, so asking
//     again after the switch-over gives the same node);
//  4. the name, so the choice is deterministic.
//
// reason explains the choice, or, when ok is false, says what is missing: the
// volume is not an attached v2 volume, or why each node was ruled out.
func ChooseTemporaryTarget(c Cluster, vol dataplane.Volume, upgrading string, targetImage string) (node string, reason string, ok bool) {
	return newView(c).choose(vol, upgrading, targetImage, nil)
}

// candidate is a node that may host a target, with what ranks it.
type candidate struct {
	name    string
	onImage bool
	local   bool
	load    int
}

// better reports whether c ranks before o (see ChooseTemporaryTarget).
func (c candidate) better(o candidate) bool {
	switch {
	case c.onImage != o.onImage:
		return c.onImage
	case c.local != o.local:
		return c.local
	case c.load != o.load:
		return c.load < o.load
	}
	return c.name < o.name
}

// choose is ChooseTemporaryTarget over an index; extra counts targets that
// the plan being built has already sent to a node for the same node upgrade.
func (v *view) choose(vol dataplane.Volume, upgrading, image string, extra map[string]int) (string, string, bool) {
	if vol.DataEngine != dataplane.DataEngineV2 {
		return "", fmt.Sprintf("%s is not a v2 volume: its target does not live in a v2 instance manager", vol.Name), false
	}
	if !vol.Attached() {
		return "", fmt.Sprintf("%s is detached: it has no target to move", vol.Name), false
	}
	set := v.candidates(upgrading, image)
	var (
		best  candidate
		found bool
	)
	for _, c := range set.nodes {
		c.local = hasHealthyReplica(vol, c.name)
		c.load += extra[c.name]
		// vol's own target is counted on its node (when the counts saw it
		// there) and must not weigh against staying there.
		if vol.TargetHost() == c.name && c.load > 0 {
			c.load--
		}
		if !found || c.better(best) {
			best, found = c, true
		}
	}
	if !found {
		why := "the cluster has no other node"
		if len(set.rejected) > 0 {
			why = strings.Join(set.rejected, "; ")
		}
		return "", fmt.Sprintf("no node can host the target of %s while %s is upgraded: %s", vol.Name, upgrading, why), false
	}
	return best.name, v.explain(best, vol.Name, image), true
}

// candidateSet is what ranks the nodes for one upgrading node and target
// image, whatever the volume: the nodes that may host a target (their load
// without the volume's own placement) and why each other node may not.
type candidateSet struct {
	nodes    []candidate
	rejected []string
}

// candidates returns the set for upgrading and image, worked out once per
// view state: a worker choosing for every volume of its node would
// otherwise rule every node of the cluster in or out once per volume.
func (v *view) candidates(upgrading, image string) candidateSet {
	key := upgrading + "\x00" + image
	if set, ok := v.sets[key]; ok {
		return set
	}
	var set candidateSet
	for _, n := range v.nodes {
		if why := v.disqualify(n, upgrading); why != "" {
			set.rejected = append(set.rejected, n.Name+" "+why)
			continue
		}
		set.nodes = append(set.nodes, candidate{
			name:    n.Name,
			onImage: image != "" && slices.Contains(v.running[n.Name], image),
			load:    v.targets[n.Name],
		})
	}
	if v.sets == nil {
		v.sets = map[string]candidateSet{}
	}
	v.sets[key] = set
	return set
}

// disqualify says why n cannot host a target while upgrading is upgraded, or
// "" when it can. The first rule that applies is reported.
func (v *view) disqualify(n dataplane.Node, upgrading string) string {
	switch {
	case n.Name == upgrading:
		return "is the node being upgraded"
	case v.flying[n.Name]:
		return "is upgraded in the same wave"
	case !n.V2:
		return "does not run the v2 data engine"
	case !n.Ready:
		return "is not ready"
	case len(v.running[n.Name]) == 0:
		return "has no running v2 instance manager"
	}
	return ""
}

func (v *view) explain(c candidate, vol, image string) string {
	var b strings.Builder
	b.WriteString(c.name)
	switch {
	case c.onImage:
		fmt.Fprintf(&b, " runs the target image %s", image)
	case image == "":
		fmt.Fprintf(&b, " runs %s (no target image given)", strings.Join(v.running[c.name], "+"))
	default:
		fmt.Fprintf(&b, " does not run the target image %s yet (runs %s)", image, strings.Join(v.running[c.name], "+"))
	}
	if c.local {
		fmt.Fprintf(&b, ", holds a healthy replica of %s", vol)
	} else {
		fmt.Fprintf(&b, ", holds no healthy replica of %s", vol)
	}
	fmt.Fprintf(&b, " and hosts %d other target(s)", c.load)
	return b.String()
}

func hasHealthyReplica(vol dataplane.Volume, node string) bool {
	return slices.ContainsFunc(vol.Replicas, func(r dataplane.Replica) bool { return r.Node == node && r.Healthy() })
}

// Chooser chooses temporary targets for many volumes against one snapshot,
// indexing it once, and spreads the volumes it places: each choice counts as
// load on its node for the next one. A worker switching a node's volumes over
// uses one Chooser per round.
type Chooser struct {
	v      *view
	placed map[string]int
}

// NewChooser indexes c.
func NewChooser(c Cluster) *Chooser {
	return &Chooser{v: newView(c), placed: map[string]int{}}
}

// Unfit says why node can no longer host a target while upgrading is
// upgraded (the first rule of ChooseTemporaryTarget it breaks, or that the
// cluster has no such node), or "" when it still can.
func (ch *Chooser) Unfit(node, upgrading string) string {
	for _, n := range ch.v.nodes {
		if n.Name == node {
			return ch.v.disqualify(n, upgrading)
		}
	}
	return "is not a node of the cluster any more"
}

// Choose is ChooseTemporaryTarget on the Chooser's snapshot, counting the
// targets it placed before.
func (ch *Chooser) Choose(vol dataplane.Volume, upgrading, targetImage string) (node string, reason string, ok bool) {
	node, reason, ok = ch.v.choose(vol, upgrading, targetImage, ch.placed)
	if ok {
		ch.placed[node]++
	}
	return node, reason, ok
}
