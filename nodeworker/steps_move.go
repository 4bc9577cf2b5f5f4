package nodeworker

import (
	"fmt"
	"strings"

	"github.com/switchback-dev/switchback/aggregate"
	"github.com/switchback-dev/switchback/aggregate/nodeupgrade"
	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/plan"
	"github.com/switchback-dev/switchback/workloadmove"
)

// ReasonMovingWorkloads is the wait of a node whose upgrade moves the pods
// holding its initiators: evictions or restarts were asked this round.
const ReasonMovingWorkloads = "MovingWorkloads"

// needsWorkloads reports whether a round must read the workloads around
// the node: only in initializing, when the upgrade moves workloads and
// the node cannot be upgraded live as it is.
func needsWorkloads(step events.NodeState, st nodeupgrade.State, o observation, node string) bool {
	if step != events.NodeInitializing || !st.MovesWorkloads() || !o.found {
		return false
	}
	ok, _ := plan.LiveVerdict(o.profile, node, o.on)
	return !ok
}

// decideMove empties the node of initiators by moving the workloads that
// hold them (workloadmove.Decide), before anything else is touched: a
// pinned node stalls with the pin's reason and nothing moves; otherwise
// the taint is recorded and put first, so that what is evicted is not
// scheduled back, then each pod is recorded moved and evicted (a
// share-manager pod restarted). The step goes on once nothing holds an
// initiator there.
func decideMove(o observation, st nodeupgrade.State, c settings) stepPlan {
	if o.workloads == nil {
		return stepPlan{block: waiting("", ReasonInitiatorsOnNode, "node %s: its workloads were not read", c.node)}
	}
	m := workloadmove.Decide(*o.workloads, dataplane.FrontendsOn(o.ims, c.node))
	if len(m.Pins) > 0 {
		pin := m.Pins[0]
		msg := pin.Message
		if more := len(m.Pins) - 1; more > 0 {
			msg += fmt.Sprintf(" (and %d more: %s)", more, pinnedObjects(m.Pins[1:]))
		}
		return stepPlan{block: &block{reason: pin.Reason, message: "node " + c.node + " cannot be emptied of initiators, so nothing is moved: " + msg}}
	}
	var p stepPlan
	if len(m.Evict)+len(m.Restart) > 0 {
		if st.Taint == nil {
			p.record = append(p.record, nodeupgrade.RecordTaint{Meta: aggregate.Meta{ID: c.id("taint")}, Key: dataplane.WorkloadTaintKey})
		}
		if !o.node.WorkloadTainted {
			p.act(dataplane.CallTaintNode, c.node, "")
		}
	}
	var moved []string
	for _, e := range m.Evict {
		if !st.HasMoved(e.Pod.String(), e.UID) {
			p.record = append(p.record, nodeupgrade.RecordPodMoved{Meta: aggregate.Meta{ID: c.id("moved/" + e.Pod.String() + "/" + e.UID)},
				Pod: e.Pod.String(), UID: e.UID, Volumes: e.Volumes})
		}
		p.act(dataplane.CallEvictPod, e.Pod.String(), e.UID)
		moved = append(moved, "evicting "+e.Pod.String())
	}
	for _, r := range m.Restart {
		if !st.HasMoved(r.Pod.String(), r.UID) {
			p.record = append(p.record, nodeupgrade.RecordPodMoved{Meta: aggregate.Meta{ID: c.id("moved/" + r.Pod.String() + "/" + r.UID)},
				Pod: r.Pod.String(), UID: r.UID, Volumes: []string{r.Volume}, Restart: true})
		}
		p.act(dataplane.CallRestartShareManager, r.Pod.String(), r.UID)
		moved = append(moved, "restarting the share-manager of "+r.Volume+" elsewhere (its NFS clients reconnect)")
	}
	switch {
	case len(moved) > 0:
		p.block = waiting("", ReasonMovingWorkloads, "node %s: moving the workloads that hold its initiators: %s", c.node, strings.Join(moved, "; "))
	case len(m.Waits) > 0:
		w := m.Waits[0]
		p.block = waiting("", w.Reason, "node %s: moving its workloads: %s", c.node, w.Message)
	default:
		// Decide sees nothing left; the volumes as the step reads them
		// are the last word.
		_, why := plan.LiveVerdict(o.profile, c.node, o.on)
		p.block = waiting("", ReasonInitiatorsOnNode, "%s", why)
	}
	return p
}

func pinnedObjects(s []workloadmove.Stall) string {
	out := make([]string, len(s))
	for i, x := range s {
		out[i] = x.Object + " " + x.Reason
	}
	return strings.Join(out, ", ")
}

// removeTaint takes the recorded taint off the node and records that it
// did: once the node's new instance manager runs, and on cancel and error.
func (p *stepPlan) removeTaint(o observation, st nodeupgrade.State, c settings) {
	if !st.Taint.Pending() || !o.found {
		return
	}
	if o.node.WorkloadTainted {
		p.act(dataplane.CallUntaintNode, c.node, "")
	}
	p.confirm = append(p.confirm, nodeupgrade.ConfirmUntainted{Meta: aggregate.Meta{ID: c.id("untainted")}})
}
