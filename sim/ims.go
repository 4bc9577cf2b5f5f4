package sim

import (
	"fmt"
	"time"

	"github.com/switchback-dev/switchback/dataplane"
)

// This file is the instance managers' lifecycle as Longhorn's node and
// instance-manager controllers run it, per profile.
//
// ProfileV112: when a node's IM runs another image than the default,
// Longhorn creates a default-image IM for the node at once, stopped; it
// deletes the old IM as soon as that runs no engine, engine frontend or
// replica (or is not running), and only then starts the new one, because a
// node runs one v2 IM at a time.
//
// ProfileInPlace: a node keeps one IM; setting its image restarts it on the
// new image (reimage). A deleted IM is recreated with the default image.

// createIM gives the node a new IM of the default image, stopped.
func (s *Sim) createIM(n *node) *im {
	n.imSeq++
	m := &im{
		name:  fmt.Sprintf("im-%s-%d", n.name, n.imSeq),
		node:  n.name,
		image: s.cfg.DefaultIMImage,
		state: dataplane.IMStopped,
	}
	s.ims[m.name] = m
	return m
}

// startIM starts an IM; it runs after IMStartLatency (see tryStartIM).
func (s *Sim) startIM(n *node, m *im, now time.Time) {
	m.state = dataplane.IMStarting
	m.gen++
	s.schedule(&timer{due: now.Add(s.cfg.IMStartLatency), kind: timerIMStart, obj: n.name, sub: m.name, gen: m.gen})
}

// tryStartIM finishes starting the node's IM: running, or error when a
// start failure is injected. A NotReady node cannot start pods, so the start
// waits for the node.
func (s *Sim) tryStartIM(nodeName, imName string, gen uint64) bool {
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
	n.im.epoch++
	s.markNode(nodeName)
	s.unblock = true
	return true
}

// expectNext makes Longhorn's default-image IM exist on a ProfileV112 node
// whose IM runs another image.
func (s *Sim) expectNext(n *node) {
	if s.cfg.Profile.InPlaceIM() || n.im == nil || n.next != nil || n.im.image == s.cfg.DefaultIMImage {
		return
	}
	n.next = s.createIM(n)
	s.imCheck[n.name] = struct{}{}
}

// replaceIfIdle is Longhorn's node controller on ProfileV112: an old-image
// IM on a Ready node that runs no instance (or is not running) is deleted,
// and the default-image IM starts.
func (s *Sim) replaceIfIdle(nodeName string, now time.Time) bool {
	n := s.nodes[nodeName]
	if s.cfg.Profile.InPlaceIM() || n == nil || !n.ready || n.im == nil || n.im.image == s.cfg.DefaultIMImage {
		return false
	}
	if n.im.state == dataplane.IMRunning {
		if e, f, r := s.instances(n); e+f+r > 0 {
			return false
		}
	}
	s.removeIM(n, n.im, now)
	return true
}

// removeIM deletes an IM, whoever deletes it: it stops at once and
// everything it ran is lost; the node's serving IM is replaced by the
// default-image one, which starts. Faults armed on the IM's deletion fire.
func (s *Sim) removeIM(n *node, m *im, now time.Time) {
	defer s.trigger(n.name, TriggerIMDeleted, now)
	s.stopIM(n, m, now)
	delete(s.ims, m.name)
	s.imGone[m.name] = true
	switch m {
	case n.next:
		n.next = nil
		s.expectNext(n)
	case n.im:
		repl := n.next
		if repl == nil {
			repl = s.createIM(n)
		}
		n.im, n.next = repl, nil
		s.startIM(n, repl, now)
	}
}

// reimage restarts the IM on image, in place (ProfileInPlace).
func (s *Sim) reimage(n *node, m *im, image string, now time.Time) {
	s.stopIM(n, m, now)
	m.image = image
	s.startIM(n, m, now)
}

// stopIM stops the IM's process: the replicas it ran are lost (a detached
// volume's replicas run no instance and keep their data), and the engines
// and initiators bound to it are gone with it (see binding).
func (s *Sim) stopIM(n *node, m *im, now time.Time) {
	wasRunning := m.state == dataplane.IMRunning
	m.state = dataplane.IMStopped
	m.gen++
	delete(s.blockedIMs, n.name)
	if wasRunning && m == n.im {
		s.eachInstanceReplica(n, func(v *volume, r *replica) { s.loseReplica(v, r, dataplane.ReplicaError, false, now) })
	}
	s.markNode(n.name)
}

// instanceNames lists what the node's serving IM runs: engines (targets,
// and new engines of switch-overs to the node), engine frontends
// (initiators of v2 volumes attached there) and active replicas of attached
// v2 volumes.
func (s *Sim) instanceNames(n *node) IMInstances {
	var in IMInstances
	for _, name := range sortedKeys(s.targetsOn[n.name]) {
		if runsEngine(n, s.vols[name]) {
			in.Engines = append(in.Engines, name)
		}
	}
	in.NewEngines = sortedKeys(s.migratingTo[n.name])
	for _, name := range sortedKeys(s.attachedOn[n.name]) {
		if s.runsFrontend(n, s.vols[name]) {
			in.Frontends = append(in.Frontends, name)
		}
	}
	s.eachInstanceReplica(n, func(_ *volume, r *replica) { in.Replicas = append(in.Replicas, r.name) })
	return in
}

// runsEngine says whether the node's serving IM runs v's target.
func runsEngine(n *node, v *volume) bool {
	return v.engine == EngineV2 && v.attached != "" && v.targetIM.im == n.im
}

// runsFrontend says whether the node's serving IM runs v's initiator: on
// v1.12 an initiator runs in the IM it started in, and dies with it.
func (s *Sim) runsFrontend(n *node, v *volume) bool {
	return v.engine == EngineV2 && (s.cfg.Profile.InitiatorsSurviveIM() || v.initiator.im == n.im)
}

// instanceReplica is v's replica the node's IM runs, or nil: only attached
// v2 volumes' active replicas run an instance.
func instanceReplica(n *node, v *volume) *replica {
	if v.engine != EngineV2 || v.attached == "" {
		return nil
	}
	return v.activeReplicaOn(n.name)
}

// eachInstanceReplica calls f, in volume name order, for each replica the
// node's IM runs: the active replicas of attached v2 volumes (a detached
// volume's replicas run no instance).
func (s *Sim) eachInstanceReplica(n *node, f func(v *volume, r *replica)) {
	for _, name := range sortedKeys(s.replicasOn[n.name]) {
		v := s.vols[name]
		if r := instanceReplica(n, v); r != nil {
			f(v, r)
		}
	}
}
