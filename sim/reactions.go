package sim

import (
	"fmt"
	"time"

	"github.com/switchback-dev/switchback/dataplane"
)

// This file is Longhorn's side: how the cluster reacts to actions and faults.

// planMove (re)computes where the volume's target must go after its override
// or attachment changed. A move to where the target already is completes at
// once; otherwise it completes after TargetMoveLatency if the destination can
// host a target then, and stays pending (a stuck volume) until it can.
func (s *Sim) planMove(v *volume, now time.Time) {
	dest := v.override
	if dest == "" {
		dest = v.attached
	}
	if v.attached == "" || dest == v.target {
		v.move = nil
		delete(s.pendingMoves, v.name)
		return
	}
	v.moveGen++
	v.move = &move{dest: dest, gen: v.moveGen}
	delete(s.pendingMoves, v.name)
	s.schedule(&timer{due: now.Add(s.cfg.TargetMoveLatency), kind: timerMove, obj: v.name, gen: v.moveGen})
}

// tryMove completes a due move if the destination is Ready with a running IM
// and no fault blocks it. Until then the old target keeps serving: the
// initiator switches paths only once the new target exists.
func (s *Sim) tryMove(volName string, gen uint64) bool {
	v := s.vols[volName]
	if v == nil || v.move == nil || v.move.gen != gen {
		return false
	}
	dest := s.nodes[v.move.dest]
	if s.faults.moveFail[volName] || dest == nil || !dest.ready ||
		(v.engine == EngineV2 && (!dest.v2 || !dest.imRunning())) {
		s.pendingMoves[volName] = struct{}{}
		return false
	}
	delete(s.pendingMoves, volName)
	v.move = nil
	s.setTarget(v, dest.name)
	if v.engine == EngineV2 {
		// The engine now runs inside the destination IM, so it runs its image.
		v.image = dest.im.image
	}
	return true
}

// newIM gives the node a fresh IM with the default image, starting.
func (s *Sim) newIM(n *node, now time.Time) {
	n.imSeq++
	m := &im{
		name:  fmt.Sprintf("im-%s-%d", n.name, n.imSeq),
		node:  n.name,
		image: s.cfg.DefaultIMImage,
		state: dataplane.IMStarting,
	}
	n.im = m
	s.ims[m.name] = m
	s.schedule(&timer{due: now.Add(s.cfg.IMStartLatency), kind: timerIMStart, obj: n.name, sub: m.name, gen: m.gen})
}

// tryStartIM finishes starting the node's IM: running, or error when a
// start failure is injected. A NotReady node cannot start pods, so the start
// waits for the node.
func (s *Sim) tryStartIM(nodeName, imName string, gen uint64, now time.Time) bool {
	n := s.nodes[nodeName]
	if n == nil || n.im == nil || n.im.name != imName || n.im.gen != gen || n.im.state != dataplane.IMStarting {
		return false
	}
	if !n.ready {
		s.blockedIMs[nodeName] = struct{}{}
		return false
	}
	delete(s.blockedIMs, nodeName)
	n.im.gen++
	if s.faults.imStartFail[nodeName] {
		n.im.state = dataplane.IMError
		s.markNode(nodeName)
		return true
	}
	n.im.state = dataplane.IMRunning
	for _, m := range n.old {
		delete(s.ims, m.name)
		s.imGone[m.name] = true
	}
	n.old = nil
	s.markNode(nodeName)
	s.unblock = true
	return true
}

// stopIM is what deleting an IM does: it stops at once, a replacement with
// the default image starts, and everything the old one held is lost.
func (s *Sim) stopIM(n *node, m *im, now time.Time) {
	m.state = dataplane.IMStopped
	m.gen++
	delete(s.blockedIMs, n.name)
	if n.im == m {
		n.old = append(n.old, m)
		s.newIM(n, now)
	}
	for _, volName := range sortedKeys(s.replicasOn[n.name]) {
		v := s.vols[volName]
		if v.engine != EngineV2 {
			continue // v1 replicas live in v1 instance managers
		}
		if r := v.replicaOn(n.name); r != nil {
			s.loseReplica(v, r, dataplane.ReplicaError, m.name, false, false, now)
		}
	}
	s.markNode(n.name)
}

// loseReplica takes a replica out of service and remembers where it was, so
// that the rebuild prefers the same node.
func (s *Sim) loseReplica(v *volume, r *replica, state dataplane.ReplicaState, imName string, deliberate, byFault bool, now time.Time) {
	wasActive := r.state == dataplane.ReplicaRunning || r.state == dataplane.ReplicaRebuilding
	r.state = state
	r.gen++
	r.byFault = byFault
	r.salvage = false
	if wasActive {
		v.slots = append(v.slots, slot{node: r.node, im: imName, deliberate: deliberate, byFault: byFault, at: now})
	} else if deliberate {
		// An error replica the caller now stops on purpose: its slot turns
		// deliberate so that it does not come back on the same IM.
		for i := range v.slots {
			if v.slots[i].node == r.node {
				v.slots[i].deliberate, v.slots[i].im = true, imName
			}
		}
	}
	s.reconcile[v.name] = struct{}{}
	s.io.mark(v.name)
}

func (s *Sim) currentIMName(nodeName string) string {
	if n := s.nodes[nodeName]; n != nil && n.im != nil {
		return n.im.name
	}
	return ""
}

