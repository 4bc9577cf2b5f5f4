package nodequeue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchback-dev/switchback/deadletter"
	"github.com/switchback-dev/switchback/eventstore"
	"github.com/switchback-dev/switchback/topology"
)

// DeadCommand describes a command moved to the dead-letter stream: one that
// exhausted its deliveries, or one its worker refused (Refused).
type DeadCommand struct {
	Command    Command
	Sequence   uint64
	Deliveries int
	// Refused is set when the worker refused the command (Terminate): it
	// can never run there (undecodable, another node's, an unknown
	// manager's). Nothing failed on the node.
	Refused bool
	// Reason is why it was moved.
	Reason string
	// Err is set when the dead message was not a valid command at all.
	Err error
}

// deliveryAdvisory is what the dead-letterer reads of a max-deliveries or a
// terminated advisory.
type deliveryAdvisory struct {
	Stream     string `json:"stream"`
	Consumer   string `json:"consumer"`
	StreamSeq  uint64 `json:"stream_seq"`
	Deliveries int    `json:"deliveries"`
	Reason     string `json:"reason"`
}

// CheckCopied returns why a message on subject with headers h is a copy
// that JetStream published there for someone else, nil when it is not one.
// JetStream publishes the answer to an API request on whatever reply
// subject the requester names, and NATS checks no permission on reply
// subjects: a client allowed to read a stream can have a stored message
// published on a command or advisory subject. A direct get's answer carries
// JetStream's served headers (Nats-Stream, Nats-Sequence, ...), a delivered
// dead letter its Sb-Dead-* headers; neither is ever on a command the
// controller issued or an advisory JetStream sent.
func CheckCopied(subject string, h nats.Header) error {
	if err := eventstore.CheckDeliveredHeaders(subject, 0, h); err != nil {
		return fmt.Errorf("a copy of a served message on %s, not a command or advisory: %w", subject, err)
	}
	for k := range h {
		if strings.HasPrefix(strings.ToLower(k), "sb-dead-") {
			return fmt.Errorf("a copy of a dead letter on %s (header %s), not a command or advisory", subject, k)
		}
	}
	return nil
}

// Terminate refuses msg for good, with why: the dead-letterer parks it from
// the advisory JetStream publishes. A worker calls it for a command it can
// never run.
func Terminate(msg jetstream.Msg, why error) error {
	return msg.TermWithReason(deadletter.HeaderSafe(why.Error()))
}

// ErrForeignAdvisory is DeadLetterCommand's answer for an advisory naming a
// consumer other than the command's node consumer: a worker may terminate
// deliveries on its own ack subjects only, and an ack subject names the
// stream sequence it settles, so a worker that writes another node's
// sequence into its own ack subject draws an advisory for a command it was
// never given. The command stays queued.
var ErrForeignAdvisory = errors.New("advisory of another consumer than the command's node's")

// DeadLetterCommand copies one command message to the dead-letter stream
// under sb.dlq.cmd.<node>; the caller removes it from the queue with
// RemoveCommand once the failure is recorded, so a crash in between repeats
// the (idempotent) parking instead of losing the failure. ok is false when
// the message is already gone from the queue. A command whose node
// consumer is not consumer is not parked (ErrForeignAdvisory).
func (q *Queue) DeadLetterCommand(ctx context.Context, seq uint64, consumer string, deliveries int, reason string) (dead DeadCommand, ok bool, err error) {
	raw, err := q.cmd.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return DeadCommand{}, false, nil
	}
	if err != nil {
		return DeadCommand{}, false, fmt.Errorf("nodequeue: dead-letter seq %d: %w", seq, err)
	}
	// The queue's node is the subject's: a misrouted command (another
	// node's body on this node's subject) is its worker's to refuse.
	if queued, ok := topology.CommandSubjectNode(raw.Subject); !ok || consumer != topology.NodeConsumer(queued) {
		return DeadCommand{}, false, fmt.Errorf("nodequeue: dead-letter seq %d on %s: consumer %q is not that queue's: %w", seq, raw.Subject, consumer, ErrForeignAdvisory)
	}
	node := "unknown"
	cmd, decodeErr := DecodeCommand(raw.Data)
	if decodeErr == nil {
		node = cmd.Node
	}
	if _, err := deadletter.Park(ctx, q.js, deadletter.Letter{
		Subject: topology.DeadCommandSubject(node), Data: raw.Data, Header: raw.Header, Reason: reason,
		Stream: topology.CommandStream, Sequence: seq, OriginalSubject: raw.Subject, Consumer: consumer, Deliveries: deliveries,
		ID: fmt.Sprintf("dead-%s-%d", topology.CommandStream, seq), What: "command",
	}); err != nil {
		return DeadCommand{}, false, fmt.Errorf("nodequeue: dead-letter seq %d: %w", seq, err)
	}
	return DeadCommand{Command: cmd, Sequence: seq, Deliveries: deliveries, Err: decodeErr}, true, nil
}

// RemoveCommand deletes a parked command from the work queue.
func (q *Queue) RemoveCommand(ctx context.Context, seq uint64) error {
	if err := q.cmd.DeleteMsg(ctx, seq); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
		return fmt.Errorf("nodequeue: remove command seq %d: %w", seq, err)
	}
	return nil
}

// WatchDeadLetters consumes max-deliveries advisories (durably, so none is
// missed while the controller is down), parks each command and calls onDead,
// which turns it into a node event. onDead's error makes the advisory come
// back later; parking is idempotent so that is safe.
func (q *Queue) WatchDeadLetters(ctx context.Context, onDead func(context.Context, DeadCommand) error) (jetstream.ConsumeContext, error) {
	cons, err := q.js.CreateOrUpdateConsumer(ctx, topology.DeadLetterStream, topology.DeadLettererConsumerConfig(q.cfg.AckWait))
	if err != nil {
		return nil, fmt.Errorf("nodequeue: dead-letter consumer: %w", err)
	}
	return cons.Consume(func(m jetstream.Msg) {
		// JetStream's advisories carry no header; anything else on these
		// subjects was published there by a request's reply (CheckCopied).
		var adv deliveryAdvisory
		if len(m.Headers()) > 0 || json.Unmarshal(m.Data(), &adv) != nil || adv.StreamSeq == 0 {
			_ = m.Term() // not an advisory of JetStream's; nothing to retry
			return
		}
		refused := strings.HasPrefix(m.Subject(), strings.TrimSuffix(topology.TerminatedAdvisories(topology.CommandStream), "*"))
		reason := "max deliveries exceeded"
		if refused {
			reason = "refused by its worker: " + deadletter.HeaderSafe(adv.Reason)
		}
		dead, ok, err := q.DeadLetterCommand(ctx, adv.StreamSeq, adv.Consumer, adv.Deliveries, reason)
		if errors.Is(err, ErrForeignAdvisory) {
			_ = m.Term() // forged by a worker; the advisory stays in the stream as its record
			return
		}
		if err != nil {
			_ = m.Nak()
			return
		}
		if ok {
			dead.Refused, dead.Reason = refused, reason
			if err := onDead(ctx, dead); err != nil {
				_ = m.Nak()
				return
			}
			// A refused command is never delivered again; it stays in
			// its node's history like a done one.
			if !refused {
				if err := q.RemoveCommand(ctx, dead.Sequence); err != nil {
					_ = m.Nak()
					return
				}
			}
		}
		_ = m.Ack()
	})
}
