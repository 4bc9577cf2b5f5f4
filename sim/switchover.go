package sim

import (
	"fmt"
	"time"

	"github.com/switchback-dev/switchback/dataplane"
)

// This file is Longhorn's engine switch-over as v1.12's volume and
// EngineFrontend controllers run it: when the node an attached v2 volume's
// engine should run on (spec.engineNodeID, else the attached node) differs
// from where it runs, a second engine is prepared there, the initiator's
// path is switched to it, and the old engine goes. The initiator stays on
// the attached node throughout.

// switchover is a switch-over under way.
type switchover struct {
	dest  string
	state dataplane.SwitchoverState
	gen   uint64
}

// planSwitch reacts to a change of where the engine should run. Changing the
// destination while the path is being switched leaves the old path
// inaccessible (Longhorn updates the initiator's target only at the end of
// the switch): the volume's I/O fails until a later switch-over completes.
// While preparing, changing it is clean: Longhorn drops the new engine.
func (s *Sim) planSwitch(v *volume, now time.Time) {
	if v.attached == "" {
		s.endSwitch(v)
		return
	}
	dest := v.desired()
	if v.sw != nil && v.sw.dest == dest {
		return
	}
	if v.sw != nil && v.sw.state == dataplane.SwitchoverSwitchingOver {
		v.broken = fmt.Sprintf("engine node changed to %q while the initiator's path was switching to %s: the old path is left inaccessible", dest, v.sw.dest)
		s.markVolume(v.name)
	}
	s.endSwitch(v)
	if dest == v.target {
		return
	}
	v.swGen++
	v.sw = &switchover{dest: dest, state: dataplane.SwitchoverPreparing, gen: v.swGen}
	addIdx(s.migratingTo, dest, v.name)
	s.counts.dirty[v.name] = struct{}{}
	s.imCheck[dest] = struct{}{}
	s.schedule(&timer{due: now.Add(s.cfg.TargetMoveLatency / 2), kind: timerSwitch, obj: v.name, gen: v.swGen})
}

// endSwitch drops the switch-over under way, if any, and what it reported:
// like Longhorn's, a volume's switch-over error is that of the switch-over
// under way.
func (s *Sim) endSwitch(v *volume) {
	v.swError = ""
	if v.sw != nil {
		delIdx(s.migratingTo, v.sw.dest, v.name)
		s.counts.dirty[v.name] = struct{}{}
		s.imCheck[v.sw.dest] = struct{}{}
		v.sw = nil
	}
	delete(s.pendingSwitch, v.name)
}

// advanceSwitch moves a switch-over on, when its phase is due or what held it
// changed. It reports whether the volume changed.
//
//   - preparing (or reverting, retried): a switch-over is reverted while the
//     current engine does not run, a replica is rebuilding, no replica is
//     healthy, or a failure is injected; it waits (no timeout, like
//     Longhorn) while the destination cannot host an engine.
//   - switching-over: it completes unless the frontend has no switch-over
//     path (ublk, none), which leaves it there for good, or the new engine
//     was lost meanwhile, which reverts it.
func (s *Sim) advanceSwitch(name string, gen uint64, now time.Time) bool {
	v := s.vols[name]
	if v == nil || v.sw == nil || v.sw.gen != gen {
		return false
	}
	sw := v.sw
	switch sw.state {
	case dataplane.SwitchoverPreparing, dataplane.SwitchoverReverting:
		if why := s.revertCause(v); why != "" {
			return s.revert(v, why)
		}
		if !s.canHostEngine(sw.dest) {
			s.pendingSwitch[name] = struct{}{}
			was := sw.state
			sw.state = dataplane.SwitchoverPreparing
			return was != sw.state
		}
		delete(s.pendingSwitch, name)
		sw.state = dataplane.SwitchoverSwitchingOver
		s.schedule(&timer{due: now.Add(s.cfg.TargetMoveLatency / 2), kind: timerSwitch, obj: name, gen: gen})
		return true
	case dataplane.SwitchoverSwitchingOver:
		if !v.switchable() {
			return false
		}
		if !s.canHostEngine(sw.dest) {
			return s.revert(v, "the new engine on "+sw.dest+" stopped")
		}
		s.endSwitch(v)
		s.setTarget(v, sw.dest)
		v.broken = ""
		v.swDone++
		return true
	}
	return false
}

// revert puts the switch-over in reverting, to be retried when something
// changes. An injected failure is reported the way Longhorn's EngineFrontend
// controller reports a failed switch (a FailedSwitchover Warning).
func (s *Sim) revert(v *volume, why string) bool {
	s.pendingSwitch[v.name] = struct{}{}
	changed := v.sw.state != dataplane.SwitchoverReverting
	v.sw.state = dataplane.SwitchoverReverting
	if s.faults.moveFail[v.name] {
		msg := fmt.Sprintf("Failed to switch over target to %s: %s", engineAddress(v.sw.dest), why)
		changed = changed || v.swError != msg
		v.swError = msg
	}
	return changed
}

// revertCause says why Longhorn would revert the volume's switch-over now,
// or "".
func (s *Sim) revertCause(v *volume) string {
	switch {
	case s.faults.moveFail[v.name]:
		return InjectedPrefix + "switch-over refused"
	case !v.targetIM.valid():
		return "the current engine on " + v.target + " is not running"
	case v.count(dataplane.ReplicaRunning) == 0:
		return "no running replica to bind the new engine to"
	case v.count(dataplane.ReplicaRebuilding) > 0:
		return "a replica is rebuilding (WO)"
	}
	return ""
}

// canHostEngine reports whether an engine can start on the node: Ready, v2,
// with a running IM.
func (s *Sim) canHostEngine(nodeName string) bool {
	n := s.nodes[nodeName]
	return n != nil && n.v2 && n.imRunning()
}

// switchable reports whether the volume's initiator has a switch-over path.
func (v *volume) switchable() bool {
	return dataplane.Volume{Frontend: v.frontend}.CanSwitchTarget()
}

// engineAddress is the made-up NVMe/TCP address of an engine on a node, as
// Longhorn's messages name targets.
func engineAddress(nodeName string) string { return nodeName + ":20001" }
