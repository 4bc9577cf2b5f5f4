// Package replay rebuilds upgrades from the event stream alone, with the same
// folds the controller uses: the answer to "what was the state of this
// upgrade at sequence N / at time T", and the reference the live status is
// verified against.
package replay

import (
	"cmp"
	"context"
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

	// first is the sequence of the upgrade's first event; ended that of
	// the event after which it had ended (0 while it has not); handedOut
	// says Stream handed it out.
	first, ended uint64
	handedOut    bool
}

// Result is a replay.
type Result struct {
	// Upgrades are the replayed upgrades (Run; Stream hands them out
	// instead and leaves this empty).
	Upgrades []*Upgrade
	// Parked are messages that did not decode.
	Parked []*events.DecodeError
	// LastSequence is the last stream sequence read.
	LastSequence uint64
	// Late counts the events Stream read for an upgrade it had already
	// handed out (see Stream): not folded into what it handed out.
	// FirstLate is the first one's sequence.
	Late, FirstLate uint64
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
// namespace, name and first appearance. It keeps every upgrade of the
// range; Stream hands them out instead.
func Run(ctx context.Context, store *eventstore.Store, opts Options) (*Result, error) {
	var all []*Upgrade
	res, err := Stream(ctx, store, opts, func(u *Upgrade) error {
		all = append(all, u)
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(all, byName)
	res.Upgrades = all
	return res, nil
}

// byName orders upgrades by namespace, name and first appearance.
func byName(a, b *Upgrade) int {
	return cmp.Or(strings.Compare(a.Ref.Namespace+"/"+a.Ref.Name, b.Ref.Namespace+"/"+b.Ref.Name), cmp.Compare(a.first, b.first))
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
