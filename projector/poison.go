package projector

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchback-dev/switchback/deadletter"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/topology"
)

// decodeKinds names the DecodeError kinds in headers and logs.
var decodeKinds = []struct {
	err  error
	name string
}{
	{events.ErrBadHeader, "bad-header"},
	{events.ErrUnknownType, "unknown-type"},
	{events.ErrBadData, "bad-data"},
	{events.ErrWrongSubject, "wrong-subject"},
	{events.ErrTooLarge, "too-large"},
}

func decodeKind(err error) string {
	for _, k := range decodeKinds {
		if errors.Is(err, k.err) {
			return k.name
		}
	}
	return "undecodable"
}

// deadLetter copies a message that does not decode to the dead-letter
// stream (idempotently: Nats-Msg-Id is dead-evt-<seq>, and an id some other
// message took does not hide it, see package dedup), reports it (an error
// log, the Poison counter, and a Warning Event on the manager when the
// subject names one whose DataEngineUpgradeManager exists) and lets the
// caller ack it: a poison message never stops the projection. Only the copy
// is retried; it returns an error only when ctx ends first.
func (p *Projector) deadLetter(ctx context.Context, msg jetstream.Msg, meta *jetstream.MsgMetadata, derr error) error {
	seq := meta.Sequence.Stream
	kind := decodeKind(derr)
	letter := deadletter.Letter{
		Subject: topology.DeadEventSubject(msg.Subject()), Data: msg.Data(), Header: msg.Headers(),
		Reason: derr.Error(), Kind: kind, Stream: p.cfg.Store.Stream(), Sequence: seq, OriginalSubject: msg.Subject(),
		Consumer: p.cfg.Consumer, ID: fmt.Sprintf("dead-evt-%d", seq), What: "event",
	}

	log := p.log.With("subject", msg.Subject(), "seq", seq, "kind", kind)
	agg, aggErr := events.ParseSubject(msg.Subject())
	if aggErr == nil {
		log = log.With("manager", agg.Manager.String(), "uid", agg.Manager.UID)
		if agg.IsNode() {
			log = log.With("node", agg.Node)
		}
	}
	var duplicate bool
	err := p.retry(ctx, log, "dead-letter", p.cfg.WriteTimeout, func(ctx context.Context) error {
		var err error
		duplicate, err = deadletter.Park(ctx, p.cfg.Store.JetStream(), letter)
		return err
	})
	if err != nil {
		return err
	}
	if duplicate {
		log.Info("poison message already dead-lettered (redelivery)")
		return nil
	}
	p.m.poison.Add(1)
	log.Error("poison message dead-lettered; projection continues", "deadLetterSubject", letter.Subject, "error", derr)
	if aggErr == nil && p.managerExists(ctx, agg.Manager) {
		e := p.entries[agg.Manager.UID]
		objs := objects{ref: agg.Manager}
		if e != nil {
			objs = p.objectsOf(e)
		}
		p.rec.emit(objs, notice{
			seq: seq, at: meta.Timestamp, warning: true,
			reason: ReasonEventDeadLettered, action: actionProject,
			node: agg.Node, managerOnly: true,
			note: fmt.Sprintf("message %d on %s could not be decoded (%s) and was moved to %s as %s: %v",
				seq, msg.Subject(), kind, topology.DeadLetterStream, letter.Subject, derr),
		})
	}
	return nil
}

// managerExists reports, best effort (one read, no retry: reporting must
// not hold projection), whether ref's DataEngineUpgradeManager exists.
func (p *Projector) managerExists(ctx context.Context, ref events.ManagerRef) bool {
	if _, gone := p.gone[ref.UID]; gone {
		return false
	}
	if p.entries[ref.UID] != nil {
		return true
	}
	rctx, cancel := context.WithTimeout(ctx, p.cfg.WriteTimeout)
	defer cancel()
	_, err := p.readManager(rctx, ref)
	if errors.Is(err, errGone) {
		p.markGone(ref.UID)
	}
	return err == nil
}
