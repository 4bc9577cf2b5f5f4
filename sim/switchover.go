package sim

import (
	"fmt"
	"time"

	"github.com/switchback-dev/switchback/dataplane"
)

// This file is Longhorn's engine switch-over as v1.12's volume and
// EngineFrontend controllers run it (sim/RULES.md): when the node an
// attached v2 volume's engine should run on (spec.engineNodeID, else the
// attached node) differs from where it runs, a second engine is prepared
// there (preparing), the initiator's paths are switched to it
// (switching-over: the new path connected non-optimized, the old path made
// inaccessible, the new path promoted), and the old engine goes
// (finalizing). The initiator stays on the attached node throughout.
//
// The switch-over takes TargetMoveLatency: half preparing, then a quarter
// for each of the initiator's preparing and switching phases; promoted,
// it ends at the next reconcile.

// efPhase is how far the initiator (the EngineFrontend) has switched its
// paths to the new engine.
type efPhase int

const (
	// efIdle: only the old path, optimized.
	efIdle efPhase = iota
	// efPreparing: the new path is connected, non-optimized, beside the old.
	efPreparing
	// efSwitching: the old path is inaccessible; only the new one serves.
	efSwitching
)

// switchover is a switch-over under way.
type switchover struct {
	dest  string
	state dataplane.SwitchoverState
	ef    efPhase
	// engine is the new engine's process on dest, once it started.
	engine binding
	gen    uint64
}

// switchingPaths reports that the initiator has begun switching its paths
// (dataplane.Volume.PathsSwitching).
func (sw *switchover) switchingPaths() bool {
	return sw.state == dataplane.SwitchoverSwitchingOver && sw.ef >= efPreparing
}

