package plan

import (
	"fmt"
	"strings"
	"text/tabwriter"
)

// String renders the plan as the tables `switchback plan` prints: the
// Longhorn it was computed for, one row per node in order with whether it
// can be upgraded live there, then one row per switch-over with its
// temporary target and why, then the replicas to fail, their bytes, the
// temporary replicas under add-first and the room they take, the nodes that
// cannot be upgraded live and why, what would hold a node, and the volumes
// left on a single healthy replica, per node.
func (p Plan) String() string {
	var b strings.Builder
	if p.Platform.Profile != "" {
		fmt.Fprintf(&b, "Longhorn: %s: %s\n", p.Platform, DefaultsNote(p.Platform.Profile))
		if p.Platform.Evidence != "" {
			fmt.Fprintf(&b, "  (detected from: %s)\n", p.Platform.Evidence)
		}
	}
	if len(p.Nodes) == 0 {
		fmt.Fprintf(&b, "Plan: no node to upgrade to %s\n", orDash(p.TargetImage))
		return b.String()
	}
	fmt.Fprintf(&b, "Plan: %d node(s) to instance-manager image %s\n", len(p.Nodes), orDash(p.TargetImage))
	if !p.Feasible() {
		b.WriteString("Warning: the plan cannot complete as is (see below)\n")
	}
	for _, w := range p.Warnings {
		b.WriteString("Warning: " + w + "\n")
	}
	b.WriteString("\n")

	w := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ORDER\tNODE\tIMAGE NOW\tLIVE ON THIS LONGHORN\tSWITCH-OVERS\tREPLICAS TO FAIL")
	for i, n := range p.Nodes {
		img := orDash(n.Image)
		if n.Unknown {
			img = "(unknown node)"
		}
		live := "yes"
		switch {
		case n.Unknown:
			live = "-"
		case !n.Live:
			live = "no (initiators, see below)"
		case len(n.Holds) > 0:
			live = "held (see below)"
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%d\t%d\n", i+1, n.Node, img, live, len(n.Switchovers), len(n.Replicas))
	}
	_ = w.Flush() // a strings.Builder never fails
	writeWaves(&b, p)

	if hasSwitchovers(p) {
		b.WriteString("\nSwitch-overs (the initiator stays on the attached node):\n")
		w = tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "ORDER\tNODE\tVOLUME\tATTACHED\tMULTIPATH\tTEMPORARY TARGET\tWHY")
		for i, n := range p.Nodes {
			for _, s := range n.Switchovers {
				fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", i+1, n.Node, s.Volume, s.AttachedNode, s.InitiatorMultipath.Show(), orDash(s.TemporaryTarget), s.Reason)
			}
		}
		_ = w.Flush()
		b.WriteString("  (MULTIPATH: the attached node's nvme_core.multipath as its worker reported it; N holds the switch-over until fixed; ? is not reported yet, taken as Y)\n")
	}

	var replicas, notLive, held, single []string
	for _, n := range p.Nodes {
		if len(n.Replicas) > 0 {
			refs := make([]string, len(n.Replicas))
			for i, r := range n.Replicas {
				refs[i] = r.Volume + "/" + r.Replica
			}
			replicas = append(replicas, fmt.Sprintf("  %s: %s\n", n.Node, strings.Join(refs, ", ")))
		}
		if !n.Live {
			notLive = append(notLive, fmt.Sprintf("  %s: %s\n", n.Node, n.NotLive))
		}
		for _, h := range n.Holds {
			held = append(held, fmt.Sprintf("  %s: %s: %s\n", n.Node, h.Reason, h.Message))
		}
		if len(n.SingleReplica) > 0 {
			single = append(single, fmt.Sprintf("  %s: %s\n", n.Node, strings.Join(n.SingleReplica, ", ")))
		}
	}
	if len(replicas) > 0 {
		b.WriteString("\nReplicas to fail and rebuild (attached v2 volumes only):\n" + strings.Join(replicas, ""))
	}
	if hasBytes(p) {
		b.WriteString("\nRebuild bytes (delta rebuilds: a reused replica copies only what is written while its node is away, once the volume's snapshots are hashed):\n")
		w = tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "ORDER\tNODE\tWHOLE COPIES\tEXPECTED (+ WRITTEN WHILE AWAY)\tHASHED FIRST (ON EACH REPLICA)")
		for i, n := range p.Nodes {
			if len(n.Replicas) > 0 {
				fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\n", i+1, n.Node, Bytes(n.FullCopyBytes), Bytes(n.ExpectedBytes), Bytes(n.HashBytes))
			}
		}
		_ = w.Flush()
	}
	writeTemporary(&b, p)
	if len(notLive) > 0 {
		b.WriteString("\nNot live on this Longhorn (the upgrade stalls there, touching nothing, until fixed):\n" + strings.Join(notLive, ""))
	}
	if len(held) > 0 {
		b.WriteString("\nHeld as the cluster is now (the upgrade waits there, touching nothing, until fixed):\n" + strings.Join(held, ""))
	}
	if len(single) > 0 {
		b.WriteString("\nServed from a single healthy replica while the node is upgraded:\n" + strings.Join(single, ""))
	}
	return b.String()
}

