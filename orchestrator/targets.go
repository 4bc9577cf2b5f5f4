package orchestrator

import (
	"context"
	"errors"
	"fmt"

	"github.com/switchback-dev/switchback/aggregate/nodeupgrade"
	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/events"
)

// The controller's records of targets away (dataplane.Volume.Away). A
// worker may move a volume's target off its node and back only as the
// record on the volume says (on Longhorn, the workers' admission policy
// enforces it), and only the controller writes records. Each is a
// projection of the node upgrade's history: the switch-over the worker
// recorded (VolumeStateChanged to switching-over, with the engine node
// before and the temporary target) before it asks for the move. So the
// history is what survives a restart, and a record lost or late is
// written again from it; the worker waits for the record, the controller
// clears it once the target is home.

// awayReaction is whether a volume change may change the volume's record.
func awayReaction(to events.VolumeState) bool {
	switch to {
	case events.VolumeSwitchingOver, events.VolumeSwitchingBack, events.VolumeSwitchedBack, events.VolumeCompleted:
		return true
	}
	return false
}

// TargetAwayRecord decides the record volume v must carry while the
// upgrade of node holds it as rec: want (nil: none) and whether to write
// it. A record is created only when the volume as read confirms what the
// worker recorded, its engine node still the one before and its target
// concerning node: the record lets node's worker move the target, so a
// worker's history alone (which a compromised worker writes) does not
// grant a move of a target that was never on its node. refused says why
// one was not created. Records of other nodes are left alone, except that
// a confirmed new record replaces one (a record left behind by an upgrade
// that ended in error).
func TargetAwayRecord(node string, rec nodeupgrade.Volume, v dataplane.Volume) (want *dataplane.TargetAway, write bool, refused string) {
	have := v.Away
	mine := have != nil && have.Node == node
	switch rec.State {
	case events.VolumeSwitchingOver, events.VolumeSwitchedOver:
		if rec.EngineNodeBefore == nil || rec.TargetNode == "" {
			return nil, false, "the history holds no engine node before or no temporary target"
		}
		want = &dataplane.TargetAway{Node: node, EngineNodeBefore: *rec.EngineNodeBefore, Temporary: rec.TargetNode}
		switch {
		case have != nil && *have == *want:
			return want, false, ""
		case mine && have.EngineNodeBefore == want.EngineNodeBefore:
			// A redirect to another temporary target.
			return want, true, ""
		case v.EngineNode != want.EngineNodeBefore:
			return nil, false, fmt.Sprintf("its spec.engineNodeID is %q, not %q as recorded before the switch-over", v.EngineNode, want.EngineNodeBefore)
		case !targetConcerns(v, node):
			return nil, false, fmt.Sprintf("its target is on %q (engine node %q, attached to %q), not on %s", v.TargetHost(), v.EngineNode, v.AttachedNode, node)
		}
		return want, true, ""
	case events.VolumeSwitchingBack:
		// The record the move home needs is the one the move away needed:
		// never created here (a switch-back of a target that never moved
		// writes nothing).
		return have, false, ""
	case events.VolumeSwitchedBack, events.VolumeCompleted:
		return nil, mine, ""
	}
	return have, false, ""
}

// targetConcerns reports whether v's target runs on node, or is asked to.
func targetConcerns(v dataplane.Volume, node string) bool {
	return v.TargetHost() == node || v.EngineNode == node || (v.EngineNode == "" && v.AttachedNode == node)
}

// recordTargetAway brings the record of the event's volume in line with
// the node upgrade's history (TargetAwayRecord), reading the volume fresh
// from the cluster. A volume gone needs none.
func (o *Orchestrator) recordTargetAway(ctx context.Context, e events.Envelope, st nodeupgrade.State) error {
	d, ok := e.Data.(events.VolumeStateChanged)
	if !ok || o.targets == nil {
		return nil
	}
	node := e.Aggregate.Node
	rec, ok := st.Volumes[d.Volume]
	if !ok {
		return nil
	}
	v, err := o.cfg.Cluster.Volume(ctx, d.Volume)
	if errors.Is(err, dataplane.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("orchestrator: record of volume %s's target away from %s: %w", d.Volume, node, err)
	}
	want, write, refused := TargetAwayRecord(node, rec, v)
	if refused != "" {
		o.log.Warn("target away not recorded: the volume does not confirm the node's history", "manager", e.Aggregate.Manager.String(),
			"node", node, "volume", d.Volume, "why", refused)
	}
	if !write {
		return nil
	}
	err = o.targets.RecordTargetAway(ctx, d.Volume, want)
	switch {
	case errors.Is(err, dataplane.ErrNotFound):
		return nil
	case err != nil:
		return fmt.Errorf("orchestrator: record of volume %s's target away from %s: %w", d.Volume, node, err)
	}
	o.log.Info("target away recorded", "manager", e.Aggregate.Manager.String(), "node", node, "volume", d.Volume, "record", want)
	return nil
}