// planSwitch reacts to a change of where the engine should run, as one
// pass of Longhorn's volume controller: its replica reconcile first (with
// one engine, a reuse may start now), then the switch-over code.
func (s *Sim) planSwitch(v *volume, now time.Time) {
	if v.attached == "" {
		s.endSwitch(v)
		return
	}
	dest := v.desired()
	if v.sw != nil && v.sw.dest == dest {
		return
	}
	if v.sw == nil {
		s.placeReplicas(v, now)
	}
	if v.sw != nil {
		switch {
		case v.sw.state == dataplane.SwitchoverFinalizing:
			// The target already moved; what follows is a new switch-over,
			// planned once this one has ended.
			return
		case dest == v.target:
			s.withdraw(v, now)
			return
		default:
			s.revert(v, fmt.Sprintf("the engine node changed to %s during a switch-over to %s", dest, v.sw.dest))
			s.endSwitch(v)
		}
	}
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

// withdraw is spec.engineNodeID set back to where the engine runs while a
// switch-over is under way: Longhorn's cleanup branch stops and deletes the
// new engine (finalizing). Past the initiator's switching phase the old path
// stays inaccessible (RuleRevertLeavesPathDown).
func (s *Sim) withdraw(v *volume, now time.Time) {
	s.leavePathDown(v, "the switch-over to "+v.sw.dest+" was withdrawn")
	s.finalize(v, now)
}

// finalize puts a withdrawn switch-over in finalizing: the new engine is
// deleted, and the switch-over ends at the next reconcile.
func (s *Sim) finalize(v *volume, now time.Time) {
	sw := v.sw
	sw.state, sw.ef, sw.engine = dataplane.SwitchoverFinalizing, efIdle, binding{}
	delIdx(s.migratingTo, sw.dest, v.name)
	s.counts.dirty[v.name] = struct{}{}
	s.imCheck[sw.dest] = struct{}{}
	delete(s.pendingSwitch, v.name)
	s.markVolume(v.name)
	s.schedule(&timer{due: now, kind: timerSwitch, obj: v.name, gen: sw.gen})
}

// leavePathDown records, when the initiator's switching phase already made
// the old path inaccessible, that it stays so: Longhorn's next phase call
// goes to the old address, which the initiator takes as a no-op.
func (s *Sim) leavePathDown(v *volume, what string) {
	if v.sw.ef != efSwitching || !s.on(RuleRevertLeavesPathDown) {
		return
	}
	v.pathDown = fmt.Sprintf("%s after the initiator had made the old path to %s inaccessible: Longhorn leaves it so, and the volume has no usable path until a later switch-over connects a new one", what, v.target)
	s.markVolume(v.name)
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
	s.markVolume(v.name)
}

// advanceSwitch moves a switch-over on when its phase is due or what held it
// changed, checking Longhorn's revert conditions on the way (see
// revertCause). It reports whether the volume changed.
//
//   - preparing (or reverting, retried): it waits (no timeout, like
//     Longhorn) while the destination cannot host an engine; else the new
//     engine runs and the initiator starts switching.
//   - switching-over: the initiator's phases follow each other, unless
//     its frontend has no switch-over path (ublk, none: it stays there for
//     good), a failure is injected (its phase call fails and is retried,
//     reported as FailedSwitchover) or the new engine was lost (a revert).
//     Promoted, the new engine serves: finalizing.
//   - finalizing: the old engine is gone; the switch-over ends, and one to
//     where the engine should run now is planned if that changed meanwhile.
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
		if sw.state == dataplane.SwitchoverReverting {
			// Tried again: a new engine is prepared.
			delete(s.pendingSwitch, name)
			sw.state = dataplane.SwitchoverPreparing
			s.markVolume(name)
			s.schedule(&timer{due: now.Add(s.cfg.TargetMoveLatency / 2), kind: timerSwitch, obj: name, gen: gen})
			return true
		}
		if !s.canHostEngine(sw.dest) {
			s.pendingSwitch[name] = struct{}{}
			was := sw.state
			sw.state = dataplane.SwitchoverPreparing
			return was != sw.state
		}
		sw.state = dataplane.SwitchoverSwitchingOver
		sw.engine = s.nodes[sw.dest].bind()
		return s.switchPaths(v, now)
	case dataplane.SwitchoverSwitchingOver:
		if why := s.revertCause(v); why != "" && s.on(RuleRevertWhileSwitchingOver) {
			return s.revert(v, why)
		}
		if !sw.engine.valid() {
			return s.revert(v, "the new engine on "+sw.dest+" stopped")
		}
		return s.switchPaths(v, now)
	case dataplane.SwitchoverFinalizing:
		s.endSwitch(v)
		s.planSwitch(v, now)
		return true
	}
	return false
}

// switchPaths runs the initiator's next phase of a switch-over in
// switching-over: preparing (the new path connected), switching (the old
// path inaccessible), promoting (the new engine serves: finalizing, which
// ends at the next reconcile). Each phase but the last takes a quarter of
// TargetMoveLatency. A frontend without a switch-over path stays there for
// good; an injected failure makes the phase's call fail and retry,
// reported as FailedSwitchover.
func (s *Sim) switchPaths(v *volume, now time.Time) bool {
	sw := v.sw
	if !v.switchable() {
		delete(s.pendingSwitch, v.name)
		return true
	}
	if s.faults.moveFail[v.name] {
		msg := fmt.Sprintf("Failed to switch over target to %s: %sswitch-over refused", engineAddress(sw.dest), InjectedPrefix)
		s.pendingSwitch[v.name] = struct{}{}
		changed := v.swError != msg
		v.swError = msg
		return changed
	}
	delete(s.pendingSwitch, v.name)
	v.swError = ""
	switch sw.ef {
	case efIdle:
		sw.ef = efPreparing
		if s.keepsPaths(v) {
			v.pathDown = "" // the new path serves
		}
	case efPreparing:
		sw.ef = efSwitching
	case efSwitching:
		if !s.keepsPaths(v) {
			v.pathDown = fmt.Sprintf("the target moved to %s, but the kernel of %s (nvme_core.multipath=N) made the new path a device of its own: the volume's device has no usable path until it is attached again", sw.dest, v.attached)
		}
		s.setTarget(v, sw.dest)
		v.targetIM = sw.engine
		v.swDone++
		sw.state, sw.ef, sw.engine = dataplane.SwitchoverFinalizing, efIdle, binding{}
		delIdx(s.migratingTo, sw.dest, v.name)
		s.counts.dirty[v.name] = struct{}{}
		s.schedule(&timer{due: now, kind: timerSwitch, obj: v.name, gen: sw.gen})
		return true
	}
	s.markVolume(v.name)
	s.schedule(&timer{due: now.Add(s.cfg.TargetMoveLatency / 4), kind: timerSwitch, obj: v.name, gen: sw.gen})
	return true
}

