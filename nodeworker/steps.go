package nodeworker

import (
	"fmt"
	"slices"

	"github.com/switchback-dev/switchback/aggregate"
	"github.com/switchback-dev/switchback/aggregate/nodeupgrade"
	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/plan"
)

// decide is the step of st.State: a pure function from what was observed
// and the node's recorded state to what to do next.
func decide(step events.NodeState, o observation, st nodeupgrade.State, c settings) stepPlan {
	if p := profileCheck(o, st); p != nil {
		return *p
	}
	if s, ok := nodeSteps[step]; ok {
		return s.decide(o, st, c)
	}
	return stepPlan{fatal: &block{reason: "UnknownStep", message: fmt.Sprintf("node %s: no step for state %q", c.node, step)}}
}

// nodeStep is what the worker does in one working state of a node upgrade:
// how it decides what to do next, and what the event that completes the
// state says.
type nodeStep struct {
	decide func(observation, nodeupgrade.State, settings) stepPlan
	done   string
}

// nodeSteps are the steps of the working states (events.NodeSteps).
// Pending has nothing to do: it is done at once, and says nothing.
var nodeSteps = map[events.NodeState]nodeStep{
	events.NodePending:                  {decide: func(observation, nodeupgrade.State, settings) stepPlan { return stepPlan{done: true} }},
	events.NodeInitializing:             {decideInitialize, "replica scheduling turned off on the node; volumes recorded and snapshotted"},
	events.NodeFailingReplicas:          {decideFailReplicas, "the node's replicas of attached v2 volumes failed and stopped"},
	events.NodeSwitchingOver:            {decideSwitchOver, "every attached volume's target runs on another node"},
	events.NodeUpgradingInstanceManager: {decideUpgradeInstanceManager, "instance manager runs the target image"},
	events.NodeSwitchingBack:            {decideSwitchBack, "replica scheduling restored; every moved target is back where it was"},
	events.NodeRebuildingReplica:        {decideWaitHealthy, "volumes are healthy again"},
	events.NodeFinalizing:               {decideFinalize, "node upgrade completed"},
}

// ReasonLonghornProfileChanged is the stall of a node whose data plane now
// reports another Longhorn profile than the one its upgrade started on: what
// a step may do depends on it, so none acts until it is back.
const ReasonLonghornProfileChanged = "LonghornProfileChanged"

// profileCheck holds the node while the data plane reports another profile
// than the one recorded when the node's upgrade started (Longhorn upgraded
// or replaced under the upgrade).
func profileCheck(o observation, st nodeupgrade.State) *stepPlan {
	if st.LonghornProfile == "" || string(o.profile) == st.LonghornProfile {
		return nil
	}
	return &stepPlan{block: waiting("", ReasonLonghornProfileChanged,
		"node %s's upgrade started on Longhorn profile %s, and the data plane now reports %s: Longhorn changed under the upgrade; "+
			"no step acts until it reports %s again (or delete the manager to cancel)", st.Node, st.LonghornProfile, o.profile, st.LonghornProfile)}
}

// nodeCheck is the check of the steps that need the node:
// a deleted node fails the upgrade (nothing is left to upgrade and its
// volumes need the user), a NotReady one makes it wait.
func nodeCheck(o observation, c settings) *stepPlan {
	if !o.found {
		return &stepPlan{fatal: &block{reason: "NodeDeleted", message: fmt.Sprintf("node %s was removed from the cluster during its upgrade", c.node)}}
	}
	if !o.node.Ready {
		return &stepPlan{block: waiting("", "NodeNotReady", "node %s is not Ready", c.node)}
	}
	return nil
}

// holdCheck holds a node that must not be touched, or whose IM must not be
// replaced, as the cluster is now (plan.Holds): each lifts by itself once
// fixed.
func holdCheck(o observation, c settings) *stepPlan {
	if h := plan.Holds(o.profile, o.node, o.ims, o.defaultImage, c.image); len(h) > 0 {
		return &stepPlan{block: waiting("", h[0].Reason, "%s", h[0].Message)}
	}
	return nil
}

// ReasonInitiatorsOnNode is the stall of a node that cannot be upgraded live
// on this Longhorn (plan.LiveVerdict): it holds the initiators of attached v2
// volumes. It lifts once they are detached or moved.
const ReasonInitiatorsOnNode = "InitiatorsOnNode"

// liveCheck holds a node that cannot be upgraded live, before anything is
// touched (initializing) and right before its IM may go.
func liveCheck(o observation, c settings) *stepPlan {
	if ok, why := plan.LiveVerdict(o.profile, c.node, o.on); !ok {
		return &stepPlan{block: &block{reason: ReasonInitiatorsOnNode, message: why}}
	}
	return nil
}

