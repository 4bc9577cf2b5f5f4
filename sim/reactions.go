package sim

import (
	"fmt"
	"math"
	"time"

	"github.com/switchback-dev/switchback/dataplane"
)

// This file is Longhorn's replica handling: how a replica is failed, taken
// out of its engine, stopped, reused or replaced, as v1.12's volume,
// engine and replica controllers and its replica scheduler do it
// (sim/RULES.md).

// ReplicaIOTimeout is the replica link's fast-io-fail timeout: how long an
// engine's writes wait on a replica whose instance is gone before the RAID
// fails it out (SPDK@v1.12.1:pkg/spdk/types.go, replicaFastIOFailTimeoutSec);
// Config.ReplicaIOTimeout's default.
const ReplicaIOTimeout = 10 * time.Second

// failReplica is spec.failedAt set on a replica: it serves no I/O, its
// instance keeps running, and the volume's engine removes it from its RAID
// after ReplicaRemoveLatency (the volume controller drops it from the
// engine's replicaAddressMap at once; the engine monitor then removes it).
func (s *Sim) failReplica(v *volume, r *replica, now time.Time) {
	if !r.failed {
		r.failed, r.failedAt = true, now
	}
	r.state = dataplane.ReplicaStopped
	r.joined = false
	r.gen++
	if r.inEngine && !r.linkDown {
		s.schedule(&timer{due: now.Add(s.cfg.ReplicaRemoveLatency), kind: timerEngineRemove, obj: v.name, sub: r.name, gen: r.gen})
	}
	s.changedReplica(v, r)
}

// stopReplica stops a replica's instance (spec.desireState stopped). An
// engine still holding it waits on the dead link (see linkDead).
func (s *Sim) stopReplica(v *volume, r *replica, now time.Time) {
	r.instance = false
	r.joined = false
	if r.state == dataplane.ReplicaRebuilding || r.state == dataplane.ReplicaRunning {
		r.state = dataplane.ReplicaStopped
	}
	s.linkDead(v, r, now)
	s.changedReplica(v, r)
}

// loseReplica is a replica whose instance died with its IM or its node:
// Longhorn marks it failed, in error, and an engine holding it waits on the
// dead link.
func (s *Sim) loseReplica(v *volume, r *replica, byFault bool, now time.Time) {
	if !r.failed {
		r.failed, r.failedAt = true, now
	}
	r.state = dataplane.ReplicaError
	r.instance = false
	r.joined = false
	r.byFault = byFault
	r.salvage = false
	s.linkDead(v, r, now)
	s.changedReplica(v, r)
}

// linkDead handles a replica the engine holds losing its instance: the
// engine's I/O waits on the dead link until ReplicaIOTimeout, then the RAID
// fails it out (RuleReplicaLinkTimeout); without the rule it is dropped at
// once.
func (s *Sim) linkDead(v *volume, r *replica, now time.Time) {
	r.gen++
	if !r.inEngine || r.linkDown {
		return
	}
	if !s.on(RuleReplicaLinkTimeout) || v.engine != EngineV2 {
		r.inEngine = false
		return
	}
	r.linkDown = true
	s.schedule(&timer{due: now.Add(s.cfg.ReplicaIOTimeout), kind: timerEngineRemove, obj: v.name, sub: r.name, gen: r.gen})
}

// engineRemove takes a replica out of its engine's RAID: the engine
// removed a failed one, or failed out one whose link died.
func (s *Sim) engineRemove(volName, replicaName string, gen uint64) bool {
	v := s.vols[volName]
	if v == nil {
		return false
	}
	r, _ := v.replicaNamed(replicaName)
	if r == nil || r.gen != gen || !r.inEngine {
		return false
	}
	r.inEngine, r.linkDown = false, false
	s.changedReplica(v, r)
	return true
}

// changedReplica has Longhorn look at the volume's replicas and the node's
// IM again.
func (s *Sim) changedReplica(v *volume, r *replica) {
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
			s.loseReplica(v, r, n == nil || !n.ready, now)
			continue
		}
		r.instance, r.inEngine = true, true
		s.imCheck[r.node] = struct{}{}
	}
	s.reconcile[v.name] = struct{}{}
}

// restReplicas stops a detaching volume's replicas: they keep their data.
func (s *Sim) restReplicas(v *volume) {
	for _, r := range v.replicas {
		r.instance, r.inEngine, r.linkDown, r.joined = false, false, false, false
		r.gen++
		if r.state == dataplane.ReplicaRebuilding {
			r.state = dataplane.ReplicaStopped
		}
		s.imCheck[r.node] = struct{}{}
	}
}

