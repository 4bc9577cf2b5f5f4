package longhorn

import (
	"fmt"

	"k8s.io/client-go/tools/cache"

	"github.com/switchback-dev/switchback/dataplane"
)

var _ dataplane.Watcher = (*Plane)(nil)

// Changed implements dataplane.Watcher: the channel closes at the next add,
// update or delete any of the plane's informers delivers. Informers update
// their cache before they call handlers, so a read after the signal sees
// the change. The signal is coarse (every object of every watched
// resource): one node upgrades at a time, so one step waits on it at once,
// and a spurious wake costs one observation from the caches.
func (p *Plane) Changed() <-chan struct{} { return p.changes.Changed() }

// signalChanges makes every informer event a change signal.
func (p *Plane) signalChanges() error {
	notify := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { p.changes.Notify() },
		UpdateFunc: func(any, any) { p.changes.Notify() },
		DeleteFunc: func(any) { p.changes.Notify() },
	}
	for _, w := range p.all() {
		if _, err := w.inf.AddEventHandler(notify); err != nil {
			return fmt.Errorf("informer %s: %w", w.gvr.Resource, err)
		}
	}
	return nil
}
