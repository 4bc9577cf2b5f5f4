package nodeworker

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/switchback-dev/switchback/aggregate/nodeupgrade"
	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/plan"
)

// step observes the cluster for the current step, acts on what is not done
// yet, and says whether the step's goal holds.
func (r *run) step(ctx context.Context) (outcome, error) {
	switch r.st.State {
	case events.NodePending:
		return outcome{done: true}, nil
	case events.NodeInitializing:
		return r.initialize(ctx)
	case events.NodeFailingReplicas:
		return r.failReplicas(ctx)
	case events.NodeSwitchingOver:
		return r.switchOver(ctx)
	case events.NodeUpgradingInstanceManager:
		return r.upgradeInstanceManager(ctx)
	case events.NodeSwitchingBack:
		return r.switchBack(ctx)
	case events.NodeRebuildingReplica:
		return r.waitHealthy(ctx)
	case events.NodeFinalizing:
		return r.finalize(ctx)
	}
	return outcome{}, fmt.Errorf("node %s: no step for state %q", r.w.cfg.Node, r.st.State)
}

func (r *run) dp() dataplane.DataPlane { return r.w.cfg.DataPlane }

// node checks the node still exists (a deleted node fails the upgrade: there
// is nothing left to upgrade and its volumes need the user) and is Ready.
func (r *run) node(ctx context.Context) (dataplane.Node, *outcome, error) {
	n, err := r.dp().Node(ctx, r.w.cfg.Node)
	if errors.Is(err, dataplane.ErrNotFound) {
		return n, &outcome{fatal: &block{reason: "NodeDeleted", message: fmt.Sprintf("node %s was removed from the cluster during its upgrade", r.w.cfg.Node)}}, nil
	}
	if err != nil {
		return n, nil, err
	}
	if !n.Ready {
		return n, &outcome{block: waiting("", "NodeNotReady", "node %s is not Ready", n.Name)}, nil
	}
	return n, nil, nil
}

