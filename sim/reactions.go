package sim

import (
	"fmt"
	"time"

	"github.com/switchback-dev/switchback/dataplane"
)

// This file is Longhorn's replica handling: how lost replicas are reused or
// replaced, as v1.12's volume controller and replica scheduler do it.

// loseReplica takes a replica out of service and remembers where it was, so
// that the rebuild prefers the same node.
func (s *Sim) loseReplica(v *volume, r *replica, state dataplane.ReplicaState, byFault bool, now time.Time) {
	wasActive := r.active()
	r.state = state
	r.gen++
	r.byFault = byFault
	r.salvage = false
	if wasActive {
		v.slots = append(v.slots, slot{node: r.node, byFault: byFault, at: now})
	}
	s.reconcile[v.name] = struct{}{}
	s.imCheck[r.node] = struct{}{}
	s.markVolume(v.name)
}

// startReplicas starts an attaching volume's replicas: a copy at rest on a
// node that cannot run it (NotReady, or no running v2 IM) fails to start.
func (s *Sim) startReplicas(v *volume, now time.Time) {
	for _, r := range v.replicas {
		if r.state != dataplane.ReplicaRunning {
			continue
		}
		if n := s.nodes[r.node]; n == nil || !n.ready || (v.engine == EngineV2 && !n.imRunning()) {
			s.loseReplica(v, r, dataplane.ReplicaError, n == nil || !n.ready, now)
		}
		s.imCheck[r.node] = struct{}{}
	}
	s.reconcile[v.name] = struct{}{}
}

// placeReplicas starts one rebuild per missing replica of an attached volume
// (Longhorn does not replenish detached ones). A lost replica is reused on
// its own node as soon as that node is eligible (Ready, scheduling allowed,
// and for v2 a running IM of any image); otherwise, once
// ReplicaReplenishWait has passed, another failed replica on an eligible
// node is reused, or a new replica is rebuilt on an eligible node without a
// replica of the volume. Every rebuild needs a healthy
// source, except a salvage of a replica that lost its IM but kept its data.
func (s *Sim) placeReplicas(v *volume, now time.Time) bool {
	need := v.numReplicas - v.active()
	if need <= 0 || v.attached == "" {
		if need <= 0 {
			v.slots = nil
		}
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
		if n != nil && s.canReturn(v, n) && (running > 0 || salvage) {
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
		n := s.reusable(v)
		if n == nil {
			n = s.pickNode(v)
		}
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

// eligible reports whether a replica of v may run on n: Ready, scheduling
// allowed, and for v2 the v2 engine with a running IM.
func (s *Sim) eligible(v *volume, n *node) bool {
	if !n.ready || !n.allowSched {
		return false
	}
	return v.engine == EngineV1 || (n.v2 && n.imRunning())
}

func (s *Sim) canReturn(v *volume, n *node) bool {
	if r := v.activeReplicaOn(n.name); r != nil {
		return false
	}
	return s.eligible(v, n)
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

// reusable returns the node of a failed replica of v that may run again
// there: Longhorn reuses such a replica (its data is a head start) before
// creating a new one.
func (s *Sim) reusable(v *volume) *node {
	for _, r := range v.replicas {
		if r.state != dataplane.ReplicaStopped && r.state != dataplane.ReplicaError {
			continue
		}
		if n := s.nodes[r.node]; n != nil && s.eligible(v, n) {
			return n
		}
	}
	return nil
}

// pickNode chooses a node for a new replica of v: eligible and without a
// replica of v. A rotating cursor spreads replicas and keeps the choice O(1)
// in the usual case.
func (s *Sim) pickNode(v *volume) *node {
	count := len(s.nodeNames)
	for i := range count {
		idx := (s.placeCursor + i) % count
		n := s.nodes[s.nodeNames[idx]]
		if v.replicaOn(n.name) != nil || !s.eligible(v, n) {
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
	s.imCheck[n.name] = struct{}{}
	s.markVolume(v.name)
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
		s.loseReplica(v, r, dataplane.ReplicaError, false, now)
		return true
	}
	r.state = dataplane.ReplicaRunning
	r.gen++
	r.salvage = false
	s.reconcile[v.name] = struct{}{}
	// A switch-over reverted while this replica was rebuilding may go on.
	s.unblock = true
	s.markVolume(v.name)
	return true
}
