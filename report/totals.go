package report

import (
	"cmp"
	"slices"
	"time"

	"github.com/switchback-dev/switchback/events"
)

// totals sums a finished timeline up: per step over the nodes, per node,
// and the volumes whose targets were away longest.
func totals(t *Timeline) Totals {
	tot := Totals{Duration: t.End.Sub(t.Start)}
	perStep := map[events.NodeState]*StepTotal{}
	for _, step := range events.NodeSteps {
		tot.Steps = append(tot.Steps, StepTotal{Step: step})
	}
	for i := range tot.Steps {
		perStep[tot.Steps[i].Step] = &tot.Steps[i]
	}
	var vols []VolumeTotal
	for _, n := range t.Nodes {
		if n.Start.IsZero() {
			continue
		}
		nt := NodeTotal{Node: n.Name, State: n.State, Duration: n.End.Sub(n.Start)}
		for _, s := range n.Steps {
			if st := perStep[s.Name]; st != nil {
				st.Nodes++
				st.Total += s.Duration()
			}
		}
		for _, s := range n.Stalls {
			nt.Stalled += s.End.Sub(s.Start)
		}
		tot.Stalled += nt.Stalled
		tot.Nodes = append(tot.Nodes, nt)
		for _, v := range n.Volumes {
			vols = append(vols, VolumeTotal{Node: n.Name, Volume: v.Name, Away: max(v.Away(t.End), 0)})
		}
	}
	// Stable sorts: equal times keep plan order, so the page is the same
	// every time it is made from the same history.
	slices.SortStableFunc(tot.Nodes, func(a, b NodeTotal) int { return cmp.Compare(b.Duration, a.Duration) })
	slices.SortStableFunc(vols, func(a, b VolumeTotal) int { return cmp.Compare(b.Away, a.Away) })
	tot.Volumes = vols[:min(len(vols), SlowestVolumes)]
	return tot
}

// Share is d as a percentage of whole (0 when whole is not positive),
// within [0, 100]: the width of a bar.
func Share(d, whole time.Duration) float64 {
	if whole <= 0 {
		return 0
	}
	return min(max(float64(d)/float64(whole)*100, 0), 100)
}
