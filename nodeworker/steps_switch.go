package nodeworker

import (
	"fmt"
	"slices"
	"time"

	"github.com/switchback-dev/switchback/aggregate/nodeupgrade"
	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/plan"
)

// Longhorn reverts a switch-over while a replica of the volume rebuilds,
// and a revert landing after the initiator's switching phase leaves the
// volume without a usable path (sim/RULES.md). So no target moves, off the
// node or home, while a rebuild runs or may start before the move ends:
// with the node's replica scheduling off nothing is reused on the node, and
// a new replica elsewhere is due only once Longhorn's
// replica-replenishment-wait-interval has run out (Volume.ReplenishAt).

// replenishMargin is how long before Longhorn may build a new replica of a
// volume elsewhere no move of its target starts: a switch-over takes
// seconds.
const replenishMargin = time.Minute

// needsSwitch: an attached v2 volume whose target runs on the node.
func needsSwitch(v dataplane.Volume, node string) bool {
	return v.DataEngine == dataplane.DataEngineV2 && v.TargetHost() == node
}

// needsPlacement reports whether a round must read the cluster's placement,
// so that it is read only then: to choose the temporary target of a pending
// volume the round would move now (not of one it waits on, which a waiting
// step observes again at every change), or to know whether Longhorn has a
// node to build a new replica of a volume whose replenishment is due
// before its target moves.
func needsPlacement(step events.NodeState, st nodeupgrade.State, o observation, node string) bool {
	for name, v := range o.recorded {
		rec := st.Volumes[name]
		switch step {
		case events.NodeSwitchingOver, events.NodeUpgradingInstanceManager:
			if rec.State == events.VolumePending && needsSwitch(v, node) && switchBlocker(v, node) == nil {
				return true
			}
			if redirectable(v, rec, node) {
				return true
			}
		case events.NodeSwitchingBack, "":
			if rec.TargetAway() && replenishSoon(v, o.now) {
				return true
			}
		}
	}
	return false
}

// ReasonNVMeMultipathOff is the stall of a volume whose initiator's kernel
// would not keep the switch-over's second path (Volume.MultipathBlocker).
const ReasonNVMeMultipathOff = "NVMeMultipathOff"

// switchBlocker says why a volume's switch-over may not be asked for now, or
// nil. Longhorn reverts a switch-over while a replica rebuilds and needs a
// healthy replica to bind the new engine to, only an NVMe/TCP frontend
// has a path to switch, and its initiator's kernel must keep both paths
// under one device; a switch-over under way is somebody else's.
func switchBlocker(v dataplane.Volume, node string) *block {
	if !v.CanSwitchTarget() {
		return waiting(v.Name, "FrontendCannotSwitch", "%s so that %s can be upgraded", v.FrontendBlocker(), node)
	}
	if why := v.MultipathBlocker(); why != "" {
		return waiting(v.Name, ReasonNVMeMultipathOff, "%s", why)
	}
	switch {
	case v.Switchover != dataplane.SwitchoverNone:
		return waiting(v.Name, "SwitchoverInProgress", "volume %s: a switch-over the upgrade did not ask for is under way (%s); waiting for it to end", v.Name, v.Switchover)
	case v.Rebuilding():
		return rebuildBlocker(v)
	case v.HealthyReplicasOff(node) == 0 || (v.Robustness != dataplane.RobustnessHealthy && v.Robustness != dataplane.RobustnessDegraded):
		return waiting(v.Name, "VolumeUnhealthy", "volume %s is %s with no healthy replica off %s; waiting before moving its target", v.Name, v.Robustness, node)
	}
	return nil
}

// rebuildBlocker holds a move while a replica of the volume rebuilds (or
// starts to).
func rebuildBlocker(v dataplane.Volume) *block {
	if v.Rebuilding() {
		return waiting(v.Name, "VolumeRebuilding", "volume %s: a replica is rebuilding; Longhorn would revert a switch-over now", v.Name)
	}
	return nil
}

