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

// startIM starts an IM's pod; it runs after IMStartLatency (see
// tryStartIM). No pod is created while the node is cordoned, nor while
// another IM object of the node still waits for its pod to go (the v2
// gate): the IM stays stopped until then.
func (s *Sim) startIM(n *node, m *im, now time.Time) {
	if (n.cordoned && s.on(RuleNoIMOnCordonedNode)) || n.gone != nil {
		m.state = dataplane.IMStopped
		m.gen++
		s.blockedIMs[n.name] = struct{}{}
		s.markNode(n.name)
		return
	}
	m.state = dataplane.IMStarting
	m.gen++
	s.schedule(&timer{due: now.Add(s.cfg.IMStartLatency), kind: timerIMStart, obj: n.name, sub: m.name, gen: m.gen})
}

// tryStartIM finishes starting the node's IM: running, or error when a
// start failure is injected, or when its pod was admitted beside a deleted
// IM's pod that still holds the node's hugepages (RuleIMOverlapFails: the
// pod is retried once that one is gone). A NotReady node cannot start
// pods, so the start waits for the node.
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
	if now.Before(n.podUntil) {
		s.overlaps = append(s.overlaps, fmt.Sprintf("instance manager %s started on %s beside the pod of a deleted instance manager, still terminating", imName, nodeName))
		if s.on(RuleIMOverlapFails) {
			n.im.state = dataplane.IMError
			s.schedule(&timer{due: n.podUntil, kind: timerIMRetry, obj: nodeName, sub: imName, gen: n.im.gen})
			s.markNode(nodeName)
			return true
		}
	}
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

// retryIM recreates the pod of an IM that failed beside a lingering pod.
func (s *Sim) retryIM(nodeName, imName string, gen uint64, now time.Time) bool {
	n := s.nodes[nodeName]
	if n == nil || n.im == nil || n.im.name != imName || n.im.gen != gen || n.im.state != dataplane.IMError {
		return false
	}
	s.startIM(n, n.im, now)
	return true
}

// managed reports whether Longhorn's node controller creates the node's
// default-image IM: its longhorn-manager runs with that image as its
// --instance-manager-image.
func (s *Sim) managed(n *node) bool {
	return !s.on(RuleDefaultIMFollowsSetting) || n.managerImage == s.cfg.DefaultIMImage
}

// expectNext makes Longhorn's default-image IM exist on a ProfileV112 node
// whose IM runs another image, and gives a v2 node without any IM one, as
// the node controller does on a node whose manager runs the default image.
func (s *Sim) expectNext(n *node, now time.Time) {
	if s.cfg.Profile.InPlaceIM() || !n.v2 || !s.managed(n) {
		return
	}
	if n.im == nil {
		n.im = s.createIM(n)
		s.startIM(n, n.im, now)
		return
	}
	if n.next != nil || n.im.image == s.cfg.DefaultIMImage {
		return
	}
	n.next = s.createIM(n)
	s.imCheck[n.name] = struct{}{}
}

// replaceIfIdle is Longhorn's node controller on ProfileV112: an idle IM
// whose image is neither the default nor its manager's is deleted (in the
// foreground): the node's serving IM when it runs no engine, engine
// frontend or replica (shards are not counted: RuleShardsNotCounted) or is
// not running, and a stopped next IM of an image that is no longer the
// default; then the default-image IM is made to exist.
func (s *Sim) replaceIfIdle(nodeName string, now time.Time) bool {
	n := s.nodes[nodeName]
	if s.cfg.Profile.InPlaceIM() || n == nil || !n.ready {
		return false
	}
	changed := false
	if m := n.next; m != nil && m.image != s.cfg.DefaultIMImage && m.image != n.managerImage && m.state == dataplane.IMStopped {
		s.removeIM(n, m, now)
		changed = true
	}
	if m := n.im; m != nil && m.image != s.cfg.DefaultIMImage && m.image != n.managerImage && !s.busy(n) {
		if n.replaceAt.IsZero() {
			n.replaceAt = now.Add(s.cfg.NodeReconcileLatency)
			if now.Before(n.replaceAt) {
				s.schedule(&timer{due: n.replaceAt, kind: timerRecheckIM, obj: n.name})
			}
		}
		if now.Before(n.replaceAt) {
			return changed
		}
		n.replaceAt = time.Time{}
		s.removeIM(n, m, now)
		return true
	}
	n.replaceAt = time.Time{}
	if n.im == nil || (n.next == nil && n.im.image != s.cfg.DefaultIMImage) {
		s.expectNext(n, now)
	}
	return changed
}

