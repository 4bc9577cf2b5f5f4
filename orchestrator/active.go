package orchestrator

import (
	"cmp"
	"context"
	"slices"
	"sync"

	"github.com/switchback-dev/switchback/aggregate/manager"
	"github.com/switchback-dev/switchback/aggregate/upgrade"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/eventstore"
)

// activeUpgrades is the orchestrator's read model of the upgrades in
// progress: the managers not terminal yet, folded from the stream's manager
// subjects once and then only from what was appended since, forgetting
// managers once they are terminal: a stream with 10k finished upgrades must
// not be read whole at every new request.
type activeUpgrades struct {
	store *eventstore.Store

	mu        sync.Mutex
	open      map[events.ManagerRef]*upgrade.Upgrade // upgrades in progress (their managers' events only)
	settled   map[events.ManagerRef]bool             // terminal: nothing more to fold
	scannedTo uint64
}

// except returns the managers still in progress (namespace/name), except
// one, sorted.
func (a *activeUpgrades) except(ctx context.Context, except events.ManagerRef) ([]string, error) {
	var out []string
	err := a.fold(ctx, func(ref events.ManagerRef, _ manager.State) {
		if ref != except {
			out = append(out, ref.String())
		}
	})
	slices.Sort(out)
	return out, err
}

// held returns the managers held, sorted.
func (a *activeUpgrades) held(ctx context.Context) ([]events.ManagerRef, error) {
	var out []events.ManagerRef
	err := a.fold(ctx, func(ref events.ManagerRef, st manager.State) {
		if st.Held != nil {
			out = append(out, ref)
		}
	})
	slices.SortFunc(out, func(a, b events.ManagerRef) int { return cmp.Compare(a.String(), b.String()) })
	return out, err
}

// fold extends the fold of the manager subjects to the stream's end and
// calls f for each manager not terminal yet.
func (a *activeUpgrades) fold(ctx context.Context, f func(events.ManagerRef, manager.State)) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.open == nil {
		a.open, a.settled = map[events.ManagerRef]*upgrade.Upgrade{}, map[events.ManagerRef]bool{}
	}
	seen := func(seq uint64) { a.scannedTo = max(a.scannedTo, seq) }
	err := a.store.Scan(ctx, eventstore.ScanOptions{FromSeq: a.scannedTo + 1, Subjects: []string{events.ManagerSubjects}},
		func(e events.Envelope) error {
			seen(e.Sequence)
			ref := e.Aggregate.Manager
			if a.settled[ref] {
				return nil
			}
			u := a.open[ref]
			if u == nil {
				fresh := upgrade.New()
				u = &fresh
				a.open[ref] = u
			}
			_ = u.Apply(e) // a refused event changes nothing, as everywhere
			if u.Manager.Terminal() {
				delete(a.open, ref)
				a.settled[ref] = true
			}
			return nil
		}, func(de *events.DecodeError) { seen(de.Sequence) })
	if err != nil {
		return err
	}
	for ref, u := range a.open {
		if u.Active() {
			f(ref, u.Manager)
		}
	}
	return nil
}
