package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/eventstore"
)

// A reaction must decide on a state that holds the event it reacts to.
// Loads are direct gets, which any replica of an R3 stream may answer, and
// a follower can lag the leader by a few milliseconds: the fold then ends
// before the event. For a reaction that appends, that costs a conflict and
// a retry; for one that only reads (the target-away record, which the
// worker waits for and nothing asks for again) it would decide nothing
// and stall the node. So a load that misses the event is read again.

// ErrStaleRead is returned when an aggregate's fold still ends before the
// event being reacted to after freshPatience: the event is redelivered.
var ErrStaleRead = errors.New("the aggregate as read ends before the event")

const (
	// freshFirstWait is the first pause before a stale load is read again;
	// each further one doubles, up to freshPatience in all.
	freshFirstWait = 5 * time.Millisecond
	freshPatience  = 2 * time.Second
)

// includes is the stream sequence a fold of agg must reach to hold e: e's
// own when e is one of agg's events, else 0 (any fold will do).
func includes(e events.Envelope, agg events.AggregateID) uint64 {
	if e.Aggregate != agg {
		return 0
	}
	return e.Sequence
}

// readFresh loads agg with load until its version reaches atLeast,
// pausing with a doubling backoff, and gives up with ErrStaleRead once it
// has waited patience.
func readFresh[S any](ctx context.Context, load func(context.Context, events.AggregateID) (eventstore.Loaded[S], error), agg events.AggregateID, atLeast uint64, patience time.Duration) (eventstore.Loaded[S], error) {
	waited := time.Duration(0)
	for wait := freshFirstWait; ; wait *= 2 {
		l, err := load(ctx, agg)
		if err != nil || l.Version >= atLeast {
			return l, err
		}
		if waited >= patience {
			return l, fmt.Errorf("orchestrator: %s read at version %d, not yet at seq %d: %w", agg, l.Version, atLeast, ErrStaleRead)
		}
		select {
		case <-ctx.Done():
			return l, ctx.Err()
		case <-time.After(wait):
		}
		waited += wait
	}
}
