package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/plan"
	"github.com/switchback-dev/switchback/workloadmove"
)

// nodeMove is what moving one node's workloads would do, as the cluster is
// now (`switchback plan --initiator-policy move-workloads`).
type nodeMove struct {
	Node string            `json:"node"`
	Move workloadmove.Move `json:"move"`
	// Budgets are the disruption budgets of the pods read, by
	// namespace/name, as they stand now.
	Budgets map[string]dataplane.Budget `json:"budgets,omitempty"`
}

// readMoves decides, for each node of the plan that cannot be upgraded
// live, how its workloads would be moved off it, reading them through r.
func readMoves(ctx context.Context, r dataplane.Reader, snap plan.Cluster, p plan.Plan) ([]nodeMove, error) {
	var out []nodeMove
	for _, n := range p.Nodes {
		if n.Live || n.Unknown {
			continue
		}
		w, err := r.Workloads(ctx, n.Node)
		if err != nil {
			return nil, fmt.Errorf("read the workloads of node %s: %w", n.Node, err)
		}
		out = append(out, nodeMove{Node: n.Node, Move: workloadmove.Decide(w, dataplane.FrontendsOn(snap.InstanceManagers, n.Node)), Budgets: w.Budgets})
	}
	return out, nil
}

// writeMoves renders the moves as `switchback plan` prints them: per node,
// the pods that would be evicted and the budgets that would hold them now,
// the share-managers whose NFS would restart, and what pins the node.
func writeMoves(w io.Writer, moves []nodeMove) {
	if len(moves) == 0 {
		return
	}
	fmt.Fprintln(w, "\nWorkload moves (initiatorPolicy move-workloads; each pod restarts once, elsewhere):")
	t := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(t, "NODE\tWHAT\tPOD OR VOLUME\tVOLUMES\tNOW")
	for _, nm := range moves {
		m := nm.Move
		for _, e := range append(append([]workloadmove.Eviction(nil), m.Evict...), m.Deferred...) {
			fmt.Fprintf(t, "%s\tevict\t%s\t%s\t%s\n", nm.Node, e.Pod, strings.Join(e.Volumes, ","), budgetNow(e, nm.Budgets))
		}
		for _, r := range m.Restart {
			fmt.Fprintf(t, "%s\trestart share-manager\t%s\t%s\tNFS restarts for every client of %s\n", nm.Node, r.Pod, r.Volume, r.Volume)
		}
		for _, p := range m.Pins {
			fmt.Fprintf(t, "%s\tpinned (%s)\t%s\t-\t%s\n", nm.Node, p.Reason, p.Object, p.Message)
		}
		if len(m.Pins) > 0 {
			fmt.Fprintf(t, "%s\t-\t-\t-\tnothing is moved on this node until every pin is gone\n", nm.Node)
		}
		for _, s := range m.Waits {
			fmt.Fprintf(t, "%s\twait (%s)\t%s\t-\t%s\n", nm.Node, s.Reason, s.Object, s.Message)
		}
	}
	_ = t.Flush()
}

// budgetNow says whether the eviction API would let e go now.
func budgetNow(e workloadmove.Eviction, budgets map[string]dataplane.Budget) string {
	if len(e.Budgets) == 0 {
		return "no disruption budget"
	}
	b := budgets[e.Budgets[0]]
	switch {
	case !b.Observed:
		return fmt.Sprintf("budget %s not counted yet: the eviction API would refuse it now", e.Budgets[0])
	case b.DisruptionsAllowed < 1:
		return fmt.Sprintf("budget %s allows no disruption now: it would wait", e.Budgets[0])
	}
	return fmt.Sprintf("budget %s allows %d disruption(s) now", e.Budgets[0], b.DisruptionsAllowed)
}
