package main

import (
	"context"

	"github.com/switchback-dev/switchback/events"
)

// followEvents delivers the events on filter from sequence from (0 = the
// beginning) as they are appended, until fn returns true or ctx ends (then
// it returns nil). pending is how many more are already stored. Messages
// that do not decode go to onBad.
func followEvents(ctx context.Context, conn *natsConn, filter string, from uint64,
	fn func(e events.Envelope, pending uint64) (stop bool), onBad func(seq uint64, err error)) error {
	var onParked func(*events.DecodeError)
	if onBad != nil {
		onParked = func(de *events.DecodeError) { onBad(de.Sequence, de) }
	}
	return conn.store.Follow(ctx, []string{filter}, from, fn, onParked)
}