// onTargetImage reports whether the node's IM already runs the target image
// and nothing else is left to replace: the IM will not be restarted, so
// failing replicas or moving targets would only disturb volumes for nothing.
// On Longhorn v1.12 this is also how a step learns that Longhorn replaced an
// IM that ran nothing any more.
func onTargetImage(ims []dataplane.InstanceManager, image string) bool {
	running := false
	for _, im := range ims {
		switch {
		case im.Deleting:
			// Its pod may still hold the node's hugepages and disks.
			return false
		case im.Image == image && im.State == dataplane.IMRunning:
			running = true
		case im.State != dataplane.IMStopped:
			return false
		}
	}
	return running
}

// decideInitialize refuses, before touching anything, a node that cannot be
// upgraded live on this Longhorn; then records the node's replica
// scheduling and turns it off, records the v2 volumes the node concerns,
// and snapshots the attached ones.
func decideInitialize(o observation, st nodeupgrade.State, c settings) stepPlan {
	if p := nodeCheck(o, c); p != nil {
		return *p
	}
	if !onTargetImage(o.ims, c.image) {
		if p := holdCheck(o, c); p != nil {
			return *p
		}
	}
	if p := liveCheck(o, c); p != nil {
		if st.MovesWorkloads() {
			return decideMove(o, st, c)
		}
		return *p
	}
	p := stepPlan{done: true}
	p.keepSchedulingOff(o, st, c)
	p.recordLate(o, st, c)
	var snap []string
	for _, v := range o.on {
		if plan.Concerned(v, c.node) && v.Attached() {
			snap = append(snap, v.Name)
		}
	}
	if st.Snapshots == nil && len(snap) > 0 {
		for _, name := range snap {
			p.act(dataplane.CallCreateSnapshot, name, c.snapshot)
		}
		p.confirm = append(p.confirm, nodeupgrade.RecordSnapshots{Meta: aggregate.Meta{ID: c.id("snapshots")}, Snapshot: c.snapshot, Volumes: snap})
	}
	return p
}

// keepSchedulingOff records the node's spec.allowScheduling the first time
// (before changing it, so the value survives any crash), and keeps it off
// until the new IM runs: no new replica may land on an IM about to go, and
// Longhorn must not reuse the replicas the upgrade fails in it. Every step
// up to the IM's replacement calls it, so a user turning scheduling back on
// meanwhile is undone.
func (p *stepPlan) keepSchedulingOff(o observation, st nodeupgrade.State, c settings) {
	if !o.found {
		return
	}
	if st.Scheduling == nil {
		p.record = append(p.record, nodeupgrade.RecordScheduling{Meta: aggregate.Meta{ID: c.id("scheduling")}, AllowScheduling: o.node.AllowScheduling})
	} else if st.Scheduling.Restored {
		return
	}
	if o.node.AllowScheduling {
		p.setScheduling(c.node, false)
	}
}

// restoreScheduling writes back the recorded spec.allowScheduling, then
// records that it did. Nothing was recorded: nothing to restore. It
// replaces whatever the plan wrote to the setting before it (the scheduling
// kept off while targets moved): the value it records as restored must be
// the value the plan leaves, even when a restoring write whose answer was
// lost already turned scheduling back on.
func (p *stepPlan) restoreScheduling(o observation, st nodeupgrade.State, c settings) {
	if !st.Scheduling.Pending() || !o.found {
		return
	}
	p.actions = slices.DeleteFunc(p.actions, func(a dataplane.Action) bool {
		return a.Call == dataplane.CallSetReplicaScheduling && a.Object == c.node
	})
	if o.node.AllowScheduling != st.Scheduling.Previous {
		p.setScheduling(c.node, st.Scheduling.Previous)
	}
	p.confirm = append(p.confirm, nodeupgrade.ConfirmSchedulingRestored{Meta: aggregate.Meta{ID: c.id("scheduling-restored")}})
}

// recordLate records, as pending, the v2 volumes the node concerns now that
// its upgrade has not recorded: those found at initializing, and those
// attached (or re-attached with their target on the node: spec.engineNodeID
// survives a detach) since. A step that walked only the volumes recorded at
// the start would wait for the IM to empty forever.
func (p *stepPlan) recordLate(o observation, st nodeupgrade.State, c settings) {
	for _, v := range o.on {
		if _, ok := st.Volumes[v.Name]; ok || !plan.Concerned(v, c.node) {
			continue
		}
		p.volume(v.Name, events.VolumePending, v.TargetNode, describeVolume(v))
	}
}

