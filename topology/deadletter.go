package topology

import (
	"strings"

	"github.com/switchback-dev/switchback/events"
)

// Dead-letter message headers: why a message was parked, and where it came
// from. A dead letter is never a command or an event again (the worker and
// the store refuse messages carrying them).
const (
	HeaderDeadReason    = "Sb-Dead-Reason"
	HeaderDeadStream    = "Sb-Dead-Stream"
	HeaderDeadSequence  = "Sb-Dead-Sequence"
	HeaderDeadSubject   = "Sb-Dead-Subject"
	HeaderDeadConsumer  = "Sb-Dead-Consumer"
	HeaderDeadDelivered = "Sb-Dead-Deliveries"
	// HeaderDeadKind is a poison event's kind of decode failure:
	// bad-header, unknown-type, bad-data, wrong-subject or too-large.
	HeaderDeadKind = "Sb-Dead-Kind"
	// HeaderDeadMsgID is a poison event's original Nats-Msg-Id, if any:
	// JetStream headers are not copied as such, since the dead-letter
	// stream would act on them.
	HeaderDeadMsgID = "Sb-Dead-Msg-Id"
)

// DeadEventSubject is where a poison message from subject is parked:
// sb.dlq.evt.<the tokens after sb.evt>, so `nats stream view` on the
// dead-letter stream still shows which manager (and node) it was about. A
// subject outside sb.evt becomes one encoded token.
func DeadEventSubject(subject string) string {
	if rest, ok := strings.CutPrefix(subject, events.SubjectPrefix+"."); ok && validTokens(rest) {
		return DeadEventPrefix + "." + rest
	}
	return DeadEventPrefix + "." + events.EncodeToken(subject)
}

func validTokens(s string) bool {
	for tok := range strings.SplitSeq(s, ".") {
		if tok == "" || strings.ContainsAny(tok, "*> \t\r\n") {
			return false
		}
	}
	return true
}