// replenishSoon reports whether Longhorn may build a new replica of v
// elsewhere within replenishMargin.
func replenishSoon(v dataplane.Volume, now time.Time) bool {
	return !v.ReplenishAt.IsZero() && !v.ReplenishAt.After(now.Add(replenishMargin))
}

// replenishBlocker holds a move while Longhorn may start building a new
// replica of v before it ends (see replenishSoon) and some node could take
// one (Ready, v2 with a running IM, allowing replica scheduling, not
// cordoned, without a replica of v). With the placement unread, it holds.
func replenishBlocker(v dataplane.Volume, placement *plan.Cluster, now time.Time) *block {
	if !replenishSoon(v, now) {
		return nil
	}
	due := waiting(v.Name, "ReplenishmentDue",
		"volume %s has been degraded long enough that Longhorn may build a replica of it on another node from %s (replica-replenishment-wait-interval): a rebuild starting while its target moves makes Longhorn revert the move; waiting for that rebuild first",
		v.Name, v.ReplenishAt.UTC().Format(time.RFC3339))
	if placement == nil {
		return due
	}
	for _, n := range placement.Nodes {
		if n.Ready && n.V2 && n.AllowScheduling && !n.Cordoned && !hasReplicaOn(v, n.Name) && runsIM(*placement, n.Name) {
			return due
		}
	}
	return nil
}

func hasReplicaOn(v dataplane.Volume, node string) bool {
	for _, r := range v.Replicas {
		if r.Node == node && !r.Failed {
			return true
		}
	}
	return false
}

func runsIM(c plan.Cluster, node string) bool {
	for _, im := range c.InstanceManagers {
		if im.Node == node && im.State == dataplane.IMRunning {
			return true
		}
	}
	return false
}

// decideSwitchOver moves every recorded attached volume's target off the
// node by setting spec.engineNodeID. Each destination, and the engine node
// the volume had before, is recorded before the move is asked for, so a
// restart moves the target to the same node and the switch-back restores
// exactly the value the volume had.
func decideSwitchOver(o observation, st nodeupgrade.State, c settings) stepPlan {
	if p := nodeCheck(o, c); p != nil {
		return *p
	}
	// Once the node runs the target image (on v1.12, Longhorn replaced an
	// IM the moves emptied), no new switch-over starts; those under way
	// still end, and are recorded.
	upgraded := onTargetImage(o.ims, c.image)
	p := stepPlan{done: true}
	if !upgraded {
		p.keepSchedulingOff(o, st, c)
		p.recordLate(o, st, c)
	}
	p.switchAway(o, st, c, upgraded)
	return p
}

// switchAway asks for, and follows, the moves of the recorded attached
// volumes' targets off the node; upgraded starts no new one.
func (p *stepPlan) switchAway(o observation, st nodeupgrade.State, c settings, upgraded bool) {
	var chooser *plan.Chooser
	if o.placement != nil {
		chooser = plan.NewChooser(*o.placement)
	}
	dest := map[string]string{}
	for _, v := range o.sortedRecorded() {
		rec := st.Volumes[v.Name]
		switch {
		case rec.State == events.VolumeSwitchingOver:
			dest[v.Name] = p.redirect(v, rec, chooser, c)
			continue
		case upgraded || rec.State != events.VolumePending || !needsSwitch(v, c.node):
			continue
		}
		if b := switchBlocker(v, c.node); b != nil {
			p.wait(b)
			continue
		}
		if b := replenishBlocker(v, o.placement, o.now); b != nil {
			p.wait(b)
			continue
		}
		if chooser == nil {
			p.wait(waiting(v.Name, "NoTemporaryTarget", "volume %s: the cluster's placement was not read", v.Name))
			continue
		}
		to, why, ok := chooser.Choose(v, c.node, c.image)
		if !ok {
			p.wait(waiting(v.Name, "NoTemporaryTarget", "volume %s: no node can host its target: %s", v.Name, why))
			continue
		}
		before := v.EngineNode
		p.volumes = append(p.volumes, nodeupgrade.SetVolumeState{Volume: v.Name, To: events.VolumeSwitchingOver,
			TargetNode: to, Message: "target moving to " + to + ": " + why, EngineNodeBefore: &before})
		dest[v.Name] = to
	}
	for _, v := range o.sortedRecorded() {
		to, ok := dest[v.Name]
		if !ok {
			continue
		}
		if settledOn(v, to) {
			p.volume(v.Name, events.VolumeSwitchedOver, to, "target runs on "+to)
			continue
		}
		p.moveEngine(v, c.node, to, to, "TargetNotMoved")
	}
}