// hasBytes reports whether the cluster reported what its volumes hold.
func hasBytes(p Plan) bool {
	for _, n := range p.Nodes {
		if n.FullCopyBytes > 0 {
			return true
		}
	}
	return false
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

// writeTemporary writes the add-first policy's temporary replicas, per
// node in order, and the room they take per disk; nothing when the plan
// has none.
func writeTemporary(b *strings.Builder, p Plan) {
	has := false
	for _, n := range p.Nodes {
		has = has || len(n.TemporaryReplicas) > 0
	}
	if !has {
		return
	}
	b.WriteString("\nTemporary replicas (replicaPolicy add-first: one per volume, added before its first replica is failed, kept until the upgrade ends; Longhorn places it, expected as below):\n")
	w := tabwriter.NewWriter(b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ORDER\tNODE\tVOLUME\tSIZE\tCOPIES\tEXPECTED ON")
	for i, n := range p.Nodes {
		for _, t := range n.TemporaryReplicas {
			on := t.Node + "/" + t.Disk
			if !t.Placed() {
				on = "none: " + t.Reason
			}
			fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\n", i+1, n.Node, t.Volume, Bytes(t.Size), Bytes(t.Bytes), on)
		}
	}
	_ = w.Flush()
	if len(p.Room) == 0 {
		return
	}
	b.WriteString("\nRoom they take, per disk (scheduled: spec.size, what Longhorn's over-provisioning counts; written: what the copies write):\n")
	w = tabwriter.NewWriter(b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NODE\tDISK\tREPLICAS\tSCHEDULED\tWRITTEN\tUSABLE NOW")
	for _, r := range p.Room {
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\t%s\n", r.Node, r.Disk, r.Replicas, Bytes(r.Size), Bytes(r.Bytes), Bytes(r.Usable))
	}
	_ = w.Flush()
}

// writeWaves writes the waves and why a node waited for a later one,
// when the plan may upgrade more than one node at once.
func writeWaves(b *strings.Builder, p Plan) {
	if p.MaxConcurrentNodes < 2 {
		return
	}
	fmt.Fprintf(b, "\nWaves (up to %d nodes at once; two nodes share a wave only if no attached volume depends on both):\n", p.MaxConcurrentNodes)
	w := tabwriter.NewWriter(b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "WAVE\tNODES")
	for i, wave := range p.Waves {
		fmt.Fprintf(w, "%d\t%s\n", i+1, wave)
	}
	_ = w.Flush()
	var waited []string
	for _, n := range p.Nodes {
		if n.Waited != "" {
			waited = append(waited, fmt.Sprintf("  %s (wave %d): %s\n", n.Node, n.Wave, n.Waited))
		}
	}
	if len(waited) > 0 {
		b.WriteString("Why a node could not join the wave before its own:\n" + strings.Join(waited, ""))
	}
}
