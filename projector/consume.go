package projector

import (
	"context"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/eventstore"
)

// idleWait is how long one pull waits for a new event when the projector
// is caught up.
const idleWait = 10 * time.Second

// fetch returns the messages available now (up to Batch), or waits for the
// next one. Nothing is prefetched beyond what is returned: every message the
// consumer has delivered to the projector is in hand and kept alive by
// handleBatch, so a long apiserver outage makes none of them time out and
// come back out of order.
func (p *Projector) fetch(ctx context.Context) ([]jetstream.Msg, error) {
	// Store.Fetch, not the nats.go consumer API, which drops a stored event
	// that looks like a NATS status unacknowledged, forever.
	return p.cfg.Store.Fetch(ctx, p.cfg.Consumer, p.cfg.Batch, idleWait)
}

// held is one message in hand.
type held struct {
	msg   jetstream.Msg
	meta  *jetstream.MsgMetadata
	acked bool
}

// group is what a batch folded for one manager and has not written yet,
// with the messages to ack once it is written.
type group struct {
	e     *entry
	steps []step
	msgs  []*held
	log   *slog.Logger
}

// handleBatch folds msgs in stream order, then writes each manager's
// objects once for the whole batch and acks its messages: after an outage
// or a restart, a backlog costs one write per manager per batch rather than
// one per event, and every event's Kubernetes Events are still recorded.
// Every message not yet acked is kept alive meanwhile; when ctx ends first,
// they are nak'ed so that the next projector gets them at once rather than
// after AckWait.
func (p *Projector) handleBatch(ctx context.Context, msgs []jetstream.Msg) (err error) {
	stop := keepAlive(msgs, p.cfg.AckWait/3)
	defer stop()
	hs := make([]*held, len(msgs))
	for i, m := range msgs {
		hs[i] = &held{msg: m}
	}
	defer func() {
		if err == nil {
			return
		}
		for _, h := range hs {
			if !h.acked {
				_ = h.msg.Nak()
			}
		}
	}()
	groups := map[*entry]*group{}
	var order []*group
	for _, h := range hs {
		g, err := p.fold(ctx, h)
		if err != nil {
			return err
		}
		if g == nil {
			p.ack(h)
			continue
		}
		g.msgs = append(g.msgs, h)
		if have := groups[g.e]; have != nil {
			have.steps = append(have.steps, g.steps...)
			have.msgs = append(have.msgs, h)
			continue
		}
		groups[g.e] = g
		order = append(order, g)
	}
	for _, g := range order {
		if err := p.write(ctx, g.e, g.steps, g.log); err != nil {
			return err
		}
		for _, h := range g.msgs {
			p.ack(h)
		}
	}
	return nil
}

// ack acks a handled message. A lost ack means a redelivery, which is
// skipped as stale.
func (p *Projector) ack(h *held) {
	h.acked = true
	if err := h.msg.Ack(); err != nil {
		p.log.Warn("ack", "subject", h.msg.Subject(), "error", err)
	}
	if h.meta != nil {
		p.m.lastSequence.Store(max(p.m.lastSequence.Load(), h.meta.Sequence.Stream))
		p.m.lag.Store(h.meta.NumPending)
	}
}

// fold decodes one message and folds it into its manager's view. It returns
// the manager's group (to be written, then acked) or nil when the message
// is done with (poison dead-lettered, no manager to project). It returns an
// error only when ctx ended first.
func (p *Projector) fold(ctx context.Context, h *held) (*group, error) {
	msg := h.msg
	meta, err := msg.Metadata()
	if err != nil {
		p.log.Error("message without JetStream metadata; acking", "subject", msg.Subject(), "error", err)
		return nil, nil
	}
	h.meta = meta
	seq := meta.Sequence.Stream
	if meta.NumDelivered > 1 {
		p.m.redelivered.Add(1)
		p.log.Debug("redelivered message", "subject", msg.Subject(), "seq", seq, "deliveries", meta.NumDelivered)
	}
	// Delivery order bookkeeping (see below): a message past the next
	// expected sequence means messages in between were not seen (yet).
	backward := seq <= p.lastSeq
	if seq > p.lastSeq+1 {
		p.epoch++
	}
	p.lastSeq = max(p.lastSeq, seq)

	env, derr := eventstore.DecodeDelivered(msg.Subject(), seq, msg.Headers(), msg.Data())
	if derr != nil {
		return nil, p.deadLetter(ctx, msg, meta, derr)
	}
	return p.foldEvent(ctx, env, backward, meta.NumPending)
}

// foldEvent folds one event into its manager's view.
//
// A view may be extended with the delivered event directly only when every
// stream sequence between the view's last event and this one was handled, in
// order, in the current epoch: the consumer covers the whole stream, whose
// sequences are dense, so nothing of the manager can have been missed. In
// every other case (first event of a manager since the start, a skip ahead,
// a late redelivery) the view catches up from the stream itself, which is the
// truth, up to this event. Either way the view is the fold of the manager's
// history up to the event, and folding is deterministic, so restarts and
// gaps converge on what Replay computes.
func (p *Projector) foldEvent(ctx context.Context, env events.Envelope, backward bool, pending uint64) (*group, error) {
	ref := env.Aggregate.Manager
	log := p.log.With("manager", ref.String(), "uid", ref.UID)
	elog := log.With("seq", env.Sequence, "type", string(env.Type()))
	if env.Aggregate.IsNode() {
		elog = elog.With("node", env.Aggregate.Node)
	}
	e, err := p.entryFor(ctx, ref, env.Sequence, pending, elog)
	if err != nil || e == nil {
		if e == nil && err == nil {
			p.m.ignored.Add(1)
			elog.Debug("no DataEngineUpgradeManager of this uid; not projected")
		}
		return nil, err
	}
	g := &group{e: e, log: log}
	if env.Sequence <= e.view.LastSequence {
		// Folded already: written, or to be written with this batch.
		p.m.skippedStale.Add(1)
		return g, nil
	}
	if !backward && e.epoch == p.epoch {
		g.steps = append(g.steps, e.view.apply(env))
	} else {
		p.m.catchUps.Add(1)
		err := p.retry(ctx, elog, "fold from the stream", 0, func(ctx context.Context) error {
			return e.view.catchUp(ctx, p.cfg.Store, env.Sequence, func(s step) { g.steps = append(g.steps, s) })
		})
		if err != nil {
			return nil, err
		}
		// A late redelivery leaves sequences after it that this view has
		// not been checked against: the next event catches up again.
		e.epoch = p.epoch
		if backward {
			e.epoch = 0
		}
		elog.Debug("caught up from the stream", "events", len(g.steps))
	}
	for _, s := range g.steps {
		if s.err != nil {
			p.m.rejected.Add(1)
			elog.Warn("the fold refused an event; skipped", "eventSeq", s.seq, "error", s.err)
		}
	}
	return g, nil
}
