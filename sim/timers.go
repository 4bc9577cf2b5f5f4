package sim

import (
	"container/heap"
	"context"
	"time"

	"github.com/switchback-dev/switchback/dataplane"

	"github.com/switchback-dev/switchback/internal/periodic"
)

type timerKind uint8

const (
	timerSwitch       timerKind = iota // a switch-over phase is due
	timerIMStart                       // a new IM finishes starting
	timerRebuild                       // a replica rebuild finishes
	timerRecheck                       // a degraded volume's replenishment wait ends
	timerHeal                          // a fault armed with HealAfter heals itself
	timerEngineRemove                  // an engine removes a replica from its RAID
	timerReplicaJoin                   // a started replica joins its engine
	timerIMRetry                       // an IM pod that failed beside a lingering one is retried
	timerPodGone                       // a deleted IM's pod is gone
	timerIOTimeout                     // a volume's queued I/O reaches the initiator's ctrl-loss-tmo
	timerRecheckIM                     // Longhorn's node controller looks at a node's IMs again
	timerHash                          // an on-demand hashing request finishes reading
)

// timer is a pending completion. gen identifies the state it was scheduled
// for; a timer whose object changed since is stale and ignored when it fires.
type timer struct {
	due   time.Time
	seq   uint64 // ties broken by scheduling order, for determinism
	kind  timerKind
	obj   string // volume or node
	sub   string // replica or IM name
	gen   uint64
	fault Fault
}

// timerHeap orders pending completions, earliest first; Len, Less, Swap,
// Push and Pop implement heap.Interface.
type timerHeap []*timer

func (h timerHeap) Len() int { return len(h) }
func (h timerHeap) Less(i, j int) bool {
	if !h[i].due.Equal(h[j].due) {
		return h[i].due.Before(h[j].due)
	}
	return h[i].seq < h[j].seq
}
func (h timerHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }

// Push implements heap.Interface.
func (h *timerHeap) Push(x any) { *h = append(*h, x.(*timer)) }

// Pop implements heap.Interface.
func (h *timerHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return t
}

// dropStale pops the timers at the head of the heap that can change
// nothing any more (an I/O timeout of a volume whose I/O flows again), so
// that what is pending is what matters.
func (s *Sim) dropStale() {
	for len(s.timers) > 0 {
		t := s.timers[0]
		if t.kind != timerIOTimeout {
			return
		}
		if q := s.io.queued[t.obj]; q != nil && !q.Start.Add(QueueTimeout).After(t.due) {
			return
		}
		heap.Pop(&s.timers)
	}
}

func (s *Sim) schedule(t *timer) {
	s.seq++
	t.seq = s.seq
	heap.Push(&s.timers, t)
}

// maxSteps bounds one tick so that a modelling bug shows up as a stuck
// simulation rather than a hung test.
const maxSteps = 1 << 20

// tick applies everything that is due: completions whose time has come, work
// unblocked by an eligibility event, and rebuild scheduling. Each applied
// completion is a state change and is followed by an I/O check. With nothing
// due it costs O(1), which keeps reads cheap.
func (s *Sim) tick() { s.step(true) }

// react runs Longhorn's immediate reactions to a change (rebuild scheduling,
// work unblocked by it) without applying timed completions, so that a
// rebuild's latency counts from its cause while a zero latency still
// completes only on the next read.
func (s *Sim) react() { s.step(false) }

func (s *Sim) step(timers bool) {
	now := s.now()
	// did: something was applied, which watchers must hear of.
	did := false
	defer func() {
		if did {
			s.changes.Notify()
		}
	}()
	for range maxSteps {
		switch {
		case timers && len(s.timers) > 0 && !s.timers[0].due.After(now):
			t := heap.Pop(&s.timers).(*timer)
			s.accountAll(now)
			if s.fire(t, now) {
				s.checkIO()
			}
		case s.unblock:
			s.unblock = false
			s.retryBlocked()
		case len(s.imCheck) > 0:
			names := sortedKeys(s.imCheck)
			s.imCheck = drained(s.imCheck)
			for _, name := range names {
				if s.replaceIfIdle(name, now) {
					s.checkIO()
				}
			}
		case len(s.reconcile) > 0:
			names := sortedKeys(s.reconcile)
			s.reconcile = drained(s.reconcile)
			for _, name := range names {
				if v := s.vols[name]; v != nil && s.placeReplicas(v, now) {
					s.checkIO()
				}
			}
		default:
			return
		}
		did = true
	}
}

