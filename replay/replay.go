// Package replay rebuilds upgrades from the event stream alone, with the same
// folds the controller uses: the answer to "what was the state of this
// upgrade at sequence N / at time T", and the reference the live status is
// verified against.
package replay

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/switchback-dev/switchback/aggregate/upgrade"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/eventstore"
)

// Upgrade is one manager incarnation and its node upgrades, folded
// (upgrade.Upgrade), with the events the folds refused.
type Upgrade struct {
	upgrade.Upgrade
	// Ref is the manager incarnation the events name (the manager's own
	// fold knows it only from its first event, which a damaged or partial
	// history may lack).
	Ref events.ManagerRef
	// Refused lists events the folds rejected (a faulty writer); they are
	// skipped, as the controller skips them.
	Refused []error
}

// Result is a replay.
type Result struct {
	Upgrades []*Upgrade
	// Parked are messages that did not decode.
	Parked []*events.DecodeError
	// LastSequence is the last stream sequence read.
	LastSequence uint64
	// Missing lists the sequences of the replayed range the stream no
	// longer holds: acknowledged events lost from its store (the stream
	// denies deletes, see eventstore.Gaps). The upgrades above are folded
	// from what is left and may be wrong. An unfiltered replay finds them
	// as gaps in its own scan; a filtered one (Subjects, or Manager with
	// Namespace) asks the stream (eventstore.Store.CheckHistory), and they
	// may then belong to other upgrades.
	Missing []eventstore.SeqRange

	stream string
	until  uint64
}

// MissingErr is nil when nothing is missing, else an error naming the lost
// sequences.
func (r *Result) MissingErr() error {
	if len(r.Missing) == 0 {
		return nil
	}
	return (eventstore.Gaps{Stream: r.stream, LastSeq: r.until, Missing: r.Missing}).Err()
}

// Options select what to replay.
type Options struct {
	// Manager restricts the replay to managers with this name (and namespace
	// when Namespace is set); empty = every manager.
	Manager   string
	Namespace string
	eventstore.ScanOptions
}

// Run folds the stream (or the range in opts) into upgrades, ordered by
// namespace, name and first appearance.
func Run(ctx context.Context, store *eventstore.Store, opts Options) (*Result, error) {
	if opts.Manager != "" && opts.Namespace != "" && len(opts.Subjects) == 0 {
		opts.Subjects = []string{events.ManagerNameSubjects(opts.Namespace, opts.Manager)}
	}
	byRef := map[events.ManagerRef]*Upgrade{}
	var order []events.ManagerRef
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
	err = store.Scan(ctx, opts.ScanOptions, func(e events.Envelope) error {
		gaps.saw(e.Sequence)
		ref := e.Aggregate.Manager
		if opts.Manager != "" && (ref.Name != opts.Manager || (opts.Namespace != "" && ref.Namespace != opts.Namespace)) {
			return nil
		}
		u, ok := byRef[ref]
		if !ok {
			u = &Upgrade{Upgrade: upgrade.New(), Ref: ref}
			byRef[ref] = u
			order = append(order, ref)
		}
		if err := u.Apply(e); err != nil {
			u.Refused = append(u.Refused, fmt.Errorf("seq %d: %w", e.Sequence, err))
		}
		res.LastSequence = e.Sequence
		return nil
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
	slices.SortStableFunc(order, func(a, b events.ManagerRef) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	for _, ref := range order {
		res.Upgrades = append(res.Upgrades, byRef[ref])
	}
	return res, nil
}

// gapFinder collects the sequences a scan skipped.
type gapFinder struct {
	next    uint64
	missing []eventstore.SeqRange
}

// saw records that seq was read (scans read in ascending order).
func (g *gapFinder) saw(seq uint64) {
	if seq > g.next {
		g.missing = append(g.missing, eventstore.SeqRange{First: g.next, Last: seq - 1})
	}
	g.next = max(g.next, seq+1)
}