// busy reports whether Longhorn counts the node's serving IM as in use:
// running, with an engine, engine frontend or replica (or, without
// RuleShardsNotCounted, a shard).
func (s *Sim) busy(n *node) bool {
	if n.im == nil || n.im.state != dataplane.IMRunning {
		return false
	}
	e, f, r := s.instances(n)
	if !s.on(RuleShardsNotCounted) {
		r += n.shards
	}
	return e+f+r > 0
}

// removeIM is an IM deleted as Longhorn deletes one (in the foreground):
// its process stops at once and everything it ran is lost; with
// RuleIMPodLingers and a PodTerminationLatency its object stays, deleting,
// until its pod is gone, and the node's next IM starts only then.
func (s *Sim) removeIM(n *node, m *im, now time.Time) {
	s.deleteIM(n, m, true, now)
}

// deleteIM deletes an IM's object, foreground or not. In the background
// (what kubectl delete does) the object goes at once while its pod
// lingers, and the next IM starts beside it. Faults armed on the IM's
// deletion fire.
func (s *Sim) deleteIM(n *node, m *im, foreground bool, now time.Time) {
	defer s.trigger(n.name, TriggerIMDeleted, now)
	running := m.state != dataplane.IMStopped
	s.stopIM(n, m, now)
	lingers := running && s.on(RuleIMPodLingers) && s.cfg.PodTerminationLatency > 0
	if lingers && foreground {
		m.deleting = true
		n.gone = m
		s.schedule(&timer{due: now.Add(s.cfg.PodTerminationLatency), kind: timerPodGone, obj: n.name, sub: m.name})
	} else {
		delete(s.ims, m.name)
		s.imGone[m.name] = true
		if lingers {
			n.podUntil = now.Add(s.cfg.PodTerminationLatency)
		}
	}
	switch m {
	case n.next:
		n.next = nil
		s.expectNext(n, now)
	case n.im:
		if n.shards > 0 {
			s.shardsLost = append(s.shardsLost, fmt.Sprintf("%d shard instance(s) of instance manager %s on %s", n.shards, m.name, n.name))
			n.shards = 0
		}
		repl := n.next
		n.im, n.next = repl, nil
		if repl == nil && (s.cfg.Profile.InPlaceIM() || s.managed(n)) {
			repl = s.createIM(n)
			n.im = repl
		}
		if repl != nil {
			s.startIM(n, repl, now)
		}
	}
}

// podGone ends the deletion of an IM whose pod terminated: its object
// goes, and the node's next IM may start.
func (s *Sim) podGone(nodeName, imName string, now time.Time) bool {
	n := s.nodes[nodeName]
	if n == nil || n.gone == nil || n.gone.name != imName {
		return false
	}
	delete(s.ims, imName)
	s.imGone[imName] = true
	n.gone = nil
	if n.im != nil && n.im.state == dataplane.IMStopped {
		s.startIM(n, n.im, now)
	}
	s.markNode(nodeName)
	return true
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
		s.eachInstanceReplica(n, func(v *volume, r *replica) { s.loseReplica(v, r, false, now) })
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

// instanceReplica is v's replica the node's IM runs, or nil: a v2
// replica whose instance runs (a detached volume's replicas run none).
func instanceReplica(n *node, v *volume) *replica {
	if v.engine != EngineV2 {
		return nil
	}
	if r := v.replicaOn(n.name); r != nil && r.instance {
		return r
	}
	return nil
}

// eachInstanceReplica calls f, in volume name order, for each replica the
// node's IM runs.
func (s *Sim) eachInstanceReplica(n *node, f func(v *volume, r *replica)) {
	for _, name := range sortedKeys(s.replicasOn[n.name]) {
		v := s.vols[name]
		if r := instanceReplica(n, v); r != nil {
			f(v, r)
		}
	}
}
