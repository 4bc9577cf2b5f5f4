package plan

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/switchback-dev/switchback/dataplane"
)

// TemporaryReplica is where the add-first policy's temporary replica of
// one volume is expected to land: Longhorn places it, by the rules of its
// replica scheduler as the plan plays them (docs/longhorn-evidence.md,
// "Where a new replica lands"), when the first node of the plan holding a
// replica of the volume is upgraded, and it stays until the upgrade ends.
type TemporaryReplica struct {
	// Volume is the volume's name.
	Volume string `json:"volume"`
	// Node and Disk are where it is expected; both "" when no disk can
	// take it, and Reason then says why.
	Node string `json:"node,omitempty"`
	Disk string `json:"disk,omitempty"`
	// Size is the volume's spec.size, what Longhorn schedules on the disk;
	// Bytes its actual size, what the copy writes there now.
	Size  int64 `json:"size"`
	Bytes int64 `json:"bytes"`
	// Reason is why no disk can take it ("" when one can).
	Reason string `json:"reason,omitempty"`
}

// Placed reports whether a disk was found for the replica.
func (t TemporaryReplica) Placed() bool { return t.Node != "" }

// PlaceTemporaryReplicas returns p with, on each node, the temporary
// replicas its upgrade adds under spec.replicaPolicy add-first: one for
// each attached v2 volume with a replica on the node, none on an earlier
// node of the plan, that would otherwise serve from fewer nodes than its
// numberOfReplicas. Each is placed as Longhorn would once the node's
// scheduling is off (so never on the node itself, nor on another node of
// its wave), on a node holding no replica of the volume (Switchback holds
// a volume whose temporary replica shares a node, so a soft anti-affinity
// that allows it does not count), and each placement takes its space
// before the next is chosen.
// It is a prediction: Longhorn breaks a tie between equally balanced
// disks at random, and space changes as volumes write.
func PlaceTemporaryReplicas(c Cluster, p Plan) Plan {
	v := newView(c)
	disks, zones := map[string][]dataplane.Disk{}, map[string]string{}
	for _, n := range v.nodes {
		disks[n.Name], zones[n.Name] = slices.Clone(n.Disks), n.Zone
	}
	vols := v2Volumes(c.Volumes)
	done := map[string]bool{}
	out := p
	out.Nodes = slices.Clone(p.Nodes)
	for i := range out.Nodes {
		np := &out.Nodes[i]
		np.TemporaryReplicas = nil
		wave := []string{np.Node}
		for _, o := range out.Nodes {
			if o.Wave == np.Wave && o.Node != np.Node && np.Wave != 0 {
				wave = append(wave, o.Node)
			}
		}
		for _, vol := range vols {
			if done[vol.Name] || !needsTemporary(vol, np.Node) {
				continue
			}
			done[vol.Name] = true
			t := TemporaryReplica{Volume: vol.Name, Size: sizeOf(vol), Bytes: vol.ActualSize}
			node, disk, reason := v.placeReplica(vol, wave, disks, zones)
			if reason != "" {
				t.Reason = reason
			} else {
				t.Node, t.Disk = node, disks[node][disk].Name
				disks[node][disk] = disks[node][disk].Take(t.Size, t.Bytes)
			}
			np.TemporaryReplicas = append(np.TemporaryReplicas, t)
		}
	}
	out.Room = roomOf(c, out)
	return out
}

// needsTemporary is the worker's rule for asking for a temporary replica
// before failing vol's replica on node: an attached volume, not
// strict-local, that would serve from fewer nodes than it asks for.
func needsTemporary(vol dataplane.Volume, node string) bool {
	if !vol.Attached() || vol.StrictLocal || vol.NumberOfReplicas < 1 {
		return false
	}
	if !slices.ContainsFunc(vol.Replicas, func(r dataplane.Replica) bool { return r.Node == node }) {
		return false
	}
	return vol.HealthyNodesOff(node, "") < vol.NumberOfReplicas
}

// sizeOf is what Longhorn schedules per replica of vol: spec.size, or its
// actual size when the data plane reports no spec.size.
func sizeOf(vol dataplane.Volume) int64 {
	if vol.Size > 0 {
		return vol.Size
	}
	return vol.ActualSize
}

