package sim

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/switchback-dev/switchback/dataplane"
)

// FaultKind names a fault the simulator can inject.
type FaultKind string

// Fault kinds. Node faults name a node in Fault.Object, volume faults a volume.
const (
	// FaultIMStartFailure: new IMs on the node go to error instead of running
	// (the running IM is unaffected). Healing restarts an errored IM.
	FaultIMStartFailure FaultKind = "im-start-failure"
	// FaultNodeNotReady: the node goes NotReady; its IM is unreachable and
	// its replicas fail. Healing makes it Ready again.
	FaultNodeNotReady FaultKind = "node-not-ready"
	// FaultNodeDeleted: the node disappears (Node reports ErrNotFound) with its
	// IM and replicas; targets and initiators there are dead. Healing brings
	// back an empty node with a fresh IM on the default image.
	FaultNodeDeleted FaultKind = "node-deleted"
	// FaultNeverHealthy: the volume's rebuilds never finish.
	FaultNeverHealthy FaultKind = "never-healthy"
	// FaultSlowRebuild: the volume's rebuilds take Fault.Latency.
	FaultSlowRebuild FaultKind = "slow-rebuild"
	// FaultTargetMoveFailure: the volume's switch-overs fail (Longhorn
	// reverts them and retries, reporting FailedSwitchover) until healed: a
	// stuck volume.
	FaultTargetMoveFailure FaultKind = "target-move-failure"
)

// FaultKinds lists every kind, in a fixed order (for generators).
var FaultKinds = []FaultKind{
	FaultIMStartFailure, FaultNodeNotReady, FaultNodeDeleted,
	FaultNeverHealthy, FaultSlowRebuild, FaultTargetMoveFailure,
}

// OnNode reports whether the fault's object is a node (else a volume).
func (k FaultKind) OnNode() bool {
	return k == FaultIMStartFailure || k == FaultNodeNotReady || k == FaultNodeDeleted
}

// Trigger says when an armed node fault takes effect.
type Trigger string

// Triggers. Volume faults are latent (they act only when a rebuild or a move
// happens), so they always take effect at once.
const (
	// TriggerNow: at once, or as soon as the node is added.
	TriggerNow Trigger = ""
	// TriggerSchedulingDisabled: when the node's replica scheduling is
	// turned off (the upgrade's first action on a node).
	TriggerSchedulingDisabled Trigger = "scheduling-disabled"
	// TriggerIMDeleted: right after the node's IM is deleted or re-imaged.
	TriggerIMDeleted Trigger = "im-deleted"
)

// Fault is an injected failure, armed with Arm or Config.Faults.
type Fault struct {
	Kind   FaultKind
	Object string
	// Latency is the rebuild time of FaultSlowRebuild.
	Latency time.Duration
	// When delays a node fault until an upgrade step reaches the node.
	When Trigger
	// HealAfter, if positive, heals the fault that long after it took effect.
	HealAfter time.Duration
}

// String renders the fault for logs and test names.
func (f Fault) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s(%s)", f.Kind, f.Object)
	if f.Latency > 0 {
		fmt.Fprintf(&b, " latency=%s", f.Latency)
	}
	if f.When != TriggerNow {
		fmt.Fprintf(&b, " on=%s", f.When)
	}
	if f.HealAfter > 0 {
		fmt.Fprintf(&b, " healAfter=%s", f.HealAfter)
	}
	return b.String()
}

// FaultState is a fault and whether it has taken effect yet.
type FaultState struct {
	Fault
	Active bool
}

// ErrBadFault reports an invalid Fault.
var ErrBadFault = errors.New("invalid fault")

type faultSet struct {
	imStartFail  map[string]bool
	notReady     map[string]bool
	neverHealthy map[string]bool
	slow         map[string]time.Duration
	moveFail     map[string]bool
	active       map[string]Fault  // by key, to report Faults()
	activation   map[string]uint64 // by key: which activation a HealAfter timer heals
	serial       uint64
	armed        []Fault
}

func newFaultSet() faultSet {
	return faultSet{
		imStartFail:  map[string]bool{},
		notReady:     map[string]bool{},
		neverHealthy: map[string]bool{},
		slow:         map[string]time.Duration{},
		moveFail:     map[string]bool{},
		active:       map[string]Fault{},
		activation:   map[string]uint64{},
	}
}

func faultKey(kind FaultKind, object string) string { return string(kind) + "/" + object }

func validate(f Fault) error {
	if !slices.Contains(FaultKinds, f.Kind) {
		return fmt.Errorf("fault %s: unknown kind: %w", f, ErrBadFault)
	}
	if f.Object == "" {
		return fmt.Errorf("fault %s: no object: %w", f, ErrBadFault)
	}
	if f.Kind == FaultSlowRebuild && f.Latency <= 0 {
		return fmt.Errorf("fault %s: needs a positive latency: %w", f, ErrBadFault)
	}
	if f.When != TriggerNow && f.When != TriggerSchedulingDisabled && f.When != TriggerIMDeleted {
		return fmt.Errorf("fault %s: unknown trigger: %w", f, ErrBadFault)
	}
	return nil
}

// Arm registers a fault. Volume faults and TriggerNow node faults take effect
// at once (a node fault on a node not yet added, when it is added); other
// node faults wait for their trigger. The object need not exist yet, so
// faults can be configured before the cluster is built.
func (s *Sim) Arm(f Fault) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tick()
	if err := s.arm(f); err != nil {
		return err
	}
	s.checkIO()
	s.react()
	s.changes.Notify()
	return nil
}

func (s *Sim) arm(f Fault) error {
	if err := validate(f); err != nil {
		return err
	}
	if !f.Kind.OnNode() {
		f.When = TriggerNow
	}
	if f.Kind.OnNode() && (f.When != TriggerNow || s.nodes[f.Object] == nil) {
		s.faults.armed = append(s.faults.armed, f)
		return nil
	}
	s.activate(f, s.now())
	return nil
}

