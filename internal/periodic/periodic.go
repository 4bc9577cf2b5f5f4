// Package periodic runs a function at a fixed interval until its context
// ends: the loop behind the worker's heartbeats, the orchestrator's re-checks
// of held upgrades, the projector's keep-alives and the simulator's demo
// clock.
package periodic

import (
	"context"
	"time"
)

// Every calls f every d, the first time d after the call, until ctx ends;
// it returns then (after the call of f under way, if any). Ticks that a
// slow f overran are dropped, as a time.Ticker drops them: calls never pile
// up.
func Every(ctx context.Context, d time.Duration, f func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f()
		}
	}
}