// placeReplicas is Longhorn's replica replenishment for one volume, one
// pass: with the volume attached and short of replicas, its engine the
// only one and its status synced (no failed replica still in the RAID), and
// no replica rebuilding, it reuses the failed replica failed last on an
// eligible node, or, if none could be reused or the replenishment wait
// from the moment the volume degraded has passed, builds a new replica on
// an eligible node without one. One replica per pass. Every rebuild needs a
// healthy source, except a salvage of a replica that lost its IM but kept
// its data.
func (s *Sim) placeReplicas(v *volume, now time.Time) bool {
	need := v.numReplicas - v.active()
	if need <= 0 || v.attached == "" {
		if need <= 0 {
			v.degradedAt = time.Time{}
		}
		delete(s.waiting, v.name)
		return false
	}
	if v.degradedAt.IsZero() {
		v.degradedAt = now
	}
	switch {
	case s.on(RuleReplenishWithOneEngine) && v.sw != nil:
		// Two engines: nothing is replenished until one is left.
		s.waiting[v.name] = struct{}{}
		return false
	case s.on(RuleOneRebuildPerVolume) && v.count(dataplane.ReplicaRebuilding) > 0:
		return false
	case v.stillInEngine():
		return false // the engine's status is not synced yet
	}
	running := v.count(dataplane.ReplicaRunning)
	changed := false
	for need > 0 {
		r, n := s.reusable(v, running)
		if n == nil && running > 0 && (!s.potentiallyReusable(v) || s.waitOver(v, now)) {
			n = s.pickNode(v)
		}
		if n == nil {
			break
		}
		s.startRebuild(v, n, r, running == 0, now)
		need--
		changed = true
		if s.on(RuleOneRebuildPerVolume) {
			break
		}
	}
	if need > 0 {
		s.waiting[v.name] = struct{}{}
	} else {
		delete(s.waiting, v.name)
	}
	return changed
}

// stillInEngine reports whether a failed replica is still in the volume's
// engine (Longhorn's hasEngineStatusSynced is false then).
func (v *volume) stillInEngine() bool {
	for _, r := range v.replicas {
		if r.failed && r.inEngine {
			return true
		}
	}
	return false
}

// potentiallyReusable reports whether a failed replica of v could be
// reused some day, whatever its node's scheduling: Longhorn then waits
// replica-replenishment-wait-interval before building a new one elsewhere.
func (s *Sim) potentiallyReusable(v *volume) bool {
	if !s.on(RuleReplenishmentWait) || !s.reuses(v) {
		return false
	}
	for _, r := range v.replicas {
		if r.failed && s.nodes[r.node] != nil {
			return true
		}
	}
	return false
}

// waitOver reports whether the replenishment wait of a degraded v has
// passed, arming a timer to look again when it will have. A negative
// ReplicaReplenishWait never ends.
func (s *Sim) waitOver(v *volume, now time.Time) bool {
	w := s.cfg.ReplicaReplenishWait
	if w < 0 {
		return false
	}
	end := v.degradedAt.Add(w)
	if !now.Before(end) {
		return true
	}
	if !v.recheckAt.Equal(end) {
		v.recheckAt = end
		s.schedule(&timer{due: end, kind: timerRecheck, obj: v.name})
	}
	return false
}

// replenishAt is when Longhorn may build a new replica of v elsewhere
// (dataplane.Volume.ReplenishAt): zero when v is not degraded, or when it
// never will (a negative wait while a failed replica could be reused).
func (s *Sim) replenishAt(v *volume) time.Time {
	if v.attached == "" || v.degradedAt.IsZero() {
		return time.Time{}
	}
	// Longhorn's status.lastDegradedAt has a second's precision.
	at := v.degradedAt.UTC().Truncate(time.Second)
	if !s.potentiallyReusable(v) {
		return at
	}
	return at.Add(s.ReplenishWait())
}

// reuses reports whether Longhorn would reuse v's failed replicas: a v2
// volume's only with fast-replica-rebuild-enabled for v2
// (`LM@v1.12.1:scheduler/replica_scheduler.go:958-973` in
// CheckAndReuseFailedReplica, `:1064-1078` in the replenishment wait).
func (s *Sim) reuses(v *volume) bool {
	return v.engine != EngineV2 || !s.cfg.NoFastReplicaRebuild
}

// NeverReplenish is the replenishment wait a negative
// Config.ReplicaReplenishWait stands for, as Longhorn's setting can say it
// (its tests use MaxInt32 seconds for "never").
const NeverReplenish = math.MaxInt32 * time.Second