// placeReplica chooses, for a new replica of vol while the nodes of wave
// (the first the one whose upgrade asks) are upgraded, the node and the
// index of its disk Longhorn's scheduler would take, or says why none:
// the candidates are the Ready v2 nodes that allow
// scheduling, run an IM, match the volume's node selector and hold no
// replica of it; of them, those in a zone without one first, and with zone
// anti-affinity hard, only those. Among the disks that fit, the node is
// the one leaving the nodes' usable space most even (Longhorn's balance
// with its weight on absolute bytes), then the disk on it likewise.
func (v *view) placeReplica(vol dataplane.Volume, wave []string, disks map[string][]dataplane.Disk, zones map[string]string) (string, int, string) {
	used, usedZones := map[string]bool{}, map[string]bool{}
	for _, r := range vol.Replicas {
		used[r.Node] = true
		usedZones[zones[r.Node]] = true
	}
	size := sizeOf(vol)
	type fit struct {
		node string
		disk int
	}
	var inFreeZone, inUsedZone []fit
	var why []string
	for _, n := range v.nodes {
		switch {
		case slices.Contains(wave, n.Name) || used[n.Name]:
			continue
		case !n.Ready || !n.V2 || !n.AllowScheduling || len(v.running[n.Name]) == 0:
			why = append(why, fmt.Sprintf("%s does not schedule replicas", n.Name))
			continue
		case !dataplane.SelectorMatches(n.Tags, vol.NodeSelector):
			why = append(why, fmt.Sprintf("%s lacks the node selector's tags %s", n.Name, strings.Join(vol.NodeSelector, ",")))
			continue
		case len(disks[n.Name]) == 0:
			why = append(why, fmt.Sprintf("%s reports no disk", n.Name))
			continue
		}
		for i, d := range disks[n.Name] {
			switch {
			case !d.Block || !d.Schedulable:
				why = append(why, fmt.Sprintf("%s: disk %s takes no v2 replica", n.Name, d.Name))
			case !dataplane.SelectorMatches(d.Tags, vol.DiskSelector):
				why = append(why, fmt.Sprintf("%s: disk %s lacks the disk selector's tags %s", n.Name, d.Name, strings.Join(vol.DiskSelector, ",")))
			default:
				if ok, reason := d.Fits(size, vol.ActualSize); !ok {
					why = append(why, n.Name+": "+reason)
				} else if usedZones[zones[n.Name]] {
					inUsedZone = append(inUsedZone, fit{n.Name, i})
				} else {
					inFreeZone = append(inFreeZone, fit{n.Name, i})
				}
			}
		}
	}
	fits := inFreeZone
	if len(fits) == 0 && !vol.HardZoneAntiAffinity {
		fits = inUsedZone
	}
	if len(fits) == 0 {
		if len(inUsedZone) > 0 {
			why = append(why, "replica zone anti-affinity is hard and every zone with room holds a replica")
		}
		if len(why) == 0 {
			why = append(why, "every other node holds a replica of it")
		}
		what := vol.Name
		if size > 0 {
			what += " (" + Bytes(size) + ")"
		}
		return "", 0, fmt.Sprintf("no node outside %s can take a temporary replica of volume %s: %s", strings.Join(wave, ", "), what, strings.Join(why, "; "))
	}
	var nodes []string
	nodeUsable := map[string]int64{}
	for _, f := range fits {
		if _, ok := nodeUsable[f.node]; !ok {
			nodes = append(nodes, f.node)
		}
		nodeUsable[f.node] += disks[f.node][f.disk].Usable()
	}
	best := cmp.Or(mostBalanced(nodes, nodeUsable, size), nodes[0])
	var names []string
	diskUsable, index := map[string]int64{}, map[string]int{}
	for _, f := range fits {
		if f.node == best {
			d := disks[best][f.disk]
			names = append(names, d.Name)
			diskUsable[d.Name], index[d.Name] = d.Usable(), f.disk
		}
	}
	return best, index[cmp.Or(mostBalanced(names, diskUsable, size), names[0])], ""
}

// mostBalanced is the key of usable whose taking of size leaves the
// values most even, (max - min) / mean, the first in keys on a tie; ""
// when none has size usable.
func mostBalanced(keys []string, usable map[string]int64, size int64) string {
	best, bestScore := "", math.MaxFloat64
	for _, k := range keys {
		if usable[k] < size {
			continue
		}
		usable[k] -= size
		score := imbalance(usable)
		usable[k] += size
		if score < bestScore {
			best, bestScore = k, score
		}
	}
	return best
}

// imbalance is (max - min) / mean of the values, MaxFloat64 when their
// mean is not positive.
func imbalance(values map[string]int64) float64 {
	if len(values) == 0 {
		return math.MaxFloat64
	}
	var sum int64
	lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
	for _, b := range values {
		sum += b
		lo, hi = min(lo, b), max(hi, b)
	}
	mean := float64(sum) / float64(len(values))
	if mean <= 0 {
		return math.MaxFloat64
	}
	return float64(hi-lo) / mean
}

// DiskRoom is one disk's share of the temporary replicas a plan expects
// (Plan.Room).
type DiskRoom struct {
	Node string `json:"node"`
	Disk string `json:"disk"`
	// Replicas counts the temporary replicas expected there; Size and
	// Bytes add up their spec.size and actual size.
	Replicas int   `json:"replicas"`
	Size     int64 `json:"size"`
	Bytes    int64 `json:"bytes"`
	// Usable is what the disk has usable before them (dataplane.Disk.Usable).
	Usable int64 `json:"usable"`
}

// roomOf adds up, per node and disk sorted by name, the temporary
// replicas p expects, beside each disk's usable space in c.
func roomOf(c Cluster, p Plan) []DiskRoom {
	usable := map[[2]string]int64{}
	for _, n := range c.Nodes {
		for _, d := range n.Disks {
			usable[[2]string{n.Name, d.Name}] = d.Usable()
		}
	}
	acc := map[[2]string]*DiskRoom{}
	for _, np := range p.Nodes {
		for _, t := range np.TemporaryReplicas {
			if !t.Placed() {
				continue
			}
			k := [2]string{t.Node, t.Disk}
			r := acc[k]
			if r == nil {
				r = &DiskRoom{Node: t.Node, Disk: t.Disk, Usable: usable[k]}
				acc[k] = r
			}
			r.Replicas++
			r.Size += t.Size
			r.Bytes += t.Bytes
		}
	}
	out := make([]DiskRoom, 0, len(acc))
	for _, r := range acc {
		out = append(out, *r)
	}
	slices.SortFunc(out, func(a, b DiskRoom) int {
		return cmp.Or(strings.Compare(a.Node, b.Node), strings.Compare(a.Disk, b.Disk))
	})
	return out
}
