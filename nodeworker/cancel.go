package nodeworker

import (
	"context"
	"fmt"

	"github.com/switchback-dev/switchback/aggregate/nodeupgrade"
	"github.com/switchback-dev/switchback/dataplane"
)

// cancel brings the node to its safe point, then confirms: every target that
// left the node is back home with its override cleared (waiting for the node's
// IM to run again if it was being replaced), and the node flag is cleared.
// The IM keeps whatever image it runs; replicas failed earlier rebuild by
// themselves. Waiting uses the same poll/stall loop as a step.
func (r *run) cancel(ctx context.Context) error {
	return r.loop(ctx, "", func(ctx context.Context) (outcome, error) {
		vols, err := r.recorded(ctx)
		if err != nil {
			return outcome{}, err
		}
		out := outcome{done: true}
		for _, v := range vols {
			if !r.st.Volumes[v.Name].TargetAway() {
				continue
			}
			if v.TargetNode != r.w.cfg.Node && !r.homeIMRunning(ctx) {
				out.done = false
				out.block = waiting(v.Name, "WaitingForInstanceManager", "cancel: volume %s waits for the instance manager on %s to run before its target comes back", v.Name, r.w.cfg.Node)
				continue
			}
			home, err := r.bringHome(ctx, v)
			if err != nil {
				return outcome{}, err
			}
			out.progressed = out.progressed || home.progressed
			if !home.done {
				out.done, out.block = false, home.block
			}
		}
		if !out.done {
			return out, nil
		}
		if err := r.dp().SetNodeUpgradeRequested(ctx, r.w.cfg.Node, false); err != nil {
			return outcome{}, err
		}
		return out, nil
	}, func(ctx context.Context) error {
		return r.exec(ctx, nodeupgrade.ConfirmCancelled{ID: r.id("cancelled"),
			Message: fmt.Sprintf("cancelled at %s: every target is on its own node, node flag cleared", r.st.State),
		})
	})
}

func (r *run) homeIMRunning(ctx context.Context) bool {
	ims, err := r.dp().InstanceManagers(ctx, r.w.cfg.Node)
	if err != nil {
		return false
	}
	for _, im := range ims {
		if im.State == dataplane.IMRunning {
			return true
		}
	}
	return false
}
