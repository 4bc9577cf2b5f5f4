package orchestrator_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/aggregate/manager"
	"github.com/switchback-dev/switchback/aggregate/nodeupgrade"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/nodequeue"
	"github.com/switchback-dev/switchback/sim"
	"github.com/switchback-dev/switchback/test/harness/enginetest"
	"github.com/switchback-dev/switchback/topology"
)

func TestTwoOrchestratorsIssueNoCommandTwice(t *testing.T) {
	cluster := layout(t, 4, 12)
	e := enginetest.Start(t, cluster, enginetest.Options{})
	e.StartOrchestrator()
	m := ref("two-orchestrators")
	e.Request(m)
	st := e.WaitManager(m, 30*time.Second, "a terminal state", terminal)
	require.Equal(t, events.ManagerCompleted, st.State, st.Message)
	info, err := e.Queue.CommandStreamInfo(e.Context())
	require.NoError(t, err)
	// One start command and one per step change, per node: no more.
	assert.Equal(t, uint64(4*len(events.NodeSteps)), info.State.LastSeq)
	for key, n := range enginetest.Transitions(e.History(m)) {
		assert.Equal(t, 1, n, "transition %q appears once", key)
	}
}

func TestCommandPastMaxDeliverFailsTheNodeAndIsDeadLettered(t *testing.T) {
	cluster := slowLayout(t)
	require.NoError(t, cluster.InjectTargetMoveFailure("vol-0"))
	require.NoError(t, cluster.InjectTargetMoveFailure("vol-3"))
	require.NoError(t, cluster.InjectTargetMoveFailure("vol-5"))
	e := enginetest.Start(t, cluster, enginetest.Options{AckWait: 200 * time.Millisecond, MaxDeliver: 3})
	m := ref("dead-letter")
	e.Request(m)
	first := e.WaitManager(m, 10*time.Second, "a node in flight", func(s manager.State) bool { return s.UpgradingNode != "" }).UpgradingNode
	e.WaitNode(m, first, 10*time.Second, "stalled", func(n nodeupgrade.State) bool { return n.Stalled })
	other := "n1"
	if first == "n1" {
		other = "n2"
	}
	// A command no worker can carry out: a step of a node upgrade that never
	// started. The worker refuses it on every delivery.
	bogus := nodequeue.Command{ID: "bogus", Kind: nodequeue.Advance, Manager: m, Node: other, Attempt: 1,
		Step: events.NodeSwitchingOver, DataEngine: "v2", InstanceManagerImage: sim.NewIMImage}
	_, err := e.Queue.Publish(e.Context(), bogus)
	require.NoError(t, err)

	st := e.WaitManager(m, 20*time.Second, "a terminal state", terminal)
	require.Equal(t, events.ManagerError, st.State)
	assert.Equal(t, "CommandDeadLettered", st.FailReason)
	assert.Contains(t, st.Message, "bogus")

	dlq, err := e.JS.Stream(e.Context(), topology.DeadLetterStream)
	require.NoError(t, err)
	msg, err := dlq.GetLastMsgForSubject(e.Context(), "sb.dlq.cmd."+other)
	require.NoError(t, err)
	parked, err := nodequeue.DecodeCommand(msg.Data)
	require.NoError(t, err)
	assert.Equal(t, "bogus", parked.ID, "the command is kept in the dead-letter stream")

	// The node that was in flight is brought to its safe point.
	require.NoError(t, cluster.HealTargetMoveFailure("vol-0"))
	require.NoError(t, cluster.HealTargetMoveFailure("vol-3"))
	require.NoError(t, cluster.HealTargetMoveFailure("vol-5"))
	n := e.WaitNode(m, first, 10*time.Second, "terminal", func(n nodeupgrade.State) bool { return n.Terminal() })
	assert.Equal(t, events.NodeCancelled, n.State)
	assert.Empty(t, cluster.Unsafe(""))
	assert.Contains(t, n.CancelReason, "the upgrade failed (CommandDeadLettered)", "the node is told the real cause, not a deletion")
	assert.NotContains(t, n.CancelReason, "deleted")
}
