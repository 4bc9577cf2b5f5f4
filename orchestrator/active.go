package orchestrator

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/switchback-dev/switchback/aggregate/manager"
	"github.com/switchback-dev/switchback/aggregate/nodeupgrade"
	"github.com/switchback-dev/switchback/aggregate/upgrade"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/eventstore"
)

// The read model's snapshot (eventstore.SaveModelSnapshot): its name, the
// schema of activeState (change it whenever activeState's or
// upgrade.Upgrade's shape changes), and how many folded events make it worth
// saving again: a restart then folds at most that many, plus what came
// after, instead of every manager the stream ever held.
const (
	activeSnapshotName   = "orchestrator.active"
	activeSnapshotSchema = "active/v1"
	activeSaveEvery      = 64
)

// activeUpgrades is the orchestrator's read model of the upgrades in
// progress: the managers not terminal yet, folded from the stream's manager
// subjects once and then only from what was appended since, forgetting
// managers once they are terminal: a stream with 10k finished upgrades must
// not be read whole at every new request.
//
// It starts from its snapshot when one is usable, and folds the stream's
// manager events after it. The snapshot holds the open managers only; a
// manager the tail names that is neither open nor seen since is looked up
// in the stream (existedBy): if it has events up to the snapshot, it had
// ended by then, as every manager a fold has seen is open or ended.
type activeUpgrades struct {
	store *eventstore.Store
	log   *slog.Logger

	mu        sync.Mutex
	open      map[events.ManagerRef]*upgrade.Upgrade // upgrades in progress (their managers' events only)
	settled   map[events.ManagerRef]bool             // terminal: nothing more to fold
	scannedTo uint64
	snapSeq   uint64 // the sequence of the snapshot started from, 0 if none
	unsaved   int    // events folded since the snapshot was last saved or loaded
	folded    int    // events folded in all (for tests: how much a start read)
}

// activeState is the read model as its snapshot stores it.
type activeState struct {
	Open []openUpgrade `json:"open"`
}

// openUpgrade is one manager of activeState.Open.
type openUpgrade struct {
	Ref     events.ManagerRef `json:"ref"`
	Upgrade upgrade.Upgrade   `json:"upgrade"`
}

