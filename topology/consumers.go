package topology

import (
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchback-dev/switchback/events"
)

// The durable consumers of the event and dead-letter streams (the node
// consumers of CommandStream are NodeConsumer's).
const (
	// OrchestratorConsumer reads the history for the orchestrator. Every
	// orchestrator instance shares it; one instance handles events in
	// stream order, and an event redelivered (to another instance after a
	// crash, or out of order after a failed reaction) is handled again
	// harmlessly: every reaction decides from the aggregates' current
	// state, not from the event alone, and issues idempotent commands.
	OrchestratorConsumer = "orchestrator"
	// ProjectorConsumer reads the history for the projector. Deleting it
	// (with the projector stopped) makes the next projector replay the
	// whole history from sequence 1.
	ProjectorConsumer = "projector"
	// DeadLettererConsumer reads the advisories of dead commands on
	// DeadLetterStream.
	DeadLettererConsumer = "dead-letterer"
)

// OrchestratorConsumerConfig is the orchestrator's consumer on
// EventStream: every event, in order, inFlight at most unacknowledged.
func OrchestratorConsumerConfig(inFlight int) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:       OrchestratorConsumer,
		Description:   "Switchback orchestrator: reacts to upgrade history",
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       30 * time.Second,
		MaxAckPending: inFlight,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	}
}

// ProjectorConsumerConfig is the projector's consumer (name: normally
// ProjectorConsumer) on EventStream. It never gives up on a message: the
// projector acks everything it can (poison included) and retries what it
// cannot yet.
func ProjectorConsumerConfig(name string, ackWait time.Duration) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:       name,
		Description:   "Switchback projector: folds history into CR status, conditions and Events",
		FilterSubject: events.StreamSubjects,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       ackWait,
		MaxDeliver:    -1,
	}
}

// DeadLettererConsumerConfig is the dead-letterer's consumer on
// DeadLetterStream: the advisories of commands that exhausted their
// deliveries or that their worker refused, one at a time.
func DeadLettererConsumerConfig(ackWait time.Duration) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:        DeadLettererConsumer,
		Description:    "parks commands that exhausted MaxDeliver",
		FilterSubjects: []string{MaxDeliveriesAdvisories(CommandStream), TerminatedAdvisories(CommandStream)},
		AckPolicy:      jetstream.AckExplicitPolicy,
		AckWait:        ackWait,
		MaxAckPending:  1,
	}
}

// NodeConsumerConfig is node's consumer on CommandStream: its subject only,
// one command at a time (a node's steps are strictly sequential), bounded
// redelivery.
func NodeConsumerConfig(node string, ackWait time.Duration, maxDeliver int, backOff []time.Duration) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:       NodeConsumer(node),
		Description:   "node worker for " + node,
		FilterSubject: CommandSubject(node),
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       ackWait,
		MaxDeliver:    maxDeliver,
		BackOff:       backOff,
		MaxAckPending: 1,
	}
}
