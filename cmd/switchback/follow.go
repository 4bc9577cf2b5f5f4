package main

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/eventstore"
)

// followEvents delivers the events on filter from sequence from (0 = the
// beginning) as they are appended, until fn returns true or ctx ends (then
// it returns nil). pending is how many more are already stored. Messages
// that do not decode go to onBad.
func followEvents(ctx context.Context, conn *natsConn, filter string, from uint64,
	fn func(e events.Envelope, pending uint64) (stop bool), onBad func(seq uint64, err error)) error {
	stream, err := conn.js.Stream(ctx, conn.store.Stream())
	if err != nil {
		return err
	}
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}}
	if from > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, from
	}
	cons, err := stream.OrderedConsumer(ctx, cfg)
	if err != nil {
		return err
	}
	it, err := cons.Messages()
	if err != nil {
		return err
	}
	defer it.Stop()
	go func() { <-ctx.Done(); it.Stop() }()
	for {
		msg, err := it.Next()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				return nil
			}
			return err
		}
		var seq, pending uint64
		if meta, err := msg.Metadata(); err == nil {
			seq, pending = meta.Sequence.Stream, meta.NumPending
		}
		e, err := eventstore.DecodeDelivered(msg.Subject(), seq, msg.Headers(), msg.Data())
		if err != nil {
			if onBad != nil {
				onBad(seq, err)
			}
			continue
		}
		if fn(e, pending) {
			return nil
		}
	}
}
