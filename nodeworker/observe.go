package nodeworker

import (
	"context"
	"errors"
	"fmt"

	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/plan"
)

// need says what a step reads of the cluster: each read costs what the node
// holds, except the placement, which is read only when a switch-over must
// choose a temporary target.
type need struct {
	node, ims, on, recorded bool
}

// needs is the read set of each step; "" is the cancel flow, NodeError the
// restore before a node fails.
var needs = map[events.NodeState]need{
	events.NodeInitializing:             {node: true, on: true},
	events.NodeFailingReplicas:          {node: true, ims: true, recorded: true},
	events.NodeSwitchingOver:            {node: true, ims: true, recorded: true},
	events.NodeUpgradingInstanceManager: {node: true, ims: true, on: true},
	events.NodeSwitchingBack:            {node: true, recorded: true},
	events.NodeRebuildingReplica:        {node: true, recorded: true},
	events.NodeFinalizing:               {node: true, recorded: true},
	"":                                  {node: true, ims: true, recorded: true},
	events.NodeError:                    {node: true},
}

// observe gathers what step needs.
func (r *run) observe(ctx context.Context, step events.NodeState) (observation, error) {
	dp := r.dp()
	n := needs[step]
	platform, err := dp.Platform(ctx)
	if err != nil {
		return observation{}, err
	}
	o := observation{profile: platform.Profile}
	if n.node {
		o.node, err = dp.Node(ctx, r.w.cfg.Node)
		switch {
		case errors.Is(err, dataplane.ErrNotFound):
			return o, nil
		case err != nil:
			return o, err
		}
		o.found = true
	}
	if n.ims {
		if o.ims, err = dp.InstanceManagers(ctx, r.w.cfg.Node); err != nil && !errors.Is(err, dataplane.ErrNotFound) {
			return o, err
		}
	}
	if n.on {
		if o.on, err = dp.VolumesOn(ctx, r.w.cfg.Node); err != nil {
			return o, err
		}
	}
	if n.recorded {
		o.recorded = make(map[string]dataplane.Volume, len(r.st.Volumes))
		for name := range r.st.Volumes {
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
	if step == events.NodeSwitchingOver && needsPlacement(r.st, o.recorded, r.w.cfg.Node) {
		c, err := plan.ReadPlacement(ctx, dp)
		if err != nil {
			return o, fmt.Errorf("read placement: %w", err)
		}
		o.placement = &c
	}
	return o, nil
}