// except returns the managers still in progress (namespace/name), except
// one, sorted.
func (a *activeUpgrades) except(ctx context.Context, except events.ManagerRef) ([]string, error) {
	var out []string
	err := a.fold(ctx, false, func(ref events.ManagerRef, _ manager.State) {
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
	err := a.fold(ctx, false, func(ref events.ManagerRef, st manager.State) {
		if st.Held != nil {
			out = append(out, ref)
		}
	})
	slices.SortFunc(out, func(a, b events.ManagerRef) int { return cmp.Compare(a.String(), b.String()) })
	return out, err
}

// warm folds to the stream's end and saves the snapshot if anything was
// folded since it was last saved or loaded. It logs (at Debug) how long
// that took and how much it folded: what a start costs the first request,
// which waits for it.
func (a *activeUpgrades) warm(ctx context.Context) error {
	began := time.Now()
	if err := a.fold(ctx, true, func(events.ManagerRef, manager.State) {}); err != nil {
		return err
	}
	if a.log != nil {
		a.mu.Lock()
		folded, snapSeq := a.folded, a.snapSeq
		a.mu.Unlock()
		a.log.Debug("upgrades in progress up to date", "took", time.Since(began), "folded", folded, "snapshotSeq", snapSeq)
	}
	return nil
}

// fold extends the fold of the manager subjects to the stream's end, saves
// the snapshot when due (or, with force, when anything changed), and calls f
// for each manager not terminal yet.
func (a *activeUpgrades) fold(ctx context.Context, force bool, f func(events.ManagerRef, manager.State)) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.open == nil {
		if err := a.start(ctx); err != nil {
			return err
		}
	}
	until, err := a.store.LastSequence(ctx)
	if err != nil {
		return err
	}
	if until > a.scannedTo {
		// seen moves scannedTo event by event: should the scan fail, the
		// next fold resumes after the last event applied, never applying
		// one twice.
		seen := func(seq uint64) { a.scannedTo = max(a.scannedTo, seq) }
		err = a.store.Scan(ctx, eventstore.ScanOptions{FromSeq: a.scannedTo + 1, UntilSeq: until, Subjects: []string{events.ManagerSubjects}},
			func(e events.Envelope) error {
				if err := a.apply(ctx, e); err != nil {
					return err
				}
				seen(e.Sequence)
				return nil
			}, func(de *events.DecodeError) { seen(de.Sequence) })
		if err != nil {
			return err
		}
		a.scannedTo = until
	}
	if a.unsaved >= activeSaveEvery || (force && (a.unsaved > 0 || a.snapSeq == 0)) {
		a.save(ctx)
	}
	for ref, u := range a.open {
		if u.Active() {
			f(ref, u.Manager)
		}
	}
	return nil
}

// apply folds one manager event.
func (a *activeUpgrades) apply(ctx context.Context, e events.Envelope) error {
	ref := e.Aggregate.Manager
	if a.settled[ref] {
		return nil
	}
	u := a.open[ref]
	if u == nil {
		if a.snapSeq > 0 {
			before, err := a.existedBy(ctx, ref, a.snapSeq)
			if err != nil {
				return err
			}
			if before {
				a.settled[ref] = true // ended by the snapshot (see activeUpgrades)
				return nil
			}
		}
		fresh := upgrade.New()
		u = &fresh
		a.open[ref] = u
	}
	_ = u.Apply(e) // a refused event changes nothing, as everywhere
	a.unsaved++
	a.folded++
	if u.Manager.Terminal() {
		delete(a.open, ref)
		a.settled[ref] = true
	}
	return nil
}

// errFound stops existedBy's scan at the first event.
var errFound = errors.New("found")

// existedBy reports whether the stream holds an event of ref's manager at
// or before seq.
func (a *activeUpgrades) existedBy(ctx context.Context, ref events.ManagerRef, seq uint64) (bool, error) {
	err := a.store.Scan(ctx, eventstore.ScanOptions{UntilSeq: seq, Subjects: []string{events.ManagerAggregate(ref).Subject()}},
		func(events.Envelope) error { return errFound }, nil)
	switch {
	case errors.Is(err, errFound):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("orchestrator: look up manager %s: %w", ref, err)
	}
	return false, nil
}

// start loads the snapshot, if one is usable; without one the fold starts
// from the stream's first event.
func (a *activeUpgrades) start(ctx context.Context) error {
	var st activeState
	seq, ok, err := a.store.LoadModelSnapshot(ctx, activeSnapshotName, activeSnapshotSchema, &st)
	if err != nil {
		return err
	}
	a.open, a.settled = map[events.ManagerRef]*upgrade.Upgrade{}, map[events.ManagerRef]bool{}
	if !ok {
		return nil
	}
	for _, o := range st.Open {
		u := o.Upgrade
		if u.Nodes == nil {
			u.Nodes = map[string]nodeupgrade.State{}
		}
		a.open[o.Ref] = &u
	}
	a.scannedTo, a.snapSeq = seq, seq
	return nil
}

// save stores the snapshot; failing only makes the next start longer.
func (a *activeUpgrades) save(ctx context.Context) {
	if err := a.store.SaveModelSnapshot(ctx, activeSnapshotName, activeSnapshotSchema, a.scannedTo, a.state()); err != nil {
		if a.log != nil {
			a.log.Warn("save the snapshot of the upgrades in progress", "error", err)
		}
		return
	}
	a.unsaved = 0
}

// state is the model as its snapshot stores it, sorted.
func (a *activeUpgrades) state() activeState {
	st := activeState{Open: make([]openUpgrade, 0, len(a.open))}
	for ref, u := range a.open {
		st.Open = append(st.Open, openUpgrade{Ref: ref, Upgrade: *u})
	}
	slices.SortFunc(st.Open, func(x, y openUpgrade) int {
		return cmp.Or(cmp.Compare(x.Ref.String(), y.Ref.String()), cmp.Compare(x.Ref.UID, y.Ref.UID))
	})
	return st
}
