package replay

import (
	"context"
	"fmt"
	"hash/maphash"
	"slices"

	"github.com/switchback-dev/switchback/aggregate/upgrade"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/eventstore"
)

// SettleSequences is how many stream sequences Stream waits after an
// upgrade has ended before it hands it out. An upgrade's history can go on
// after its end: a node command still queued when the manager ended starts
// that node, and the orchestrator then cancels it; those events follow the
// end closely, as one upgrade is in progress at a time.
const SettleSequences = 10_000

// Stream folds the stream (or the range in opts) like Run, but hands each
// upgrade to handle instead of keeping it, so that what it holds is the
// upgrades in progress, not every upgrade the stream ever held: an upgrade
// that has ended (its manager and every node it started in a terminal
// state) is handed out SettleSequences after its last event and dropped;
// the others at the end of the range, ordered by namespace, name and first
// appearance. An event that comes for an upgrade already handed out is not
// folded but counted in the result (Late). The result has no Upgrades.
func Stream(ctx context.Context, store *eventstore.Store, opts Options, handle func(*Upgrade) error) (*Result, error) {
	if opts.Manager != "" && opts.Namespace != "" && len(opts.Subjects) == 0 {
		opts.Subjects = []string{events.ManagerNameSubjects(opts.Namespace, opts.Manager)}
	}
	res := &Result{stream: store.Stream()}
	// The range is fixed up front, within what the stream has numbered, so
	// that a lost tail (the last sequences) shows as missing too.
	last, err := store.LastSequence(ctx)
	if err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	if last == 0 {
		return res, nil
	}
	if opts.UntilSeq == 0 || opts.UntilSeq > last {
		opts.UntilSeq = last
	}
	res.until = opts.UntilSeq
	from := max(opts.FromSeq, 1)
	gaps := gapFinder{next: from}
	f := newFold(handle)
	err = store.Scan(ctx, opts.ScanOptions, func(e events.Envelope) error {
		gaps.saw(e.Sequence)
		res.LastSequence = e.Sequence
		ref := e.Aggregate.Manager
		if opts.Manager != "" && (ref.Name != opts.Manager || (opts.Namespace != "" && ref.Namespace != opts.Namespace)) {
			return f.settle(e.Sequence)
		}
		if !f.apply(e) {
			res.Late++
			if res.FirstLate == 0 {
				res.FirstLate = e.Sequence
			}
		}
		return f.settle(e.Sequence)
	}, func(de *events.DecodeError) {
		gaps.saw(de.Sequence)
		res.Parked = append(res.Parked, de)
		res.LastSequence = max(res.LastSequence, de.Sequence)
	})
	if err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	switch {
	case len(opts.Subjects) == 0:
		// Every sequence of the range is an event or a parked message,
		// unless it was lost; past UntilTime nothing was read to judge by.
		if opts.UntilTime.IsZero() && from <= opts.UntilSeq {
			gaps.saw(opts.UntilSeq + 1)
		}
		res.Missing = gaps.missing
	default:
		h, err := store.CheckHistory(ctx)
		if err != nil {
			return nil, fmt.Errorf("replay: %w", err)
		}
		for _, r := range h.Missing {
			r.First, r.Last = max(r.First, from), min(r.Last, opts.UntilSeq)
			if r.First <= r.Last {
				res.Missing = append(res.Missing, r)
			}
		}
	}
	if err := f.flush(); err != nil {
		return nil, err
	}
	return res, nil
}

// fold is Stream's state: the upgrades it holds, those of them that have
// ended in the order they did, and a fingerprint of each it handed out.
type fold struct {
	handle func(*Upgrade) error
	open   map[events.ManagerRef]*Upgrade
	ended  []*Upgrade
	seed   maphash.Seed
	handed map[uint64]struct{}
	// last is the upgrade of the last event: the next is nearly always
	// its too, found without hashing its ref.
	last *Upgrade
}

func newFold(handle func(*Upgrade) error) *fold {
	return &fold{handle: handle, open: map[events.ManagerRef]*Upgrade{}, seed: maphash.MakeSeed(), handed: map[uint64]struct{}{}}
}

// apply folds e into its upgrade; false when that upgrade was handed out.
func (f *fold) apply(e events.Envelope) bool {
	ref := e.Aggregate.Manager
	u := f.last
	if u == nil || u.handedOut || u.Ref != ref {
		var ok bool
		if u, ok = f.open[ref]; !ok {
			if _, done := f.handed[maphash.Comparable(f.seed, ref)]; done {
				return false
			}
			u = &Upgrade{Upgrade: upgrade.NewOwned(), Ref: ref, first: e.Sequence}
			f.open[ref] = u
		}
		f.last = u
	}
	if err := u.Apply(e); err != nil {
		u.Refused = append(u.Refused, fmt.Errorf("seq %d: %w", e.Sequence, err))
	}
	switch {
	case hasEnded(u):
		if u.ended == 0 {
			f.ended = append(f.ended, u)
		}
		// An event after the end (refused or not) starts the wait again.
		u.ended = e.Sequence
	case u.ended != 0:
		u.ended = 0 // a node started after the end: in progress again
	}
	return true
}

// hasEnded reports whether nothing in a sound history changes u any more.
// It reads u's nodes, so it brings them up to date first (Upgrade.Sync).
func hasEnded(u *Upgrade) bool {
	if !u.Manager.Terminal() {
		return false
	}
	u.Sync()
	for _, n := range u.Nodes {
		if !n.Terminal() {
			return false
		}
	}
	return true
}

// settle hands out the upgrades that ended SettleSequences before seq.
func (f *fold) settle(seq uint64) error {
	for len(f.ended) > 0 {
		u := f.ended[0]
		switch {
		case u.ended != 0 && u.ended+SettleSequences > seq:
			// The queue is in the order of ending but a re-queued upgrade
			// may wait behind a later one: the head decides.
			return nil
		case u.ended == 0 || u.handedOut:
			// Re-opened since it was queued (queued again when it ends),
			// or queued twice so and handed out already.
		default:
			delete(f.open, u.Ref)
			u.handedOut = true
			f.handed[maphash.Comparable(f.seed, u.Ref)] = struct{}{}
			if err := f.handOut(u); err != nil {
				return err
			}
		}
		f.ended[0] = nil
		f.ended = f.ended[1:]
	}
	return nil
}

// handOut gives u to the handler, its nodes up to date.
func (f *fold) handOut(u *Upgrade) error {
	u.Sync()
	return f.handle(u)
}

// flush hands out every upgrade still held, in Run's order.
func (f *fold) flush() error {
	rest := make([]*Upgrade, 0, len(f.open))
	for _, u := range f.open {
		rest = append(rest, u)
	}
	slices.SortFunc(rest, byName)
	f.open, f.ended = nil, nil
	for _, u := range rest {
		if err := f.handOut(u); err != nil {
			return err
		}
	}
	return nil
}
