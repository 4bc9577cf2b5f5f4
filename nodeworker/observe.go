package nodeworker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/switchback-dev/switchback/aggregate/nodeupgrade"

	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/plan"
)

// need says what a step reads of the cluster: each read costs what the node
// holds, except the placement, which is read only when a target must move
// (needsPlacement).
type need struct {
	node, ims, on, recorded, image bool
}

// needs is the read set of each step; "" is the cancel flow, NodeError the
// restore before a node fails. The steps up to the IM's replacement read
// the node's volumes live (on) as well as the recorded ones: a volume
// attached, or re-attached with its target on the node, after the node was
// recorded is recorded then.
var needs = map[events.NodeState]need{
	events.NodeInitializing:             {node: true, ims: true, on: true, image: true},
	events.NodeFailingReplicas:          {node: true, ims: true, on: true, recorded: true},
	events.NodeSwitchingOver:            {node: true, ims: true, on: true, recorded: true},
	events.NodeUpgradingInstanceManager: {node: true, ims: true, on: true, recorded: true, image: true},
	events.NodeSwitchingBack:            {node: true, recorded: true},
	events.NodeRebuildingReplica:        {node: true, recorded: true},
	events.NodeFinalizing:               {node: true, recorded: true},
	"":                                  {node: true, ims: true, recorded: true},
	events.NodeError:                    {node: true},
}

// observe gathers what step needs.
func (r *run) observe(ctx context.Context, step events.NodeState) (observation, error) {
	return gather(ctx, r.dp(), r.w.cfg.Node, step, r.st, r.w.cfg.Now())
}

// gather reads what step of node's upgrade, as st records it, needs of the
// cluster through dp, at now.
func gather(ctx context.Context, dp dataplane.Reader, node string, step events.NodeState, st nodeupgrade.State, now time.Time) (observation, error) {
	n := needs[step]
	platform, err := dp.Platform(ctx)
	if err != nil {
		return observation{}, err
	}
	o := observation{profile: platform.Profile, now: now}
	if n.node {
		o.node, err = dp.Node(ctx, node)
		switch {
		case errors.Is(err, dataplane.ErrNotFound):
			return o, nil
		case err != nil:
			return o, err
		}
		o.found = true
	}
	if n.ims {
		if o.ims, err = dp.InstanceManagers(ctx, node); err != nil && !errors.Is(err, dataplane.ErrNotFound) {
			return o, err
		}
	}
	if n.on {
		if o.on, err = dp.VolumesOn(ctx, node); err != nil {
			return o, err
		}
	}
	if n.image {
		if o.defaultImage, err = dp.DefaultInstanceManagerImage(ctx); err != nil {
			return o, err
		}
	}
	if n.recorded {
		o.recorded = make(map[string]dataplane.Volume, len(st.Volumes))
		for name := range st.Volumes {
			v, err := dp.Volume(ctx, name)
			switch {
			case errors.Is(err, dataplane.ErrNotFound):
				continue // deleted since: nothing left to protect
			case err != nil:
				return o, err
			}
			o.recorded[name] = v
		}
	}
	if step == events.NodeFailingReplicas || step == events.NodeUpgradingInstanceManager {
		for name, v := range o.recorded {
			if !needsSnapshots(v, st, node, now) {
				continue
			}
			snaps, err := dp.Snapshots(ctx, name)
			switch {
			case errors.Is(err, dataplane.ErrNotFound):
				continue
			case err != nil:
				return o, fmt.Errorf("read the snapshots of volume %s: %w", name, err)
			}
			if o.snapshots == nil {
				o.snapshots = map[string][]dataplane.Snapshot{}
			}
			o.snapshots[name] = snaps
		}
	}
	if needsWorkloads(step, st, o, node) {
		w, err := dp.Workloads(ctx, node)
		if err != nil {
			return o, fmt.Errorf("read the workloads of node %s: %w", node, err)
		}
		o.workloads = &w
	}
	if needsPlacement(step, st, o, node) {
		c, err := plan.ReadPlacement(ctx, dp)
		if err != nil {
			return o, fmt.Errorf("read placement: %w", err)
		}
		o.placement = &c
	}
	return o, nil
}
