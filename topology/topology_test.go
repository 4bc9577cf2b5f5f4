package topology_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/topology"
)

// TestWireNames: the names are the wire format of every install: a change
// here orphans the streams, consumers and dead letters a running install
// has. They are spelt out so that such a change is seen in review.
func TestWireNames(t *testing.T) {
	for got, want := range map[string]string{
		topology.EventStream:                                             "SWITCHBACK_EVENTS",
		topology.CommandStream:                                           "SWITCHBACK_COMMANDS",
		topology.DeadLetterStream:                                        "SWITCHBACK_DEAD_LETTERS",
		topology.KVStream(topology.SnapshotBucket):                       "KV_switchback-snapshots",
		topology.KVSubjects(topology.SnapshotBucket):                     "$KV.switchback-snapshots.>",
		topology.CommandSubjects:                                         "sb.cmd.node.*",
		topology.CommandSubject("n1"):                                    "sb.cmd.node.n1",
		topology.DeadLetterSubjects:                                      "sb.dlq.>",
		topology.DeadCommandSubject("n1"):                                "sb.dlq.cmd.n1",
		topology.DeadEventSubject("sb.evt.ns.m.uid.node.n1"):             "sb.dlq.evt.ns.m.uid.node.n1",
		topology.DeadEventSubject("elsewhere.*"):                         "sb.dlq.evt." + events.EncodeToken("elsewhere.*"),
		topology.NodeConsumer("n1"):                                      "worker-n1",
		topology.Acks(topology.CommandStream, "worker-n1"):               "$JS.ACK.SWITCHBACK_COMMANDS.worker-n1.>",
		topology.MaxDeliveriesAdvisories(topology.CommandStream):         "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.SWITCHBACK_COMMANDS.*",
		topology.TerminatedAdvisories(topology.CommandStream):            "$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED.SWITCHBACK_COMMANDS.*",
		topology.SimSubjects:                                             "sb.sim.>",
		topology.OrchestratorConsumer + "," + topology.ProjectorConsumer: "orchestrator,projector",
	} {
		assert.Equal(t, want, got)
	}
	long := strings.Repeat("a", 253)
	c := topology.NodeConsumer(long)
	assert.LessOrEqual(t, len(c), 255, "within JetStream's name limit")
	assert.NotEqual(t, c, topology.NodeConsumer(long[:252]+"b"), "distinct long names, distinct consumers")
}

// TestConsumerConfigs: each consumer reads what it must and no more.
func TestConsumerConfigs(t *testing.T) {
	n := topology.NodeConsumerConfig("n1", 10*time.Second, 8, nil)
	assert.Equal(t, topology.CommandSubject("n1"), n.FilterSubject)
	assert.Equal(t, 1, n.MaxAckPending, "a node's steps are sequential")
	d := topology.DeadLettererConsumerConfig(time.Second)
	assert.ElementsMatch(t, []string{topology.MaxDeliveriesAdvisories(topology.CommandStream), topology.TerminatedAdvisories(topology.CommandStream)}, d.FilterSubjects)
	assert.Equal(t, events.StreamSubjects, topology.ProjectorConsumerConfig(topology.ProjectorConsumer, time.Second).FilterSubject)
	assert.Equal(t, -1, topology.ProjectorConsumerConfig(topology.ProjectorConsumer, time.Second).MaxDeliver, "the projector never gives up a message")
	assert.Equal(t, 128, topology.OrchestratorConsumerConfig(128).MaxAckPending)
}

// TestCommandSubjectNode reads back the node of a command subject, and
// nothing else.
func TestCommandSubjectNode(t *testing.T) {
	for _, node := range []string{"n1", "n3.example.com", "UPPER_case", strings.Repeat("a", 253)} {
		got, ok := topology.CommandSubjectNode(topology.CommandSubject(node))
		assert.True(t, ok, node)
		assert.Equal(t, node, got)
	}
	for _, subject := range []string{"sb.cmd.node", "sb.cmd.node.", "sb.cmd.node.n1.x", "sb.dlq.cmd.n1", "sb.evt.ns.m.uid.node.n1"} {
		_, ok := topology.CommandSubjectNode(subject)
		assert.False(t, ok, subject)
	}
}

// TestAPIPrefix: requests built by hand append the API's tokens to the
// prefix, with or without the dot a client was configured with.
func TestAPIPrefix(t *testing.T) {
	for configured, want := range map[string]string{
		"":           "$JS.API.",
		"$JS.API.":   "$JS.API.",
		"$SB.API":    "$SB.API.",
		"$SB.API.":   "$SB.API.",
		"JS.hub.API": "JS.hub.API.",
	} {
		assert.Equal(t, want, topology.APIPrefix(configured), configured)
	}
}