// recorded returns the volumes recorded at initializing, sorted, with their
// live state; volumes deleted since are skipped (nothing left to protect).
func (r *run) recorded(ctx context.Context) ([]dataplane.Volume, error) {
	names := r.st.VolumesWhere(func(v nodeupgrade.Volume) bool { return true })
	out := make([]dataplane.Volume, 0, len(names))
	for _, name := range names {
		v, err := r.dp().Volume(ctx, name)
		if errors.Is(err, dataplane.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// snapshotName is per manager and node: a redelivered step finds its own
// snapshot instead of taking another (the unshipped implementation took new
// snapshots after every restart).
func (r *run) snapshotName() string {
	uid := r.cmd.Manager.UID
	if len(uid) > 8 {
		uid = uid[:8]
	}
	return "switchback-" + uid + "-" + r.w.cfg.Node
}

// initialize flags the node, records the v2 volumes it concerns and snapshots
// the attached ones.
func (r *run) initialize(ctx context.Context) (outcome, error) {
	n, stop, err := r.node(ctx)
	if stop != nil || err != nil {
		return derefOutcome(stop), err
	}
	progressed := false
	if !n.UpgradeRequested {
		if err := r.dp().SetNodeUpgradeRequested(ctx, n.Name, true); err != nil {
			return outcome{}, err
		}
		progressed = true
	}
	vols, err := r.dp().VolumesOn(ctx, n.Name)
	if err != nil {
		return outcome{}, err
	}
	for _, v := range vols {
		leftAway := v.DataEngine == dataplane.DataEngineV2 && v.AttachedNode == n.Name && v.TargetNode != "" && v.TargetNode != n.Name
		if !plan.Concerned(v, n.Name) && !leftAway {
			continue
		}
		if _, ok := r.st.Volumes[v.Name]; !ok {
			r.setVolume(v.Name, events.VolumePending, v.TargetNode, describeVolume(v))
			if leftAway {
				// An earlier upgrade that failed mid-node left this target on
				// another node (safe, but not home): adopt it as switched over,
				// so switching-back brings it home.
				msg := "found on " + v.TargetNode + ", left there by an earlier upgrade; it will be brought back"
				r.setVolume(v.Name, events.VolumeSwitchingOver, v.TargetNode, msg)
				r.setVolume(v.Name, events.VolumeSwitchedOver, v.TargetNode, msg)
			}
			progressed = true
		}
		if v.Attached() {
			if err := r.dp().CreateSnapshot(ctx, v.Name, r.snapshotName()); err != nil {
				return outcome{}, fmt.Errorf("snapshot volume %s: %w", v.Name, err)
			}
		}
	}
	return outcome{done: true, progressed: progressed}, nil
}

// failReplicas stops the node's replicas of the recorded attached v2 volumes
// and deletes them once stopped; they are rebuilt after the new IM runs.
//
// Detached volumes are left alone: their replicas run nowhere, their data on
// the node's disk outlives the IM, and deleting a replica of a volume nobody
// can rebuild from would lose data. For the same reason a replica is never
// failed while it is its volume's only healthy copy.
func (r *run) failReplicas(ctx context.Context) (outcome, error) {
	if on, err := r.onTargetImage(ctx); on || err != nil {
		return outcome{done: on}, err
	}
	vols, err := r.recorded(ctx)
	if err != nil {
		return outcome{}, err
	}
	out := outcome{done: true}
	for _, v := range vols {
		if !v.Attached() {
			continue
		}
		elsewhere := 0
		for _, rep := range v.Replicas {
			if rep.Node != r.w.cfg.Node && rep.Healthy() {
				elsewhere++
			}
		}
		for _, rep := range v.Replicas {
			if rep.Node != r.w.cfg.Node {
				continue
			}
			out.done = false
			if elsewhere == 0 && rep.Healthy() {
				out.block = waiting(v.Name, "LastHealthyReplica", "volume %s: its only healthy replica %s is on %s; not failing it until another replica is healthy", v.Name, rep.Name, r.w.cfg.Node)
				continue
			}
			out.progressed = true
			if rep.State == dataplane.ReplicaRunning || rep.State == dataplane.ReplicaRebuilding {
				err = r.dp().FailReplica(ctx, v.Name, rep.Name)
			} else {
				err = r.dp().DeleteReplica(ctx, v.Name, rep.Name)
			}
			if err != nil && !errors.Is(err, dataplane.ErrNotFound) {
				return outcome{}, fmt.Errorf("replica %s of volume %s: %w", rep.Name, v.Name, err)
			}
		}
	}
	if !out.done && out.block == nil {
		out.block = waiting("", "ReplicasStopping", "waiting for the node's v2 replicas to stop and be removed")
	}
	return out, nil
}

// onTargetImage reports whether the node's IM already runs the target image
// and nothing else is left to replace: the IM will not be restarted, so
// failing replicas or moving targets would only disturb volumes for nothing
// (and replicas stopped on an IM that stays would wait for a new one).
func (r *run) onTargetImage(ctx context.Context) (bool, error) {
	ims, err := r.dp().InstanceManagers(ctx, r.w.cfg.Node)
	if err != nil {
		return false, err
	}
	running := false
	for _, im := range ims {
		switch {
		case im.Image == r.cmd.InstanceManagerImage && im.State == dataplane.IMRunning:
			running = true
		case im.State != dataplane.IMStopped:
			return false, nil
		}
	}
	return running, nil
}

// needsSwitch: an attached volume whose target runs on the upgrading node.
func (r *run) needsSwitch(v dataplane.Volume) bool {
	return v.Attached() && v.TargetNode == r.w.cfg.Node
}

// switchOver moves every attached volume's target off the node. Each
// destination is recorded before the move is requested, so a restart moves
// the target to the same node (and knows to bring it back) instead of
// choosing again or losing track of it.
func (r *run) switchOver(ctx context.Context) (outcome, error) {
	if _, stop, err := r.node(ctx); stop != nil || err != nil {
		return derefOutcome(stop), err
	}
	if on, err := r.onTargetImage(ctx); on || err != nil {
		return outcome{done: on}, err
	}
	vols, err := r.recorded(ctx)
	if err != nil {
		return outcome{}, err
	}
	out := outcome{done: true}
	var chooser *plan.Chooser
	for _, v := range vols {
		if r.st.Volumes[v.Name].State != events.VolumePending || !r.needsSwitch(v) {
			continue
		}
		if chooser == nil {
			c, err := plan.ReadPlacement(ctx, r.dp())
			if err != nil {
				return outcome{}, err
			}
			chooser = plan.NewChooser(c)
		}
		to, why, ok := chooser.Choose(v, r.w.cfg.Node, r.cmd.InstanceManagerImage)
		if !ok {
			out.done = false
			out.block = waiting(v.Name, "NoTemporaryTarget", "volume %s: no node can host its target: %s", v.Name, why)
			continue
		}
		r.setVolume(v.Name, events.VolumeSwitchingOver, to, "target moving to "+to+": "+why)
		out.done, out.progressed = false, true
	}
	if err := r.flush(ctx); err != nil {
		return outcome{}, err
	}
	for _, v := range vols {
		rec := r.st.Volumes[v.Name]
		if rec.State != events.VolumeSwitchingOver {
			continue
		}
		to := rec.TargetNode
		if v.TargetNode == to {
			r.setVolume(v.Name, events.VolumeSwitchedOver, to, "target runs on "+to)
			out.progressed = true
			continue
		}
		out.done = false
		if v.DesiredTargetNode != to {
			if err := r.dp().SetTargetNode(ctx, v.Name, to); err != nil {
				return outcome{}, fmt.Errorf("volume %s: move target to %s: %w", v.Name, to, err)
			}
			out.progressed = true
			continue
		}
		out.block = waiting(v.Name, "TargetNotMoved", "volume %s: target still on %s, waiting for it to move to %s", v.Name, v.TargetNode, to)
	}
	return out, nil
}

// upgradeInstanceManager replaces the node's IM once no attached volume's
// target depends on it, and waits for the IM with the target image.
func (r *run) upgradeInstanceManager(ctx context.Context) (outcome, error) {
	if _, stop, err := r.node(ctx); stop != nil || err != nil {
		return derefOutcome(stop), err
	}
	if on, err := r.onTargetImage(ctx); on || err != nil {
		return outcome{done: on}, err
	}
	// The invariant the whole design exists for, checked on live state over
	// every volume on the node, not only the recorded ones, right before an
	// IM may be deleted.
	vols, err := r.dp().VolumesOn(ctx, r.w.cfg.Node)
	if err != nil {
		return outcome{}, err
	}
	for _, v := range vols {
		if v.DataEngine == dataplane.DataEngineV2 && r.needsSwitch(v) {
			return outcome{block: waiting(v.Name, "TargetStillOnNode", "volume %s is attached with its target on %s; not replacing the instance manager", v.Name, r.w.cfg.Node)}, nil
		}
	}
	ims, err := r.dp().InstanceManagers(ctx, r.w.cfg.Node)
	if err != nil {
		return outcome{}, err
	}
	image := r.cmd.InstanceManagerImage
	out := outcome{}
	for _, im := range ims {
		switch {
		case im.Image == image && im.State == dataplane.IMError:
			out.block = &block{reason: "InstanceManagerFailed", permanent: true,
				message: fmt.Sprintf("instance manager %s with image %s is in error on %s", im.Name, image, r.w.cfg.Node)}
		case im.Image != image && im.State != dataplane.IMStopped:
			if err := r.dp().DeleteInstanceManager(ctx, im.Name); err != nil && !errors.Is(err, dataplane.ErrNotFound) {
				return outcome{}, fmt.Errorf("delete instance manager %s: %w", im.Name, err)
			}
			out.progressed = true
		}
	}
	if out.block == nil {
		out.block = waiting("", "InstanceManagerStarting", "waiting for an instance manager with image %s to run on %s", image, r.w.cfg.Node)
	}
	return out, nil
}

// switchBack brings every switched-over target home and clears the override.
func (r *run) switchBack(ctx context.Context) (outcome, error) {
	vols, err := r.recorded(ctx)
	if err != nil {
		return outcome{}, err
	}
	out := outcome{done: true}
	for _, v := range vols {
		rec := r.st.Volumes[v.Name]
		if !slices.Contains([]events.VolumeState{events.VolumeSwitchedOver, events.VolumeSwitchingBack}, rec.State) {
			continue
		}
		moved, err := r.bringHome(ctx, v)
		if err != nil {
			return outcome{}, err
		}
		if moved.progressed {
			out.progressed = true
		}
		if !moved.done {
			out.done = false
			out.block = moved.block
		}
	}
	return out, nil
}

// bringHome moves one volume's target back to the upgrading node (its home)
// and clears the override once it is there. Used by switch-back and cancel.
func (r *run) bringHome(ctx context.Context, v dataplane.Volume) (outcome, error) {
	home := r.w.cfg.Node
	rec := r.st.Volumes[v.Name]
	if rec.State != events.VolumeSwitchingBack {
		r.setVolume(v.Name, events.VolumeSwitchingBack, home, "target moving back to "+home)
	}
	if v.TargetNode == home || !v.Attached() {
		if v.DesiredTargetNode != "" {
			if err := r.dp().SetTargetNode(ctx, v.Name, ""); err != nil {
				return outcome{}, fmt.Errorf("volume %s: clear target override: %w", v.Name, err)
			}
		}
		r.setVolume(v.Name, events.VolumeSwitchedBack, home, "target back on "+home)
		return outcome{done: true, progressed: true}, nil
	}
	if v.DesiredTargetNode != home {
		if err := r.dp().SetTargetNode(ctx, v.Name, home); err != nil {
			return outcome{}, fmt.Errorf("volume %s: move target back to %s: %w", v.Name, home, err)
		}
		return outcome{progressed: true, block: waiting(v.Name, "TargetNotMovedBack", "volume %s: target moving back from %s to %s", v.Name, v.TargetNode, home)}, nil
	}
	return outcome{block: waiting(v.Name, "TargetNotMovedBack", "volume %s: target still on %s, waiting for it to come back to %s", v.Name, v.TargetNode, home)}, nil
}

// waitHealthy waits until every recorded attached v2 volume (the ones whose
// replicas the upgrade failed) has all its replicas again. Other volumes are
// not waited on: their health is not the upgrade's doing.
func (r *run) waitHealthy(ctx context.Context) (outcome, error) {
	vols, err := r.recorded(ctx)
	if err != nil {
		return outcome{}, err
	}
	for _, v := range vols {
		if v.Attached() && v.HealthyReplicas() < v.NumberOfReplicas {
			return outcome{block: waiting(v.Name, "VolumeNotHealthy", "volume %s: %d of %d replicas healthy, waiting for the rebuild",
				v.Name, v.HealthyReplicas(), v.NumberOfReplicas)}, nil
		}
	}
	return outcome{done: true}, nil
}

// finalize brings detached volumes to the target image, marks every volume
// completed and clears the node flag.
func (r *run) finalize(ctx context.Context) (outcome, error) {
	vols, err := r.recorded(ctx)
	if err != nil {
		return outcome{}, err
	}
	image := r.cmd.InstanceManagerImage
	for _, v := range vols {
		if !v.Attached() && v.Image != image {
			if err := r.dp().SetVolumeImage(ctx, v.Name, image); err != nil {
				return outcome{}, fmt.Errorf("volume %s: set image %s: %w", v.Name, image, err)
			}
		}
	}
	for _, name := range r.st.VolumesWhere(func(v nodeupgrade.Volume) bool { return v.State != events.VolumeCompleted }) {
		r.setVolume(name, events.VolumeCompleted, "", "volume done")
	}
	if err := r.dp().SetNodeUpgradeRequested(ctx, r.w.cfg.Node, false); err != nil && !errors.Is(err, dataplane.ErrNotFound) {
		return outcome{}, err
	}
	return outcome{done: true}, nil
}

func derefOutcome(o *outcome) outcome {
	if o == nil {
		return outcome{}
	}
	return *o
}

func describeVolume(v dataplane.Volume) string {
	if v.Attached() {
		return fmt.Sprintf("attached to %s, target on %s, %d/%d replicas healthy", v.AttachedNode, v.TargetNode, v.HealthyReplicas(), v.NumberOfReplicas)
	}
	return fmt.Sprintf("detached, %d replicas", len(v.Replicas))
}