// redirectable reports whether v's switch-over to its recorded temporary
// target may still be sent elsewhere: its target has not left the node and
// the initiator is not switching paths (past its switching phase, a
// withdrawn switch-over leaves the old path inaccessible, sim/RULES.md).
func redirectable(v dataplane.Volume, rec nodeupgrade.Volume, node string) bool {
	return rec.State == events.VolumeSwitchingOver && v.TargetHost() == node && !v.PathsSwitching &&
		v.Switchover != dataplane.SwitchoverFinalizing && !settledOn(v, rec.TargetNode)
}

// redirect returns where v's switch-over under way goes. Longhorn has no
// timeout on a switch-over: one whose temporary target can no longer host
// an engine (its IM gone, the node NotReady or removed) stays preparing
// for good. While the move may still be redirected, it is sent to another
// node the chooser picks, and the redirect recorded first; with no other
// node, the volume waits, naming why.
func (p *stepPlan) redirect(v dataplane.Volume, rec nodeupgrade.Volume, chooser *plan.Chooser, c settings) string {
	if chooser == nil || !redirectable(v, rec, c.node) {
		return rec.TargetNode
	}
	why := chooser.Unfit(rec.TargetNode, c.node)
	if why == "" {
		return rec.TargetNode
	}
	to, reason, ok := chooser.Choose(v, c.node, c.image)
	if !ok {
		p.wait(waiting(v.Name, "TemporaryTargetLost", "volume %s: its temporary target %s %s, and no other node can host it: %s", v.Name, rec.TargetNode, why, reason))
		return rec.TargetNode
	}
	p.volumes = append(p.volumes, nodeupgrade.SetVolumeState{Volume: v.Name, To: events.VolumeSwitchingOver, RedirectFrom: rec.TargetNode,
		TargetNode: to, Message: fmt.Sprintf("target redirected to %s, since %s %s: %s", to, rec.TargetNode, why, reason)})
	return to
}

// settledOn reports whether a volume's switch-over to node has fully ended:
// Longhorn's own done conditions (the engine there the only one, running,
// the initiator connected to it).
func settledOn(v dataplane.Volume, node string) bool {
	return v.TargetNode == node && v.Switchover == dataplane.SwitchoverNone && v.TargetReady
}

// moveEngine asks for, or waits on, the move of v's engine to engineNode
// (whose target runs on home) by node's upgrade. spec.engineNodeID is never
// changed while the initiator's path is being switched: the old path may
// already be inaccessible, and only Longhorn's own end of the switch puts it
// right. Nor before the controller's record of the target away allows the
// move (Volume.Away, projected from the switch-over this node's history
// holds): the workers' admission policy admits no move of a target the
// record does not name, so asking first would only be refused.
func (p *stepPlan) moveEngine(v dataplane.Volume, node, engineNode, home, notMoved string) {
	p.done = false
	switch {
	case v.EngineNode != engineNode && v.PathsSwitching:
		p.wait(waiting(v.Name, "SwitchoverInProgress", "volume %s: its initiator is switching paths; waiting for Longhorn to finish before asking for %s", v.Name, home))
	case v.EngineNode != engineNode && !v.Away.Allows(node, engineNode):
		p.wait(waiting(v.Name, "TargetAwayUnrecorded", "volume %s: waiting for the controller to record that the upgrade of %s moves its target (engine node %q) before asking for %s", v.Name, node, engineNode, home))
	case v.EngineNode != engineNode:
		p.act(dataplane.CallSetEngineNode, v.Name, engineNode)
	case v.Switchover == dataplane.SwitchoverReverting || v.SwitchoverError != "":
		msg := fmt.Sprintf("volume %s: Longhorn keeps failing to switch its target to %s (switchoverState %q)", v.Name, home, v.Switchover)
		if v.SwitchoverError != "" {
			msg += ": " + v.SwitchoverError
		}
		p.wait(&block{volume: v.Name, reason: "SwitchoverFailing", message: msg})
	default:
		p.wait(waiting(v.Name, notMoved, "volume %s: target on %s (switchoverState %q), waiting for it to run on %s", v.Name, v.TargetNode, v.Switchover, home))
	}
}

