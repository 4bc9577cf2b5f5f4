package plan

import (
	"fmt"
	"strings"
	"text/tabwriter"
)

// String renders the plan as the tables `switchback plan` prints: one row per
// node in order, then one row per switch-over with its temporary target and
// why, then the replicas to fail and the detached volumes per node.
func (p Plan) String() string {
	var b strings.Builder
	if len(p.Nodes) == 0 {
		fmt.Fprintf(&b, "Plan: no node to upgrade to %s\n", orDash(p.TargetImage))
		return b.String()
	}
	fmt.Fprintf(&b, "Plan: %d node(s) to instance-manager image %s\n", len(p.Nodes), orDash(p.TargetImage))
	if !p.Feasible() {
		b.WriteString("Warning: the plan cannot complete as is (see below)\n")
	}
	b.WriteString("\n")

	w := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ORDER\tNODE\tIMAGE NOW\tSWITCH-OVERS\tREPLICAS TO FAIL\tDETACHED VOLUMES")
	for i, n := range p.Nodes {
		img := orDash(n.Image)
		if n.Unknown {
			img = "(unknown node)"
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%d\t%d\t%d\n", i+1, n.Node, img, len(n.Switchovers), len(n.Replicas), len(n.Detached))
	}
	_ = w.Flush() // a strings.Builder never fails

	if hasSwitchovers(p) {
		b.WriteString("\nSwitch-overs (the initiator stays on the attached node):\n")
		w = tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "ORDER\tNODE\tVOLUME\tATTACHED\tTEMPORARY TARGET\tWHY")
		for i, n := range p.Nodes {
			for _, s := range n.Switchovers {
				fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\n", i+1, n.Node, s.Volume, s.AttachedNode, orDash(s.TemporaryTarget), s.Reason)
			}
		}
		_ = w.Flush()
	}

	var replicas, detached []string
	for _, n := range p.Nodes {
		if len(n.Replicas) > 0 {
			refs := make([]string, len(n.Replicas))
			for i, r := range n.Replicas {
				refs[i] = r.Volume + "/" + r.Replica
			}
			replicas = append(replicas, fmt.Sprintf("  %s: %s\n", n.Node, strings.Join(refs, ", ")))
		}
		if len(n.Detached) > 0 {
			detached = append(detached, fmt.Sprintf("  %s: %s\n", n.Node, strings.Join(n.Detached, ", ")))
		}
	}
	if len(replicas) > 0 {
		b.WriteString("\nReplicas to fail and rebuild (v2 only):\n" + strings.Join(replicas, ""))
	}
	if len(detached) > 0 {
		b.WriteString("\nDetached volumes moved to the target image:\n" + strings.Join(detached, ""))
	}
	return b.String()
}

func hasSwitchovers(p Plan) bool {
	for _, n := range p.Nodes {
		if len(n.Switchovers) > 0 {
			return true
		}
	}
	return false
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
