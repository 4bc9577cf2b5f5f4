package topology

import (
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchback-dev/switchback/events"
)

// The definitions of Switchback's streams, beside their consumers'
// (consumers.go): each owner creates or updates its own at start-up
// (eventstore.Open, nodequeue.Open), from these.

// EventStreamConfig is the history: every event by aggregate subject, kept
// (no deletes, no purges, new messages refused when full rather than old
// ones dropped), served by direct gets, multi-event appends committed as
// one atomic batch.
func EventStreamConfig(name string, replicas int, duplicates time.Duration) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:               name,
		Description:        "Switchback upgrade history: CloudEvents, one subject per aggregate",
		Subjects:           []string{events.StreamSubjects},
		Retention:          jetstream.LimitsPolicy,
		Storage:            jetstream.FileStorage,
		Replicas:           replicas,
		Discard:            jetstream.DiscardNew,
		Duplicates:         duplicates,
		DenyDelete:         true,
		DenyPurge:          true,
		AllowDirect:        true,
		AllowAtomicPublish: true,
		MaxMsgSize:         events.MaxDataBytes + 8<<10,
	}
}

// CommandStreamConfig is the node commands, one subject and one consumer
// per node, the oldest dropped past CommandsKeptPerNode (limits retention:
// a done command stays as evidence instead of being deleted on ack).
func CommandStreamConfig(replicas int, duplicates time.Duration) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:              CommandStream,
		Description:       "Switchback node commands: one subject and one consumer per node",
		Subjects:          []string{CommandSubjects},
		Retention:         jetstream.LimitsPolicy,
		MaxMsgsPerSubject: CommandsKeptPerNode,
		MaxMsgSize:        MaxCommandBytes,
		MaxBytes:          MaxCommandStreamBytes,
		Storage:           jetstream.FileStorage,
		Replicas:          replicas,
		Duplicates:        duplicates,
	}
}

// DeadLetterStreamConfig is the dead letters, and the command stream's
// max-deliveries and terminated advisories: they are fire-and-forget core
// NATS messages, and a controller that is down when one fires must still
// find it later.
func DeadLetterStreamConfig(replicas int) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        DeadLetterStream,
		Description: "Switchback dead letters: commands past MaxDeliver and events that did not decode",
		Subjects:    []string{DeadLetterSubjects, MaxDeliveriesAdvisories(CommandStream), TerminatedAdvisories(CommandStream)},
		Retention:   jetstream.LimitsPolicy,
		MaxMsgSize:  MaxDeadLetterBytes,
		MaxBytes:    MaxDeadLetterStreamBytes,
		Storage:     jetstream.FileStorage,
		Replicas:    replicas,
	}
}

// Message limits. Only the controller publishes commands and dead letters
// (and JetStream its advisories); with limits retention the oldest messages
// go first: done commands and old evidence. A copy JetStream publishes on a
// command subject for a client that named it as a reply counts against the
// same per-subject limit, so the limits alone do not keep a node's queued
// commands from a client that can make JetStream answer there
// (docs/security.md §11).
const (
	// MaxCommandBytes bounds one command (they are well under a kilobyte).
	MaxCommandBytes = 64 << 10
	// MaxDeadLetterBytes bounds one dead letter: a copied event (at most
	// events.MaxDataBytes) with its headers.
	MaxDeadLetterBytes = events.MaxDataBytes + 16<<10
	// CommandsKeptPerNode bounds the commands kept per node subject: the
	// oldest go first. An upgrade sends a node about ten, so the bound
	// keeps many upgrades of history and can only drop a command nobody
	// will deliver again.
	CommandsKeptPerNode = 1024
)
