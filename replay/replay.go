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

	"github.com/switchback-dev/switchback/aggregate/manager"
	"github.com/switchback-dev/switchback/aggregate/nodeupgrade"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/eventstore"
)

// Upgrade is one manager incarnation and its node upgrades, folded.
type Upgrade struct {
	Manager manager.State
	Nodes   map[string]nodeupgrade.State
	// LastSequence is the stream sequence of the last event folded in.
	LastSequence uint64
	// Refused lists events the folds rejected (a faulty writer); they are
	// skipped, as the controller skips them.
	Refused []error
}

// NodeNames returns the upgrade's nodes in plan order, then any others sorted.
func (u *Upgrade) NodeNames() []string {
	out := slices.Clone(u.Manager.Plan)
	var extra []string
	for n := range u.Nodes {
		if !slices.Contains(out, n) {
			extra = append(extra, n)
		}
	}
	slices.Sort(extra)
	return append(out, extra...)
}

// Result is a replay.
type Result struct {
	Upgrades []*Upgrade
	// Parked are messages that did not decode.
	Parked []*events.DecodeError
	// LastSequence is the last stream sequence read.
	LastSequence uint64
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
		opts.Subjects = []string{fmt.Sprintf("%s.%s.%s.>", events.SubjectPrefix, events.EncodeToken(opts.Namespace), events.EncodeToken(opts.Manager))}
	}
	byRef := map[events.ManagerRef]*Upgrade{}
	var order []events.ManagerRef
	res := &Result{}
	err := store.Scan(ctx, opts.ScanOptions, func(e events.Envelope) error {
		ref := e.Aggregate.Manager
		if opts.Manager != "" && (ref.Name != opts.Manager || (opts.Namespace != "" && ref.Namespace != opts.Namespace)) {
			return nil
		}
		u, ok := byRef[ref]
		if !ok {
			u = &Upgrade{Nodes: map[string]nodeupgrade.State{}}
			byRef[ref] = u
			order = append(order, ref)
		}
		var err error
		if e.Aggregate.IsNode() {
			u.Nodes[e.Aggregate.Node], err = nodeupgrade.Evolve(u.Nodes[e.Aggregate.Node], e)
		} else {
			u.Manager, err = manager.Evolve(u.Manager, e)
		}
		if err != nil {
			u.Refused = append(u.Refused, fmt.Errorf("seq %d: %w", e.Sequence, err))
		}
		u.LastSequence = e.Sequence
		res.LastSequence = e.Sequence
		return nil
	}, func(de *events.DecodeError) {
		res.Parked = append(res.Parked, de)
		res.LastSequence = max(res.LastSequence, de.Sequence)
	})
	if err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	slices.SortStableFunc(order, func(a, b events.ManagerRef) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	for _, ref := range order {
		res.Upgrades = append(res.Upgrades, byRef[ref])
	}
	return res, nil
}