// decideFailReplicas takes the node's replicas of attached v2 volumes out
// of service in two steps, as Longhorn takes out a replica it deletes: each
// is marked failed (spec.failedAt), which makes Longhorn drop it from its
// engine, and its instance is stopped only once no running engine holds it
// any more; stopped while an engine still held it, the engine's writes
// would wait for the replica link's I/O timeout (10 s). The node's
// replica scheduling is off by then, so Longhorn does not reuse them.
//
// Detached volumes are left alone: their replicas run no instance, their
// data on the node's disk outlives the IM. A replica is never failed while
// it is its volume's only healthy copy.
func decideFailReplicas(o observation, st nodeupgrade.State, c settings) stepPlan {
	if onTargetImage(o.ims, c.image) {
		return stepPlan{done: true}
	}
	p := stepPlan{done: true}
	p.keepSchedulingOff(o, st, c)
	p.recordLate(o, st, c)
	p.retireAll(o, st, c)
	if !p.done && p.block == nil && len(p.actions) == 0 {
		p.block = waiting("", "ReplicasStopping", "waiting for the node's replicas of attached v2 volumes to stop")
	}
	return p
}

// retireAll retires the replicas of every recorded volume, failing none
// until each has the replicas it asks for elsewhere (prepareRedundancy)
// and the rebuild of each is planned (prepareRebuild): the hashing of
// every volume's snapshots runs at once, and the replicas are failed
// together once it is over, in name order.
func (p *stepPlan) retireAll(o observation, st nodeupgrade.State, c settings) {
	vols := o.sortedRecorded()
	ready, queued := true, map[string]int64{}
	for _, v := range vols {
		ready = p.prepareRedundancy(o, st, v, c) && p.prepareRebuild(o, st, v, c, queued) && ready
	}
	for _, v := range vols {
		p.retireReplicas(v, c, ready)
	}
}

// retireReplicas moves v's replicas on the node one step on towards
// stopped: failed (only once mayFail: its rebuild is planned), then, out
// of the engine, stopped.
func (p *stepPlan) retireReplicas(v dataplane.Volume, c settings, mayFail bool) {
	if !v.Attached() || v.DataEngine != dataplane.DataEngineV2 {
		return
	}
	elsewhere := v.HealthyReplicasOff(c.node)
	for _, r := range v.Replicas {
		if r.Node != c.node {
			continue
		}
		switch {
		case !r.Failed && (r.Active() || r.Running):
			if r.Healthy() && elsewhere == 0 {
				p.wait(waiting(v.Name, "LastHealthyReplica", "volume %s: its only healthy replica %s is on %s; not failing it until another replica is healthy", v.Name, r.Name, c.node))
				continue
			}
			p.done = false
			if !mayFail {
				continue
			}
			p.act(dataplane.CallFailReplica, v.Name, r.Name)
		case r.Failed && r.Running && r.InEngine:
			p.wait(waiting(v.Name, "ReplicaLeavingEngine",
				"volume %s: replica %s is failed and its engine still holds it; its instance stops once the engine has removed it (a replica of the volume that is not running holds back Longhorn's update of the engine, longhorn/longhorn#13629)", v.Name, r.Name))
		case r.Failed && r.Running:
			p.done = false
			p.act(dataplane.CallStopReplica, v.Name, r.Name)
		}
	}
}