// ReplenishWait is Longhorn's replica-replenishment-wait-interval as the
// simulator plays it.
func (s *Sim) ReplenishWait() time.Duration {
	if s.cfg.ReplicaReplenishWait < 0 {
		return NeverReplenish
	}
	return s.cfg.ReplicaReplenishWait
}

// eligible reports whether a replica of v may run on n: Ready, scheduling
// allowed, and for v2 the v2 engine with a running IM.
func (s *Sim) eligible(v *volume, n *node) bool {
	if !n.ready || !n.allowSched {
		return false
	}
	return v.engine == EngineV1 || (n.v2 && n.imRunning())
}

// reusable returns the failed replica of v Longhorn reuses now, with its
// node: the one failed last among those on an eligible node with no other
// replica of v serving there. With no healthy replica left (running 0),
// only a replica that kept its data (in error) is salvaged.
func (s *Sim) reusable(v *volume, running int) (*replica, *node) {
	if !s.reuses(v) {
		return nil, nil
	}
	var best *replica
	for _, r := range v.replicas {
		if !r.failed || (running == 0 && r.state != dataplane.ReplicaError) {
			continue
		}
		n := s.nodes[r.node]
		if n == nil || !s.eligible(v, n) || v.activeReplicaOn(r.node) != nil {
			continue
		}
		if best == nil || r.failedAt.After(best.failedAt) {
			best = r
		}
	}
	if best == nil {
		return nil, nil
	}
	return best, s.nodes[best.node]
}

// pickNode chooses a node for a new replica of v: eligible and without a
// replica of v. A rotating cursor spreads replicas and keeps the choice O(1)
// in the usual case.
func (s *Sim) pickNode(v *volume) *node {
	count := len(s.nodeNames)
	for i := range count {
		idx := (s.placeCursor + i) % count
		n := s.nodes[s.nodeNames[idx]]
		if v.replicaOn(n.name) != nil || !s.eligible(v, n) || !s.roomFor(v, n) {
			continue
		}
		s.placeCursor = idx + 1
		return n
	}
	return nil
}

// startRebuild reuses r (its data is a head start) or, when r is nil,
// creates a new replica on n; its instance starts and, after
// ReplicaStartLatency, it joins the engine and rebuilds.
func (s *Sim) startRebuild(v *volume, n *node, r *replica, salvage bool, now time.Time) {
	if r == nil {
		v.replicaSeq++
		r = &replica{name: fmt.Sprintf("%s-r-%d", v.name, v.replicaSeq), node: n.name}
		v.replicas = append(v.replicas, r)
		addIdx(s.replicasOn, n.name, v.name)
	}
	r.state = dataplane.ReplicaRebuilding
	r.failed, r.failedAt = false, time.Time{}
	r.instance = true
	r.joined = false
	r.gen++
	r.byFault = false
	r.salvage = salvage
	s.imCheck[n.name] = struct{}{}
	s.markVolume(v.name)
	s.schedule(&timer{due: now.Add(s.cfg.ReplicaStartLatency), kind: timerReplicaJoin, obj: v.name, sub: r.name, gen: r.gen})
}

// joinEngine adds a started replica to its volume's engine, where it
// rebuilds (WO). A switch-over under way sees it at its next check.
func (s *Sim) joinEngine(volName, replicaName string, gen uint64, now time.Time) bool {
	v := s.vols[volName]
	if v == nil {
		return false
	}
	r, _ := v.replicaNamed(replicaName)
	if r == nil || r.gen != gen || r.state != dataplane.ReplicaRebuilding || r.joined {
		return false
	}
	rec := s.copyForRebuild(v, r, now)
	r.joined, r.inEngine = true, true
	s.markVolume(v.name)
	s.checkRevert(v, now)
	latency := s.cfg.RebuildLatency
	if s.cfg.RebuildBandwidth > 0 {
		latency = rec.Duration
	}
	if d, ok := s.faults.slow[v.name]; ok {
		latency = d
	}
	r.rebuildFrom, r.rebuildFor = now, latency
	s.schedule(&timer{due: now.Add(latency), kind: timerRebuild, obj: v.name, sub: r.name, gen: r.gen})
	return true
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
	if r == nil || r.gen != gen || r.state != dataplane.ReplicaRebuilding || !r.joined {
		return false
	}
	if s.faults.neverHealthy[volName] {
		return false
	}
	if !r.salvage && v.count(dataplane.ReplicaRunning) == 0 {
		s.loseReplica(v, r, false, now)
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