// checkRevert applies Longhorn's revert check to a switch-over under way at
// once, as its next reconcile of the volume would (a replica joined the
// engine).
func (s *Sim) checkRevert(v *volume, now time.Time) {
	if v.sw == nil {
		return
	}
	switch v.sw.state {
	case dataplane.SwitchoverPreparing:
	case dataplane.SwitchoverSwitchingOver:
		if !s.on(RuleRevertWhileSwitchingOver) {
			return
		}
	default:
		return
	}
	if why := s.revertCause(v); why != "" {
		s.revert(v, why)
	}
}

// revert puts the switch-over in reverting: Longhorn deletes the new
// engine and points the initiator back at the old one (leaving the old
// path down past the switching phase), and tries again while the engine
// node still differs, once what made it revert is gone.
func (s *Sim) revert(v *volume, why string) bool {
	s.leavePathDown(v, "a switch-over to "+v.sw.dest+" was reverted ("+why+")")
	s.pendingSwitch[v.name] = struct{}{}
	changed := v.sw.state != dataplane.SwitchoverReverting || v.sw.ef != efIdle
	v.sw.state, v.sw.ef, v.sw.engine = dataplane.SwitchoverReverting, efIdle, binding{}
	v.swGen++
	v.sw.gen = v.swGen
	s.counts.dirty[v.name] = struct{}{}
	s.markVolume(v.name)
	return changed
}

// revertCause says why Longhorn would revert the volume's switch-over now,
// or "".
func (s *Sim) revertCause(v *volume) string {
	switch {
	case !v.targetIM.valid():
		return "the current engine on " + v.target + " is not running"
	case v.count(dataplane.ReplicaRunning) == 0:
		return "no running replica to bind the new engine to"
	case v.rebuildingInEngine() > 0:
		return "a replica is rebuilding (WO) or in the engine with no mode yet"
	}
	return ""
}

// canHostEngine reports whether an engine can start on the node: Ready, v2,
// with a running IM.
func (s *Sim) canHostEngine(nodeName string) bool {
	n := s.nodes[nodeName]
	return n != nil && n.v2 && n.imRunning()
}

// keepsPaths reports whether the initiator's kernel keeps a switch-over's
// new path under the volume's device: always, but for a blockdev volume
// whose attached node's nvme_core.multipath is N
// (RuleNoSecondPathWithoutMultipath).
func (s *Sim) keepsPaths(v *volume) bool {
	n := s.nodes[v.attached]
	return !s.on(RuleNoSecondPathWithoutMultipath) || v.frontend != dataplane.FrontendBlockdev || n == nil || n.multipath != dataplane.MultipathOff
}

// switchable reports whether the volume's initiator has a switch-over path.
func (v *volume) switchable() bool {
	return dataplane.Volume{Frontend: v.frontend}.CanSwitchTarget()
}

// engineAddress is the made-up NVMe/TCP address of an engine on a node, as
// Longhorn's messages name targets.
func engineAddress(nodeName string) string { return nodeName + ":20001" }
