package nodeworker

import (
	"context"
	"fmt"

	"github.com/switchback-dev/switchback/aggregate"
	"github.com/switchback-dev/switchback/aggregate/nodeupgrade"
	"github.com/switchback-dev/switchback/dataplane"
)

// cancel brings the node to its safe point, then confirms: every target that
// left the node is back home with its engine node restored (waiting for the
// node's IM to run again if it was being replaced), and the node's replica
// scheduling is restored. The IM keeps whatever image it runs; replicas
// failed earlier rebuild by themselves. Waiting uses the same wait/stall
// loop as a step.
func (r *run) cancel(ctx context.Context) error {
	return r.loop(ctx, "", r.round(""), func(ctx context.Context) error {
		return r.exec(ctx, nodeupgrade.ConfirmCancelled{Meta: aggregate.Meta{ID: r.id("cancelled")},
			Message: fmt.Sprintf("cancelled at %s: every target is back where it was, replica scheduling restored", r.st.State),
		})
	})
}

// decideCancel is the cancel flow's decision: bring every target home, then
// restore the node's replica scheduling.
func decideCancel(o observation, st nodeupgrade.State, c settings) stepPlan {
	p := stepPlan{done: true}
	running := false
	for _, im := range o.ims {
		running = running || im.State == dataplane.IMRunning
	}
	for _, v := range o.sortedRecorded() {
		rec := st.Volumes[v.Name]
		if !rec.TargetAway() {
			continue
		}
		if v.TargetNode != c.node && !running {
			p.wait(waiting(v.Name, "WaitingForInstanceManager", "cancel: volume %s waits for the instance manager on %s to run before its target comes back", v.Name, c.node))
			continue
		}
		p.bringHome(o, v, rec, c.node, "TargetNotMovedBack")
	}
	if p.done {
		p.restoreScheduling(o, st, c)
		p.removeTaint(o, st, c)
	}
	return p
}