// decideSwitchBack brings every switched-over target home by restoring
// exactly the engine node recorded before the switch-over, and restores the
// node's replica scheduling once no target still on its way home belongs
// to a volume that could rebuild on the node (at worst once every one has
// settled). In that order: with scheduling allowed, Longhorn reuses the
// node's failed replicas at once, in the very pass that first sees a
// target's new engine node, and a volume's rebuild makes it revert that
// volume's switch-back. Another volume's rebuild does not
// (RuleRevertWhileSwitchingOver is per volume), so the rebuilds of volumes
// whose targets stayed where they were start with the switch-back.
func decideSwitchBack(o observation, st nodeupgrade.State, c settings) stepPlan {
	p := stepPlan{done: true}
	p.removeTaint(o, st, c)
	p.keepSchedulingOff(o, st, c)
	hold := false // a volume still coming home could rebuild on the node
	for _, v := range o.sortedRecorded() {
		rec := st.Volumes[v.Name]
		if rec.State != events.VolumeSwitchedOver && rec.State != events.VolumeSwitchingBack {
			continue
		}
		before := len(p.volumes)
		p.bringHome(o, v, rec, c.node, "TargetNotMovedBack")
		home := len(p.volumes) > before && p.volumes[len(p.volumes)-1].To == events.VolumeSwitchedBack
		if !home && couldRebuildOn(v, c.node) {
			hold = true
		}
	}
	if p.done || !hold {
		p.restoreScheduling(o, st, c)
	}
	return p
}

// bringHome moves one volume's engine back to the node it was recorded on
// before the switch-over, once no rebuild can revert the move. Used by
// switch-back and cancel of node's upgrade.
func (p *stepPlan) bringHome(o observation, v dataplane.Volume, rec nodeupgrade.Volume, node, notMoved string) {
	before := ""
	if rec.EngineNodeBefore != nil {
		before = *rec.EngineNodeBefore
	}
	home := v.EngineHome(before)
	if rec.State != events.VolumeSwitchingBack {
		p.volume(v.Name, events.VolumeSwitchingBack, home, "target moving back to "+home)
	}
	if v.EngineNode == before && (!v.Attached() || settledOn(v, home)) {
		p.volume(v.Name, events.VolumeSwitchedBack, home, "target back on "+home)
		return
	}
	if v.EngineNode != before && v.Attached() {
		b := rebuildBlocker(v)
		if b == nil {
			b = replenishBlocker(v, o.placement, o.now)
		}
		if b != nil {
			p.wait(b)
			return
		}
	}
	p.moveEngine(v, node, before, home, notMoved)
}

// couldRebuildOn reports whether v could start a rebuild on node once the
// node schedules replicas again: it has a replica there (failed by the
// upgrade, which Longhorn reuses), or its data locality is not known to
// be disabled (best-effort builds a local replica where its target
// lands, LM@v1.12.1 controller/volume_controller.go:963-969).
func couldRebuildOn(v dataplane.Volume, node string) bool {
	return v.DataLocality != dataplane.DataLocalityDisabled ||
		slices.ContainsFunc(v.Replicas, func(r dataplane.Replica) bool { return r.Node == node })
}