// trigger activates the node's faults armed for this moment.
func (s *Sim) trigger(nodeName string, when Trigger, now time.Time) {
	var fire []Fault
	s.faults.armed = slices.DeleteFunc(s.faults.armed, func(f Fault) bool {
		if f.Object == nodeName && f.When == when {
			fire = append(fire, f)
			return true
		}
		return false
	})
	for _, f := range fire {
		s.activate(f, now)
	}
}

func (s *Sim) activateArmedFor(nodeName string) {
	s.trigger(nodeName, TriggerNow, s.now())
}

// activate applies a fault now.
func (s *Sim) activate(f Fault, now time.Time) {
	key := faultKey(f.Kind, f.Object)
	s.faults.active[key] = f
	s.faults.serial++
	s.faults.activation[key] = s.faults.serial
	switch f.Kind {
	case FaultIMStartFailure:
		s.faults.imStartFail[f.Object] = true
	case FaultNodeNotReady:
		s.faults.notReady[f.Object] = true
		if n := s.nodes[f.Object]; n != nil && n.ready {
			s.setNotReady(n, now)
		}
	case FaultNodeDeleted:
		if n := s.nodes[f.Object]; n != nil {
			s.deleteNode(n, now)
		}
	case FaultNeverHealthy:
		s.faults.neverHealthy[f.Object] = true
	case FaultSlowRebuild:
		s.faults.slow[f.Object] = f.Latency
	case FaultTargetMoveFailure:
		s.faults.moveFail[f.Object] = true
	}
	if f.HealAfter > 0 {
		s.schedule(&timer{due: now.Add(f.HealAfter), kind: timerHeal, fault: f, gen: s.faults.serial})
	}
}

// setNotReady cuts the node off: its replicas fail at once (attributed to
// the fault) and its IM, though still "running", is unreachable.
func (s *Sim) setNotReady(n *node, now time.Time) {
	n.ready = false
	for _, volName := range sortedKeys(s.replicasOn[n.name]) {
		v := s.vols[volName]
		if r := v.replicaOn(n.name); r != nil && (r.instance || r.active()) {
			s.loseReplica(v, r, true, now)
		}
	}
	s.markNode(n.name)
}

// deleteNode removes the node, its IMs and its replicas. Volumes attached
// there or targeted there keep pointing at it: their initiator or target is
// dead until the user moves the target or the node comes back.
func (s *Sim) deleteNode(n *node, now time.Time) {
	s.markNode(n.name)
	for _, volName := range sortedKeys(s.replicasOn[n.name]) {
		v := s.vols[volName]
		if r := v.replicaOn(n.name); r != nil {
			if r.active() || r.instance {
				s.loseReplica(v, r, true, now)
			}
			s.removeReplica(v, r)
		}
	}
	for _, m := range []*im{n.im, n.next, n.gone} {
		if m != nil {
			m.state, m.byFault = dataplane.IMStopped, true
			m.gen++
			delete(s.ims, m.name)
			s.imGone[m.name] = true
		}
	}
	n.im, n.next, n.gone = nil, nil, nil
	delete(s.blockedIMs, n.name)
	delete(s.nodes, n.name)
	if i, ok := slices.BinarySearch(s.nodeNames, n.name); ok {
		s.nodeNames = slices.Delete(s.nodeNames, i, i+1)
	}
	s.deleted[n.name] = n
}

// restoreNode brings a deleted node back, empty, with a new IM.
func (s *Sim) restoreNode(n *node, now time.Time) {
	delete(s.deleted, n.name)
	n.ready = !s.faults.notReady[n.name]
	n.allowSched = true
	s.insertNode(n)
	if n.v2 {
		n.im = s.createIM(n)
		s.startIM(n, n.im, now)
	}
	s.markNode(n.name)
	s.unblock = true
}

// heal clears a fault (active or armed); it reports whether state changed.
func (s *Sim) heal(kind FaultKind, object string) bool {
	now := s.now()
	s.faults.armed = slices.DeleteFunc(s.faults.armed, func(f Fault) bool {
		return f.Kind == kind && f.Object == object
	})
	key := faultKey(kind, object)
	if _, ok := s.faults.active[key]; !ok && !(kind == FaultNodeNotReady && s.faults.notReady[object]) {
		return false
	}
	delete(s.faults.active, key)
	delete(s.faults.activation, key)
	switch kind {
	case FaultIMStartFailure:
		delete(s.faults.imStartFail, object)
		if n := s.nodes[object]; n != nil && n.im != nil && n.im.state == dataplane.IMError {
			// Longhorn retries the pod: the same IM starts again.
			s.startIM(n, n.im, now)
			s.markNode(object)
		}
	case FaultNodeNotReady:
		delete(s.faults.notReady, object)
		if n := s.nodes[object]; n != nil && !n.ready {
			n.ready = true
			s.markNode(object)
			s.unblock = true
		}
	case FaultNodeDeleted:
		if n := s.deleted[object]; n != nil {
			s.restoreNode(n, now)
		}
	case FaultNeverHealthy:
		delete(s.faults.neverHealthy, object)
		if v := s.vols[object]; v != nil {
			for _, r := range v.replicas {
				if r.state == dataplane.ReplicaRebuilding {
					s.schedule(&timer{due: now, kind: timerRebuild, obj: object, sub: r.name, gen: r.gen})
				}
			}
		}
	case FaultSlowRebuild:
		delete(s.faults.slow, object)
	case FaultTargetMoveFailure:
		delete(s.faults.moveFail, object)
		s.unblock = true
	}
	return true
}
