package dataplane

import "sync"

// Watcher is implemented by a data plane that says when what its Reader
// returns may have changed, so that a waiting step wakes on the change
// instead of re-reading on a timer. A data plane without it is polled.
//
// Changed returns a channel that is closed at the next change after the
// call. A caller takes the channel before it reads and waits on it after:
// a change made between the read and the wait then closes the channel
// already taken, so it is never missed. The signal is coarse (any change
// anywhere in the data plane) and may fire for a change that does not
// concern the caller; a woken caller simply reads again.
type Watcher interface {
	Changed() <-chan struct{}
}

// Changes is the broadcast behind a Watcher: Notify closes the channel that
// Changed handed out since the last Notify. The zero value is ready to use,
// and Notify without a waiter costs a lock and nothing else, so a data plane
// calls it after every change.
type Changes struct {
	mu sync.Mutex
	ch chan struct{}
}

// Changed implements Watcher.
func (c *Changes) Changed() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ch == nil {
		c.ch = make(chan struct{})
	}
	return c.ch
}

// Notify wakes everyone waiting on a channel Changed returned.
func (c *Changes) Notify() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ch != nil {
		close(c.ch)
		c.ch = nil
	}
}
