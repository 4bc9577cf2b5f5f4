package sim

import (
	"time"

	"github.com/switchback-dev/switchback/dataplane"
)

var _ dataplane.Watcher = (*Sim)(nil)

// Changed implements dataplane.Watcher: the channel closes at the next
// change of the simulated cluster, whether made by an action, a test
// shaping the cluster or injecting a fault, or by Longhorn's reactions as
// they come due.
//
// Reactions are applied lazily, on the next read; so that a waiter is not
// left waiting for a completion nobody reads, Changed also arms a wall-clock
// timer at the earliest pending completion, which applies it (and so
// signals it). On a FakeClock time moves only when the test moves it, and
// Advance and Settle apply and signal what comes due; moving the FakeClock
// itself signals nothing until the next read.
func (s *Sim) Changed() <-chan struct{} {
	ch := s.changes.Changed()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.armWake()
	return ch
}

// armWake makes sure a wall-clock timer fires at the earliest pending
// completion. Called under s.mu.
func (s *Sim) armWake() {
	s.dropStale()
	if _, fake := s.clock.(*FakeClock); fake || len(s.timers) == 0 {
		return
	}
	due := s.timers[0].due
	if s.wake != nil {
		if !due.Before(s.wakeAt) {
			return
		}
		s.wake.Stop()
	}
	s.wakeAt = due
	s.wake = time.AfterFunc(max(due.Sub(s.now()), 0), func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.wake = nil
		s.tick()
		// A waiter woken by what came due calls Changed again; until then,
		// keep the next completion armed for one that was not.
		s.armWake()
	})
}