// placeReplicas starts one rebuild per missing replica. A lost replica comes
// back on its own node as soon as that node is Ready with a running IM,
// whatever the node's upgrade flag (the flag only keeps other volumes' new
// replicas away), except that a replica stopped on purpose on a flagged node
// waits for a new IM: restarting it in the IM about to be replaced would undo
// the upgrade's failing-replicas step. Otherwise, once ReplicaReplenishWait
// has passed, the rebuild goes to any eligible node without a replica of the
// volume. Every rebuild needs a healthy source, except a salvage of a replica
// that lost its IM but kept its data.
func (s *Sim) placeReplicas(v *volume, now time.Time) bool {
	need := v.numReplicas - v.active()
	if need <= 0 {
		v.slots = nil
		delete(s.waiting, v.name)
		return false
	}
	running := v.count(dataplane.ReplicaRunning)
	changed := false
	unmet := 0
	var kept, expired []slot
	for _, sl := range v.slots {
		if need == 0 {
			break // slots beyond the shortfall are stale
		}
		n := s.nodes[sl.node]
		existing := v.replicaOn(sl.node)
		salvage := running == 0 && existing != nil && existing.state == dataplane.ReplicaError
		if n != nil && s.canReturn(v, n, sl) && (running > 0 || salvage) {
			s.startRebuild(v, n, salvage, now)
			need--
			changed = true
			continue
		}
		if n != nil && s.stillWaiting(&sl, v.name, now) {
			kept = append(kept, sl)
			need--
			unmet++
			continue
		}
		expired = append(expired, sl)
	}
	for need > 0 && running > 0 {
		n := s.pickNode(v)
		if n == nil {
			break
		}
		s.startRebuild(v, n, false, now)
		need--
		changed = true
		if len(expired) > 0 {
			expired = expired[1:]
		}
	}
	unmet += need
	v.slots = append(kept, expired...)
	if unmet > 0 {
		s.waiting[v.name] = struct{}{}
	} else {
		delete(s.waiting, v.name)
	}
	return changed
}

func (s *Sim) canReturn(v *volume, n *node, sl slot) bool {
	if r := v.replicaOn(n.name); r != nil && (r.state == dataplane.ReplicaRunning || r.state == dataplane.ReplicaRebuilding) {
		return false
	}
	if !n.ready {
		return false
	}
	if v.engine == EngineV1 {
		return true
	}
	if !n.v2 || !n.imRunning() {
		return false
	}
	return !(sl.deliberate && n.flag && n.im.name == sl.im)
}

// stillWaiting reports whether a lost replica still waits for its own node,
// arming a timer to look again when the wait ends.
func (s *Sim) stillWaiting(sl *slot, volName string, now time.Time) bool {
	w := s.cfg.ReplicaReplenishWait
	if w < 0 {
		return true
	}
	end := sl.at.Add(w)
	if !now.Before(end) {
		return false
	}
	if !sl.recheck {
		sl.recheck = true
		s.schedule(&timer{due: end, kind: timerRecheck, obj: volName})
	}
	return true
}

// pickNode chooses a node for a new replica of v: Ready, no replica of v,
// and for v2 a running IM and no upgrade flag. A rotating cursor spreads
// replicas and keeps the choice O(1) in the usual case.
func (s *Sim) pickNode(v *volume) *node {
	count := len(s.nodeNames)
	for i := range count {
		idx := (s.placeCursor + i) % count
		n := s.nodes[s.nodeNames[idx]]
		if !n.ready || v.replicaOn(n.name) != nil {
			continue
		}
		if v.engine == EngineV2 && (!n.v2 || n.flag || !n.imRunning()) {
			continue
		}
		s.placeCursor = idx + 1
		return n
	}
	return nil
}

// startRebuild reuses the volume's old replica on the node (its data is a
// head start) or creates a new one, rebuilding.
func (s *Sim) startRebuild(v *volume, n *node, salvage bool, now time.Time) {
	r := v.replicaOn(n.name)
	if r == nil {
		v.replicaSeq++
		r = &replica{name: fmt.Sprintf("%s-r-%d", v.name, v.replicaSeq), node: n.name}
		v.replicas = append(v.replicas, r)
		addIdx(s.replicasOn, n.name, v.name)
	}
	r.state = dataplane.ReplicaRebuilding
	r.gen++
	r.byFault = false
	r.salvage = salvage
	s.io.mark(v.name)
	s.scheduleRebuild(v, r, now)
}

func (s *Sim) scheduleRebuild(v *volume, r *replica, now time.Time) {
	latency := s.cfg.RebuildLatency
	if d, ok := s.faults.slow[v.name]; ok {
		latency = d
	}
	s.schedule(&timer{due: now.Add(latency), kind: timerRebuild, obj: v.name, sub: r.name, gen: r.gen})
}

// finishRebuild makes a rebuilding replica healthy, unless the volume is set
// never to heal (the timer is dropped; healing the fault reschedules it) or
// the source replica was lost meanwhile.
func (s *Sim) finishRebuild(volName, replicaName string, gen uint64, now time.Time) bool {
	v := s.vols[volName]
	if v == nil {
		return false
	}
	r, _ := v.replicaNamed(replicaName)
	if r == nil || r.gen != gen || r.state != dataplane.ReplicaRebuilding {
		return false
	}
	if s.faults.neverHealthy[volName] {
		return false
	}
	if !r.salvage && v.count(dataplane.ReplicaRunning) == 0 {
		s.loseReplica(v, r, dataplane.ReplicaError, s.currentIMName(r.node), false, false, now)
		return true
	}
	r.state = dataplane.ReplicaRunning
	r.gen++
	r.salvage = false
	s.reconcile[v.name] = struct{}{}
	s.io.mark(v.name)
	return true
}
