package enginetest

import (
	"slices"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/aggregate/manager"
	"github.com/switchback-dev/switchback/aggregate/nodeupgrade"
	"github.com/switchback-dev/switchback/events"
)

// IMNeverStarts upgrades failing then the other nodes, where the caller has
// made failing's new instance manager never start. It checks what every data
// plane must show: the node stalls in upgrading-instance-manager, then fails
// with InstanceManagerFailed, and the upgrade ends in error naming it with no
// node upgraded after it. It returns the final manager state for the data
// plane's own checks.
func (e *Engine) IMNeverStarts(m events.ManagerRef, failing string, others ...string) manager.State {
	e.t.Helper()
	e.Request(m, append([]string{failing}, others...)...)
	e.WaitNode(m, failing, 20*time.Second, "stalled", func(n nodeupgrade.State) bool {
		return n.Stalled && n.State == events.NodeUpgradingInstanceManager
	})
	st := e.WaitManager(m, 20*time.Second, "a terminal state", manager.State.Terminal)
	require.Equal(e.t, events.ManagerError, st.State)
	n := e.Node(m, failing)
	assert.Equal(e.t, events.NodeError, n.State)
	assert.Equal(e.t, "InstanceManagerFailed", n.FailReason)
	assert.Contains(e.t, st.Message, failing)
	for node, ns := range st.Nodes {
		if node != failing {
			assert.Equal(e.t, events.NodeCompleted, ns.State, "only nodes before %s ran", failing)
		}
	}
	return st
}

// AtOrPast returns a WaitNode condition: the node upgrade exists and is at
// step or a later one (a terminal state counts as past every step).
func AtOrPast(step events.NodeState) func(nodeupgrade.State) bool {
	index := func(s events.NodeState) int {
		if i := slices.Index(events.NodeSteps, s); i >= 0 {
			return i
		}
		return len(events.NodeSteps)
	}
	return func(n nodeupgrade.State) bool { return n.Exists && index(n.State) >= index(step) }
}

// StalledSwitchover requests m on node and waits until the node stalls in
// switching-over: the caller has made a volume's target move hang (e.g. the
// simulator's InjectTargetMoveFailure).
func (e *Engine) StalledSwitchover(m events.ManagerRef, node string) {
	e.t.Helper()
	e.Request(m, node)
	e.WaitNode(m, node, 20*time.Second, "stalled at switching-over", func(n nodeupgrade.State) bool {
		return n.Stalled && n.State == events.NodeSwitchingOver
	})
}

// Completes waits until m ends and requires it completed.
func (e *Engine) Completes(m events.ManagerRef) manager.State {
	e.t.Helper()
	st := e.WaitManager(m, 30*time.Second, "a terminal state", manager.State.Terminal)
	require.Equal(e.t, events.ManagerCompleted, st.State, st.Message)
	e.SnapshotsRemoved(st)
	return st
}

// SnapshotsRemoved waits until the controller removed the snapshots of
// every node of the completed upgrade st.
func (e *Engine) SnapshotsRemoved(st manager.State) {
	e.t.Helper()
	for _, n := range st.Plan {
		e.WaitNode(st.Ref, n, 30*time.Second, "its snapshots removed", func(ns nodeupgrade.State) bool {
			return ns.Snapshots == nil || ns.Snapshots.Removed
		})
	}
}
