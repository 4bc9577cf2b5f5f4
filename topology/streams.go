package topology

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/switchback-dev/switchback/events"
)

// The streams and the snapshot bucket.
const (
	// EventStream holds the history: every event, by aggregate subject.
	EventStream = "SWITCHBACK_EVENTS"
	// CommandStream holds the node commands, one subject per node.
	CommandStream = "SWITCHBACK_COMMANDS"
	// DeadLetterStream holds what could not be handled: dead commands,
	// poison events, and the advisories the dead-letterer acts on.
	DeadLetterStream = "SWITCHBACK_DEAD_LETTERS"
	// SnapshotBucket is the KV bucket of aggregate snapshots.
	SnapshotBucket = "switchback-snapshots"
)

// The streams' sizes: what they reserve of the account's JetStream store
// (natsauth's limits count them at every replica).
const (
	// MaxCommandStreamBytes bounds the command stream: the commands kept
	// per node subject (CommandsKeptPerNode) already keep it far
	// below.
	MaxCommandStreamBytes = 1 << 30
	// MaxDeadLetterStreamBytes bounds the dead-letter stream.
	MaxDeadLetterStreamBytes = 256 << 20
)

// The subjects the streams capture (EventStream's: events.StreamSubjects).
const (
	// CommandSubjects: every node's command subject (CommandSubject).
	CommandSubjects = commandPrefix + ".*"
	// DeadLetterSubjects: every dead letter (DeadCommandSubject,
	// DeadEventSubject).
	DeadLetterSubjects = deadLetterPrefix + ".>"
	// SimSubjects: the simulated data plane served on NATS (sim/simremote).
	SimSubjects = SimPrefix + ".>"
)

const (
	commandPrefix    = "sb.cmd.node"
	deadLetterPrefix = "sb.dlq"
	// DeadCommandPrefix prefixes dead commands' subjects.
	DeadCommandPrefix = deadLetterPrefix + ".cmd"
	// DeadEventPrefix prefixes poison events' subjects; the original
	// subject's tokens follow.
	DeadEventPrefix = deadLetterPrefix + ".evt"
	// SimPrefix is the simulated data plane's default subject prefix.
	SimPrefix = "sb.sim"
	// SimChanged is where the simulated data plane served on SimPrefix
	// announces its changes (SimChangedSubject): what its workers
	// subscribe to.
	SimChanged      = SimPrefix + "." + simChangedToken
	simChangedToken = "changed"
)

// SimChangedSubject is where a simulated data plane served on prefix
// announces that it changed, so that steps waiting on it in other
// processes wake (sim/simremote).
func SimChangedSubject(prefix string) string { return prefix + "." + simChangedToken }

// CommandSubject is node's command subject.
func CommandSubject(node string) string { return commandPrefix + "." + events.EncodeToken(node) }

// CommandSubjectNode is the node whose command subject subject is; ok is
// false for any other subject.
func CommandSubjectNode(subject string) (node string, ok bool) {
	tok, ok := strings.CutPrefix(subject, commandPrefix+".")
	if !ok || strings.Contains(tok, ".") {
		return "", false
	}
	node, err := events.DecodeToken(tok)
	return node, err == nil
}

// DeadCommandSubject is where node's dead commands are parked.
func DeadCommandSubject(node string) string {
	return DeadCommandPrefix + "." + events.EncodeToken(node)
}

// KVStream is the stream behind a KV bucket.
func KVStream(bucket string) string { return "KV_" + bucket }

// KVSubjects are the subjects of a KV bucket's keys.
func KVSubjects(bucket string) string { return KVPrefix + bucket + ".>" }

// NodeConsumer is node's durable consumer on CommandStream.
//
// JetStream limits names to 255 characters (they become directory names);
// a valid 253-character node name encodes to more with the prefix, so long
// tokens keep their first 200 characters and gain a hash of the whole name.
func NodeConsumer(node string) string {
	tok := events.EncodeToken(node)
	if len(tok) <= maxConsumerToken {
		return nodeConsumerPrefix + tok
	}
	sum := sha256.Sum256([]byte(node))
	return nodeConsumerPrefix + tok[:200] + "-" + hex.EncodeToString(sum[:5])
}

const (
	nodeConsumerPrefix = "worker-"
	// maxConsumerToken keeps the prefix + token within JetStream's name limit.
	maxConsumerToken = 240
)