// decideUpgradeInstanceManager gets the node an IM of the target image once
// no attached volume depends on the old one, and waits for it to run. On
// Longhorn v1.12 Longhorn itself replaces an old-image IM that runs
// nothing; the step deletes it only when it runs no instance, which is
// what Longhorn would do next. On a Longhorn updating IMs in place the
// step sets the IM's image.
func decideUpgradeInstanceManager(o observation, st nodeupgrade.State, c settings) stepPlan {
	if p := nodeCheck(o, c); p != nil {
		return *p
	}
	if onTargetImage(o.ims, c.image) {
		// Done, once a late volume's switch-over under way has ended.
		p := stepPlan{done: true}
		p.switchAway(o, st, c, true)
		return p
	}
	// A volume attached, or with its target placed on the node, since the
	// earlier steps: its replicas and target go the same way first.
	p := stepPlan{}
	p.keepSchedulingOff(o, st, c)
	p.recordLate(o, st, c)
	p.retireAll(o, st, c)
	p.switchAway(o, st, c, false)
	// The invariant the whole upgrade exists for, checked on live state over
	// every volume on the node, not only the recorded ones, right before an
	// IM may go.
	for _, v := range o.on {
		if needsSwitch(v, c.node) {
			p.wait(waiting(v.Name, "TargetStillOnNode", "volume %s is attached with its target on %s; not replacing the instance manager", v.Name, c.node))
			return p
		}
	}
	if p.block != nil || len(p.actions) > 0 {
		return p
	}
	if h := liveCheck(o, c); h != nil {
		return *h
	}
	if h := holdCheck(o, c); h != nil {
		return *h
	}
	for _, im := range o.ims {
		switch {
		case im.Deleting:
			p.wait(waiting("", "InstanceManagerTerminating",
				"instance manager %s on %s is being deleted; waiting for its pod to go before the next one counts (its SPDK target holds the node's hugepages and disks)", im.Name, c.node))
		case im.Image == c.image && im.State == dataplane.IMError:
			p.wait(&block{reason: "InstanceManagerFailed", permanent: true,
				message: fmt.Sprintf("instance manager %s with image %s is in error on %s", im.Name, c.image, c.node)})
		case im.Image == c.image || im.State == dataplane.IMStopped:
		case holds(im, o.profile):
			p.wait(busy(im, o.profile, c))
		case o.profile.InPlaceIM():
			p.act(dataplane.CallSetInstanceManagerImage, im.Name, c.image)
		default:
			p.act(dataplane.CallDeleteInstanceManager, im.Name, "")
		}
	}
	if p.block == nil && len(p.actions) == 0 {
		p.block = waiting("", "InstanceManagerStarting", "waiting for an instance manager with image %s to run on %s", c.image, c.node)
	}
	return p
}

// holds reports whether replacing the IM would cut an instance it runs.
func holds(im dataplane.InstanceManager, p dataplane.Profile) bool {
	e, f, r := im.Holds(p)
	return e+f+r > 0
}

func busy(im dataplane.InstanceManager, p dataplane.Profile, c settings) *block {
	e, f, r := im.Holds(p)
	what := fmt.Sprintf("%d engine(s), %d engine frontend(s) and %d replica(s)", e, f, r)
	if p.InitiatorsSurviveIM() {
		what = fmt.Sprintf("%d engine(s) and %d replica(s)", e, r)
	}
	return waiting("", "InstanceManagerBusy", "instance manager %s on %s still runs %s; waiting for them to stop before it is replaced",
		im.Name, c.node, what)
}

// decideWaitHealthy waits until every recorded attached v2 volume (the ones
// whose replicas the upgrade failed) is healthy with no replica rebuilding.
// Other volumes are not waited on: their health is not the upgrade's doing.
func decideWaitHealthy(o observation, st nodeupgrade.State, c settings) stepPlan {
	p := stepPlan{done: true}
	p.restoreScheduling(o, st, c)
	why := ""
	if st.Scheduling != nil && !st.Scheduling.Previous {
		why = fmt.Sprintf(" (node %s does not allow replica scheduling, as before the upgrade: Longhorn rebuilds its replicas elsewhere or not at all)", c.node)
	}
	for _, v := range o.sortedRecorded() {
		p.observeRebuild(o, st, v)
		if v.Attached() && (v.Robustness != dataplane.RobustnessHealthy || v.Rebuilding()) {
			p.wait(waiting(v.Name, "VolumeNotHealthy", "volume %s: %s, %d of %d replicas healthy, waiting for the rebuild%s",
				v.Name, v.Robustness, v.HealthyReplicas(), v.NumberOfReplicas, why))
		}
	}
	return p
}

// decideFinalize marks every volume completed. The upgrade's snapshots of
// the node's volumes stay: the nodes after it rebuild against them, and
// the controller removes them once the whole upgrade completed.
func decideFinalize(o observation, st nodeupgrade.State, c settings) stepPlan {
	p := stepPlan{done: true}
	p.restoreScheduling(o, st, c)
	for _, name := range st.VolumesWhere(func(v nodeupgrade.Volume) bool { return v.State != events.VolumeCompleted }) {
		p.volume(name, events.VolumeCompleted, "", "volume done")
	}
	return p
}

func describeVolume(v dataplane.Volume) string {
	if v.Attached() {
		return fmt.Sprintf("attached to %s, target on %s, %d/%d replicas healthy", v.AttachedNode, v.TargetHost(), v.HealthyReplicas(), v.NumberOfReplicas)
	}
	return fmt.Sprintf("detached, %d replicas", len(v.Replicas))
}
