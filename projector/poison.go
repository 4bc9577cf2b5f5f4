package projector

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchback-dev/switchback/dedup"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/metrics"
	"github.com/switchback-dev/switchback/nodequeue"
)

// DeadLetterPrefix is the subject prefix of dead-lettered events on
// nodequeue.DeadLetterStream; the original subject's tokens follow it.
const DeadLetterPrefix = "sb.dlq.evt"

// Headers a dead-lettered event carries besides the nodequeue.HeaderDead*
// ones (reason, stream, sequence, subject, consumer).
const (
	// HeaderDeadKind is the kind of decode failure: bad-header,
	// unknown-type, bad-data, wrong-subject or too-large.
	HeaderDeadKind = "Sb-Dead-Kind"
	// HeaderDeadMsgID is the original Nats-Msg-Id, if any: JetStream
	// headers are not copied as such, since the dead-letter stream would
	// act on them.
	HeaderDeadMsgID = "Sb-Dead-Msg-Id"
)

// DeadLetterSubject is where a poison message from subject is parked:
// sb.dlq.evt.<the tokens after sb.evt>, so `nats stream view` on the
// dead-letter stream still shows which manager (and node) it was about. A
// subject outside sb.evt becomes one encoded token.
func DeadLetterSubject(subject string) string {
	if rest, ok := strings.CutPrefix(subject, events.SubjectPrefix+"."); ok && validTokens(rest) {
		return DeadLetterPrefix + "." + rest
	}
	return DeadLetterPrefix + "." + events.EncodeToken(subject)
}

func validTokens(s string) bool {
	for tok := range strings.SplitSeq(s, ".") {
		if tok == "" || strings.ContainsAny(tok, "*> \t\r\n") {
			return false
		}
	}
	return true
}

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
	out := nats.NewMsg(DeadLetterSubject(msg.Subject()))
	out.Data = msg.Data()
	for k, vs := range msg.Headers() {
		if strings.HasPrefix(strings.ToLower(k), "nats-") {
			continue
		}
		out.Header[k] = vs
	}
	if id := msg.Headers().Get(jetstream.MsgIDHeader); id != "" {
		out.Header.Set(HeaderDeadMsgID, id)
	}
	out.Header.Set(nodequeue.HeaderDeadReason, nodequeue.HeaderSafe(derr.Error()))
	out.Header.Set(HeaderDeadKind, kind)
	out.Header.Set(nodequeue.HeaderDeadStream, p.cfg.Store.Stream())
	out.Header.Set(nodequeue.HeaderDeadSequence, strconv.FormatUint(seq, 10))
	out.Header.Set(nodequeue.HeaderDeadSubject, msg.Subject())
	out.Header.Set(nodequeue.HeaderDeadConsumer, p.cfg.Consumer)
	out.Header.Set(jetstream.MsgIDHeader, fmt.Sprintf("dead-evt-%d", seq))

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
		r, err := dedup.Publish(ctx, p.cfg.Store.JetStream(), nodequeue.DeadLetterStream, out)
		if err != nil {
			return err
		}
		duplicate = r.Duplicate
		return nil
	})
	if err != nil {
		return err
	}
	if duplicate {
		log.Info("poison message already dead-lettered (redelivery)")
		return nil
	}
	p.m.poison.Add(1)
	metrics.DeadLetters.WithLabelValues("event").Inc()
	log.Error("poison message dead-lettered; projection continues", "deadLetterSubject", out.Subject, "error", derr)
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
				seq, msg.Subject(), kind, nodequeue.DeadLetterStream, out.Subject, derr),
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
