package plan

import (
	"fmt"
	"slices"
	"strings"

	"github.com/switchback-dev/switchback/dataplane"
)

// Footprint returns, sorted, every node an attached v2 volume depends on
// while one of them is upgraded: the nodes holding its replicas (failed
// ones included: Longhorn may reuse them), its target, the home its engine
// returns to, a recorded move's nodes, and its initiator. Two nodes of one
// footprint are never upgraded at once: the volume would lose two of its
// legs together (two replicas, or the target's temporary home and its
// replica, or the initiator and the target). A detached volume has none:
// nothing of it runs, and the upgrade touches none of its replicas.
func Footprint(v dataplane.Volume) []string {
	if v.DataEngine != dataplane.DataEngineV2 || !v.Attached() {
		return nil
	}
	out := []string{v.AttachedNode, v.TargetHost(), v.EngineHome(v.EngineNode)}
	for _, r := range v.Replicas {
		out = append(out, r.Node)
	}
	if a := v.Away; a != nil {
		out = append(out, a.Node, v.EngineHome(a.EngineNodeBefore), a.Temporary)
	}
	out = slices.DeleteFunc(out, func(n string) bool { return n == "" })
	slices.Sort(out)
	return slices.Compact(out)
}

// Wave is a set of nodes upgraded at once.
type Wave struct {
	// Nodes are the wave's nodes, in the upgrade order.
	Nodes []string `json:"nodes"`
}

// waveOf is the result of splitting an order into waves: the waves, and,
// with more than one node a wave, for each node placed in a later wave
// than the first, why it could not join the wave before its own.
type waveOf struct {
	waves  []Wave
	waited map[string]string
}

// splitWaves groups order into waves of at most limit nodes (below 1: 1):
// each wave takes, in order, every node left that shares no volume's
// footprint with a node already in it, until it is full; the nodes it
// passed over make the next waves, in order. With limit 1 each wave is one
// node, in order: today's sequence. A node may so join an earlier wave
// than a node before it in the order.
func splitWaves(vols []dataplane.Volume, order []string, limit int) waveOf {
	limit = max(limit, 1)
	footprints := map[string][]string{} // node → volumes whose footprint holds it, sorted
	holds := map[string]map[string]bool{}
	for _, v := range vols {
		for _, n := range Footprint(v) {
			footprints[n] = append(footprints[n], v.Name)
			if holds[n] == nil {
				holds[n] = map[string]bool{}
			}
			holds[n][v.Name] = true
		}
	}
	shared := func(a, b string) string {
		for _, name := range footprints[a] {
			if holds[b][name] {
				return name
			}
		}
		return ""
	}
	out := waveOf{waited: map[string]string{}}
	left := slices.Clone(order)
	for len(left) > 0 {
		var wave, rest []string
		number := len(out.waves) + 1
		for _, n := range left {
			why := ""
			for _, w := range wave {
				if vol := shared(n, w); vol != "" {
					why = fmt.Sprintf("volume %s depends on it and on %s (wave %d)", vol, w, number)
					break
				}
			}
			if why == "" && len(wave) == limit {
				why = fmt.Sprintf("wave %d had its %d node(s)", number, limit)
			}
			if why == "" {
				wave = append(wave, n)
				continue
			}
			if limit > 1 {
				out.waited[n] = why
			}
			rest = append(rest, n)
		}
		out.waves = append(out.waves, Wave{Nodes: wave})
		left = rest
	}
	return out
}

// String is the wave's nodes as one line.
func (w Wave) String() string { return strings.Join(w.Nodes, ", ") }
