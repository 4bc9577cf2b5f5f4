package simremote

import (
	"sync"

	"github.com/nats-io/nats.go"

	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/topology"
)

// announce publishes an empty notice on topology.SimChangedSubject(prefix)
// after every change of w until stop is closed. Changes are coalesced: one
// notice covers every change made before it was published, since a client
// reads after the notice. The next channel is taken before publishing, so a
// change made while publishing is announced by the next notice.
func announce(nc *nats.Conn, prefix string, w dataplane.Watcher, stop <-chan struct{}) {
	subject := topology.SimChangedSubject(prefix)
	ch := w.Changed()
	for {
		select {
		case <-stop:
			return
		case <-ch:
			ch = w.Changed()
			// A notice lost (a closed connection) is made up for by the
			// waiter's resync.
			_ = nc.Publish(subject, nil)
		}
	}
}

// watch is a client's side of the notices: subscribed at the first
// Changed, turned into dataplane.Changes.
type watch struct {
	once    sync.Once
	changes dataplane.Changes
	// ok is false when the subscription failed: Changed then returns nil
	// (a channel that never fires) and the caller relies on its resync.
	ok bool
}

var _ dataplane.Watcher = (*Client)(nil)

// Changed implements dataplane.Watcher over the server's change notices.
// The client subscribes at the first call and waits for the server to have
// the subscription (a flush), so that no notice published after Changed
// returns is missed. A server over a data plane without the signal
// publishes none: its clients' steps then wake only on their resync.
func (c *Client) Changed() <-chan struct{} {
	c.watch.once.Do(func() {
		if _, err := c.nc.Subscribe(topology.SimChangedSubject(c.prefix), func(*nats.Msg) { c.watch.changes.Notify() }); err != nil {
			return
		}
		c.watch.ok = c.nc.FlushTimeout(c.timeout) == nil
	})
	if !c.watch.ok {
		return nil
	}
	return c.watch.changes.Changed()
}
