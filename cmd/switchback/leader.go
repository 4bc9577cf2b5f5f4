package main

import (
	"context"
	"log/slog"
	"time"
)

// connection is what the leader needs of its NATS connection.
type connection interface{ IsConnected() bool }

// stepDownWithoutNATS calls stepDown once nc has been found disconnected
// at every look for after (ten looks, a tenth of after apart: a ticker
// drops the ticks a slow process misses, so ten looks span at least after),
// or returns when ctx (the leadership) ends.
func stepDownWithoutNATS(ctx context.Context, nc connection, after time.Duration, stepDown func(), log *slog.Logger) {
	const looks = 10
	tick := time.NewTicker(after / looks)
	defer tick.Stop()
	var lost time.Time
	missed := 0
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			if nc.IsConnected() {
				missed = 0
				continue
			}
			if missed == 0 {
				lost = now
			}
			if missed++; missed > looks {
				log.Warn("NATS unreachable: stepping down, so that a replica that reaches NATS leads", "for", now.Sub(lost).Round(time.Millisecond))
				stepDown()
				return
			}
		}
	}
}

// awaitNATS returns once nc is connected, looking every poll, or with
// ctx's error: a replica without NATS does not compete for the lease.
func awaitNATS(ctx context.Context, nc connection, poll time.Duration) error {
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for !nc.IsConnected() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	return nil
}