func (s *Sim) fire(t *timer, now time.Time) bool {
	switch t.kind {
	case timerSwitch:
		return s.advanceSwitch(t.obj, t.gen, t.due)
	case timerIMStart:
		return s.tryStartIM(t.obj, t.sub, t.gen, now)
	case timerRebuild:
		return s.finishRebuild(t.obj, t.sub, t.gen, now)
	case timerRecheck:
		s.reconcile[t.obj] = struct{}{}
		return false
	case timerEngineRemove:
		return s.engineRemove(t.obj, t.sub, t.gen)
	case timerReplicaJoin:
		return s.joinEngine(t.obj, t.sub, t.gen, now)
	case timerIMRetry:
		return s.retryIM(t.obj, t.sub, t.gen, now)
	case timerPodGone:
		return s.podGone(t.obj, t.sub, now)
	case timerHash:
		return s.finishHashing(t.obj, t.gen)
	case timerRecheckIM:
		s.imCheck[t.obj] = struct{}{}
		return false
	case timerIOTimeout:
		// Nothing changes but the I/O round that follows, which fails it.
		return true
	case timerHeal:
		// Healed by hand and injected again since: not this timer's fault.
		if s.faults.activation[faultKey(t.fault.Kind, t.fault.Object)] != t.gen {
			return false
		}
		return s.heal(t.fault.Kind, t.fault.Object)
	}
	return false
}

// retryBlocked re-examines work that waits for a condition rather than a time.
func (s *Sim) retryBlocked() {
	now := s.now()
	for _, name := range sortedKeys(s.blockedIMs) {
		n := s.nodes[name]
		switch {
		case n == nil || n.im == nil:
			delete(s.blockedIMs, name)
		case n.im.state == dataplane.IMStopped:
			delete(s.blockedIMs, name)
			s.startIM(n, n.im, now)
		case s.tryStartIM(name, n.im.name, n.im.gen, now):
			s.checkIO()
		}
	}
	for _, name := range sortedKeys(s.pendingSwitch) {
		if v := s.vols[name]; v != nil && v.sw != nil {
			if s.advanceSwitch(name, v.sw.gen, now) {
				s.checkIO()
			}
		} else {
			delete(s.pendingSwitch, name)
		}
	}
	for name := range s.waiting {
		s.reconcile[name] = struct{}{}
	}
}

// Sync applies every completion due at the clock's current time. Reads and
// actions do it anyway; Sync is for callers that only want the side effects.
func (s *Sim) Sync() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tick()
}

// NextDue returns when the next pending completion is due, if any. Work
// blocked on a condition (a stuck switch-over, a rebuild with no eligible node) has
// no due time and is not reported.
func (s *Sim) NextDue() (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tick()
	s.dropStale()
	if len(s.timers) == 0 {
		return time.Time{}, false
	}
	return s.timers[0].due, true
}

func (s *Sim) fakeClock(op string) *FakeClock {
	fc, ok := s.clock.(*FakeClock)
	if !ok {
		panic("sim: " + op + " needs a *FakeClock in Config.Clock")
	}
	return fc
}

// Advance moves the fake clock forward by d, applying each completion at its
// own due time so that chained latencies (IM start, then rebuild) add up as
// they would in real time. It panics unless the clock is a *FakeClock.
func (s *Sim) Advance(d time.Duration) {
	fc := s.fakeClock("Advance")
	s.mu.Lock()
	defer s.mu.Unlock()
	end := fc.Now().Add(d)
	for range maxSteps {
		s.tick()
		s.dropStale()
		if len(s.timers) == 0 || s.timers[0].due.After(end) {
			break
		}
		fc.Set(s.timers[0].due)
	}
	fc.Set(end)
	s.tick()
}

// Settle advances the fake clock until no completion is pending and returns
// the simulated time that took. Work blocked on a condition stays blocked,
// and faults armed with HealAfter heal on the way. It panics unless the
// clock is a *FakeClock.
func (s *Sim) Settle() time.Duration {
	fc := s.fakeClock("Settle")
	s.mu.Lock()
	defer s.mu.Unlock()
	start := fc.Now()
	for range maxSteps {
		s.tick()
		s.dropStale()
		if len(s.timers) == 0 {
			break
		}
		fc.Set(s.timers[0].due)
	}
	return fc.Now().Sub(start)
}

// Run applies due completions and issues a round of I/O every interval until
// ctx is done; it is for the demo with a real clock, where nothing else would
// exercise the I/O path between actions. Tests do not need it.
func (s *Sim) Run(ctx context.Context, every time.Duration) {
	periodic.Every(ctx, every, func() { s.CheckIO() })
}
