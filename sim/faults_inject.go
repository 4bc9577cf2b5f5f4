package sim

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/switchback-dev/switchback/dataplane"
)

// Heal clears a fault of the given kind on object, whether it took effect or
// is still armed. Healing a fault that is not there is a no-op.
func (s *Sim) Heal(kind FaultKind, object string) error {
	if err := validate(Fault{Kind: kind, Object: object, Latency: 1}); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tick()
	if s.heal(kind, object) {
		s.checkIO()
		s.react()
		s.changes.Notify()
	}
	return nil
}

// HealAll clears every fault, in a fixed order.
func (s *Sim) HealAll() {
	for _, st := range s.Faults() {
		_ = s.Heal(st.Kind, st.Object) // kinds listed by Faults are valid
	}
}

// Faults lists active and armed faults, sorted by kind then object.
func (s *Sim) Faults() []FaultState {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tick()
	var out []FaultState
	for _, f := range s.faults.active {
		out = append(out, FaultState{Fault: f, Active: true})
	}
	for nodeName := range s.faults.notReady {
		if _, ok := s.faults.active[faultKey(FaultNodeNotReady, nodeName)]; !ok {
			out = append(out, FaultState{Fault: Fault{Kind: FaultNodeNotReady, Object: nodeName}, Active: true})
		}
	}
	for _, f := range s.faults.armed {
		out = append(out, FaultState{Fault: f})
	}
	slices.SortStableFunc(out, func(a, b FaultState) int {
		return strings.Compare(faultKey(a.Kind, a.Object), faultKey(b.Kind, b.Object))
	})
	return out
}

// inject is the checked path behind the Inject* helpers: the object must
// exist, and the fault takes effect at once.
func (s *Sim) inject(f Fault) error {
	if err := validate(f); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tick()
	if f.Kind.OnNode() {
		if _, err := s.node(f.Object); err != nil {
			return fmt.Errorf("inject %s: %w", f.Kind, err)
		}
	} else if _, err := s.volume(f.Object); err != nil {
		return fmt.Errorf("inject %s: %w", f.Kind, err)
	}
	f.When = TriggerNow
	s.activate(f, s.now())
	s.checkIO()
	s.react()
	s.changes.Notify()
	return nil
}

// healChecked is the path behind the Heal* helpers: an unknown object is an
// error, a fault that is not there a no-op.
func (s *Sim) healChecked(kind FaultKind, object string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tick()
	known := s.vols[object] != nil
	if kind.OnNode() {
		known = s.nodes[object] != nil || s.deleted[object] != nil
	}
	if !known {
		what := "volume"
		if kind.OnNode() {
			what = "node"
		}
		return fmt.Errorf("heal %s: %s %q: %w", kind, what, object, dataplane.ErrNotFound)
	}
	if s.heal(kind, object) {
		s.checkIO()
		s.react()
		s.changes.Notify()
	}
	return nil
}

// InjectIMStartFailure makes every new IM on the node fail to start.
func (s *Sim) InjectIMStartFailure(nodeName string) error {
	return s.inject(Fault{Kind: FaultIMStartFailure, Object: nodeName})
}

// HealIMStartFailure lets the node's IMs start again (an errored IM restarts).
func (s *Sim) HealIMStartFailure(nodeName string) error {
	return s.healChecked(FaultIMStartFailure, nodeName)
}

// InjectNodeNotReady makes the node NotReady.
func (s *Sim) InjectNodeNotReady(nodeName string) error {
	return s.inject(Fault{Kind: FaultNodeNotReady, Object: nodeName})
}

// HealNodeNotReady makes the node Ready again.
func (s *Sim) HealNodeNotReady(nodeName string) error {
	return s.healChecked(FaultNodeNotReady, nodeName)
}

// InjectNodeDeleted deletes the node with its IM and replicas.
func (s *Sim) InjectNodeDeleted(nodeName string) error {
	return s.inject(Fault{Kind: FaultNodeDeleted, Object: nodeName})
}

// HealNodeDeleted brings a deleted node back: Ready, no replicas, upgrade
// flag cleared, and a new IM on the default image.
func (s *Sim) HealNodeDeleted(nodeName string) error {
	return s.healChecked(FaultNodeDeleted, nodeName)
}

// InjectNeverHealthy stops the volume's rebuilds from ever finishing.
func (s *Sim) InjectNeverHealthy(volName string) error {
	return s.inject(Fault{Kind: FaultNeverHealthy, Object: volName})
}

// HealNeverHealthy lets the volume's pending rebuilds finish.
func (s *Sim) HealNeverHealthy(volName string) error {
	return s.healChecked(FaultNeverHealthy, volName)
}

// InjectSlowRebuild makes the volume's rebuilds started from now take d.
func (s *Sim) InjectSlowRebuild(volName string, d time.Duration) error {
	return s.inject(Fault{Kind: FaultSlowRebuild, Object: volName, Latency: d})
}

// HealSlowRebuild restores Config.RebuildLatency for later rebuilds.
func (s *Sim) HealSlowRebuild(volName string) error {
	return s.healChecked(FaultSlowRebuild, volName)
}

// InjectTargetMoveFailure blocks the volume's target moves.
func (s *Sim) InjectTargetMoveFailure(volName string) error {
	return s.inject(Fault{Kind: FaultTargetMoveFailure, Object: volName})
}

// HealTargetMoveFailure lets a pending move of the volume's target complete.
func (s *Sim) HealTargetMoveFailure(volName string) error {
	return s.healChecked(FaultTargetMoveFailure, volName)
}
