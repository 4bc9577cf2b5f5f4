//go:build linux

package faults

import (
	"errors"
	"sync/atomic"
	"time"
)

// planeFaults make the data plane slow or flaky, as a loaded or
// misbehaving Longhorn is: every call of the simulated data plane (through
// the gate) and every request of a worker to the apiserver on the Longhorn
// path (through its hold proxy) passes here.
type planeFaults struct {
	// delay is added to every call (nanoseconds; 0: none).
	delay atomic.Int64
	// flaky refuses one call in four before it acts, and loses the answer
	// of one change in three after it took effect (a timeout: the caller
	// cannot tell it happened).
	flaky    atomic.Bool
	calls    atomic.Int64
	changes  atomic.Int64
	injected atomic.Int64
}

var (
	errRefused    = errors.New("injected fault: the data plane refused the call (flaky)")
	errAnswerLost = errors.New("injected fault: no answer in time, the call may have taken effect (flaky)")
)

// before delays a call and may refuse it.
func (f *planeFaults) before() error {
	if d := f.delay.Load(); d > 0 {
		time.Sleep(time.Duration(d))
	}
	if f.flaky.Load() && f.calls.Add(1)%4 == 0 {
		f.injected.Add(1)
		return errRefused
	}
	return nil
}

// after, for a change that took effect, may lose its answer.
func (f *planeFaults) after() error {
	if f.flaky.Load() && f.changes.Add(1)%3 == 0 {
		f.injected.Add(1)
		return errAnswerLost
	}
	return nil
}
