package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/eventstore"
	"github.com/switchback-dev/switchback/topology"
)

// Run consumes history until ctx ends.
func (o *Orchestrator) Run(ctx context.Context) error {
	js := o.cfg.Store.JetStream()
	_, err := js.CreateOrUpdateConsumer(ctx, o.cfg.Store.Stream(), topology.OrchestratorConsumerConfig(orchestratorBatch))
	if err != nil {
		return fmt.Errorf("orchestrator: consumer: %w", err)
	}
	dead, err := o.cfg.Queue.WatchDeadLetters(ctx, o.onDeadCommand)
	if err != nil {
		return err
	}
	defer dead.Stop()
	holds, stopHolds := context.WithCancel(ctx)
	var watching sync.WaitGroup
	watching.Go(func() { o.watchHolds(holds, o.cfg.HoldPoll) })
	// The first request after a start would otherwise bring the read model
	// up to date itself; without a snapshot yet, that is every manager of
	// the stream.
	watching.Go(func() {
		if err := o.WarmUp(holds); err != nil && holds.Err() == nil {
			o.log.Warn("bring the upgrades in progress up to date", "error", err)
		}
	})
	defer watching.Wait()
	defer stopHolds()
	// What a previous leader, or this process before its connection was
	// lost, was delivered and never acknowledged comes again at once.
	rewind := o.cfg.Store.Rewinder(topology.OrchestratorConsumer)
	// Store.Fetch, not the nats.go consumer API: a stored event that looks
	// like a NATS status must be parked, not dropped unacknowledged forever.
	for {
		if _, err := rewind.Check(ctx); err != nil {
			o.log.Warn("rewind to the first unacknowledged event: what was in flight comes after the consumer's AckWait", "error", err)
		}
		msgs, err := o.cfg.Store.Fetch(ctx, topology.OrchestratorConsumer, orchestratorBatch, orchestratorWait)
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, nats.ErrConnectionClosed):
			return fmt.Errorf("orchestrator: %w", err)
		case err != nil:
			o.log.Warn("next event", "error", err)
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(orchestratorRetry):
			}
			continue
		}
		for _, msg := range msgs {
			o.handleMsg(ctx, msg)
		}
	}
}

// WarmUp brings the read model of the upgrades in progress (which
// prechecks and held upgrades consult) up to the stream's end and saves its
// snapshot, so that the next start folds only the events after it. Run does
// it when it starts.
func (o *Orchestrator) WarmUp(ctx context.Context) error {
	if err := o.active.warm(ctx); err != nil {
		return fmt.Errorf("orchestrator: upgrades in progress: %w", err)
	}
	return nil
}

func (o *Orchestrator) handleMsg(ctx context.Context, msg jetstream.Msg) {
	meta, _ := msg.Metadata()
	var seq uint64
	if meta != nil {
		seq = meta.Sequence.Stream
	}
	env, err := eventstore.DecodeDelivered(msg.Subject(), seq, msg.Headers(), msg.Data())
	if err != nil {
		// Parked: the projector reports it; the orchestrator has nothing to do.
		var de *events.DecodeError
		if errors.As(err, &de) && o.cfg.OnParked != nil {
			o.cfg.OnParked(de)
		}
		o.log.Warn("skipping undecodable event", "subject", msg.Subject(), "seq", seq, "error", err)
		_ = msg.Ack()
		return
	}
	if err := o.React(ctx, env); err != nil {
		if ctx.Err() != nil {
			return
		}
		o.log.Error("reaction failed; retrying", "manager", env.Aggregate.Manager.String(), "node", env.Aggregate.Node, "type", env.Type(), "seq", seq, "error", err)
		_ = msg.NakWithDelay(time.Second)
		return
	}
	// A plain ack: should it be lost, the redelivered event is handled again,
	// harmlessly.
	if err := msg.Ack(); err != nil {
		o.log.Warn("ack event", "seq", seq, "error", err)
	}
}
