package main

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/nodeworker"
	"github.com/switchback-dev/switchback/plan"
	"github.com/switchback-dev/switchback/replay"
	"github.com/switchback-dev/switchback/sim"
)

// demoOperator plays the cluster's user in the demo: on a Longhorn whose
// initiators die with their node's instance manager, a node holding
// initiators of attached volumes stalls its upgrade, touching nothing, and
// asks for its workloads to be moved. The operator does what the message
// says: it detaches each such volume and attaches it on a node already
// upgraded.
type demoOperator struct {
	cluster *sim.Sim
	enabled bool
}

// onStall reacts to a node's stall; it returns what it did, one line each.
func (o *demoOperator) onStall(ctx context.Context, u *replay.Upgrade, node string, d events.NodeStalled) []string {
	if !o.enabled || d.Reason != nodeworker.ReasonInitiatorsOnNode {
		return nil
	}
	var to string
	for _, name := range slices.Sorted(maps.Keys(u.Nodes)) {
		if name != node && u.Nodes[name].State == events.NodeCompleted {
			to = name
			break
		}
	}
	if to == "" {
		return []string{fmt.Sprintf("operator: %s holds initiators, but no node is upgraded yet to move its workloads to", node)}
	}
	vols, err := o.cluster.VolumesOn(ctx, node)
	if err != nil {
		return []string{"operator: " + err.Error()}
	}
	var out []string
	for _, name := range plan.Initiators(vols, node) {
		err := o.cluster.DetachVolume(name)
		if err == nil {
			err = o.cluster.AttachVolume(name, to)
		}
		if err != nil {
			out = append(out, fmt.Sprintf("operator: move %s from %s to %s: %v", name, node, to, err))
			continue
		}
		out = append(out, fmt.Sprintf("operator: moved the workload of %s from %s to %s (%s cannot be upgraded live while it holds the initiator)", name, node, to, node))
	}
	return out
}
