package sim

import (
	"sync"
	"time"
)

// Clock is the simulator's only source of time. Every latency is measured
// against it, so tests drive a FakeClock and never sleep.
type Clock interface {
	Now() time.Time
}

// RealClock reads the wall clock; latencies then elapse in real time and are
// applied on the next read or action (or by Sim.Run).
type RealClock struct{}

// Now returns time.Now().
func (RealClock) Now() time.Time { return time.Now() }

// DefaultStart is the time a FakeClock starts at when given the zero time, so
// that logs of deterministic runs are identical.
var DefaultStart = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// FakeClock is a manual clock. It is safe for concurrent use; time moves only
// when Advance or Set is called. Prefer Sim.Advance, which also applies the
// completions falling inside the interval at their own due times.
type FakeClock struct {
	mu  sync.Mutex
	now time.Time
}

// NewFakeClock returns a clock stopped at start (DefaultStart if zero).
func NewFakeClock(start time.Time) *FakeClock {
	if start.IsZero() {
		start = DefaultStart
	}
	return &FakeClock{now: start}
}

// Now returns the clock's current time.
func (c *FakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d; a negative d is ignored because
// simulated time never runs backwards.
func (c *FakeClock) Advance(d time.Duration) {
	if d <= 0 {
		return
	}
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// Set moves the clock to t if t is later than the current time.
func (c *FakeClock) Set(t time.Time) {
	c.mu.Lock()
	if t.After(c.now) {
		c.now = t
	}
	c.mu.Unlock()
}
