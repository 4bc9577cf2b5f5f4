package orchestrator_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/aggregate/manager"
	"github.com/switchback-dev/switchback/aggregate/nodeupgrade"
	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/sim"
	"github.com/switchback-dev/switchback/test/harness/enginetest"
)

// firstNodeStuck makes the first node of an upgrade of cluster wait in
// switching-over (every attached volume's switch-over fails until healed)
// and returns that node once it does, with the function that heals it: a
// change made in between lands while the node is in flight, whatever the
// machine's speed.
func firstNodeStuck(t *testing.T, cluster *sim.Sim, e *enginetest.Engine, m events.ManagerRef) (string, func()) {
	t.Helper()
	vols, err := cluster.Volumes(e.Context())
	require.NoError(t, err)
	var stuck []string
	for _, v := range vols {
		if v.Attached() {
			require.NoError(t, cluster.InjectTargetMoveFailure(v.Name))
			stuck = append(stuck, v.Name)
		}
	}
	e.Request(m, "n1", "n2", "n3")
	first := e.WaitManager(m, 20*time.Second, "a node in flight", func(s manager.State) bool { return s.UpgradingNode != "" }).UpgradingNode
	e.WaitNode(m, first, 20*time.Second, "stuck switching over", func(n nodeupgrade.State) bool {
		return n.State == events.NodeSwitchingOver && n.Stalled
	})
	return first, func() {
		for _, v := range stuck {
			require.NoError(t, cluster.HealTargetMoveFailure(v))
		}
	}
}

// Longhorn's own upgrader switched on mid-upgrade: the node in flight
// finishes, no new node starts and the upgrade is held with the reason
// until it is off again; then it goes on and completes.
func TestOtherUpgraderSwitchedOnMidUpgradeHoldsBeforeTheNextNode(t *testing.T) {
	cluster := slowLayout(t)
	e := enginetest.Start(t, cluster, enginetest.Options{})
	m := ref("held")
	first, heal := firstNodeStuck(t, cluster, e, m)
	cluster.SetLonghornUpgrader(dataplane.LonghornUpgrader{Settings: map[string]string{dataplane.SettingIMAutoUpgrade: `{"v1":"false","v2":"true"}`}})
	heal()

	held := e.WaitManager(m, 30*time.Second, "held", func(s manager.State) bool { return s.Held != nil && s.UpgradingNode == "" })
	assert.Equal(t, events.ManagerUpgrading, held.State, "held, not error")
	assert.Equal(t, events.NodeCompleted, held.Nodes[first].State, "the node in flight finished")
	assert.Len(t, held.Nodes, 1, "no new node started")
	assert.Equal(t, "OtherUpgraderActive", held.Held.Reason)
	assert.Contains(t, held.Message, `; held, no new node starts: Longhorn's own instance-manager upgrader would race this upgrade: setting allow-instance-manager-automatic-upgrade is`)

	// The other setting switched on too: the re-check while held updates
	// the hold's message, and still starts nothing.
	cluster.SetLonghornUpgrader(dataplane.LonghornUpgrader{Settings: map[string]string{
		dataplane.SettingIMAutoUpgrade: `{"v1":"false","v2":"true"}`, dataplane.SettingV2IMAutoUpgrade: "true"}})
	updated := e.WaitManager(m, 30*time.Second, "the hold updated", func(s manager.State) bool {
		return s.Held != nil && strings.Contains(s.Held.Message, dataplane.SettingV2IMAutoUpgrade)
	})
	assert.Len(t, updated.Nodes, 1, "still no new node")
	assert.Equal(t, held.Held.Since, updated.Held.Since, "the same hold")

	cluster.SetLonghornUpgrader(dataplane.LonghornUpgrader{Settings: map[string]string{dataplane.SettingIMAutoUpgrade: `{"v1":"false","v2":"false"}`}})
	final := e.WaitManager(m, 30*time.Second, "a terminal state", terminal)
	require.Equal(t, events.ManagerCompleted, final.State, final.Message)
	released, ok := enginetest.LastOf[events.UpgradeReleased](e.History(m))
	require.True(t, ok, "the history shows the release")
	assert.Equal(t, "Longhorn's own instance-manager upgrader is off and idle (allow-instance-manager-automatic-upgrade)", released.Message)
	assert.Zero(t, cluster.IOStats().Failed)
}

// A held upgrade is cancelled like any: deleting the manager ends it at
// once (no node is in flight).
func TestHeldUpgradeIsCancelled(t *testing.T) {
	cluster := slowLayout(t)
	e := enginetest.Start(t, cluster, enginetest.Options{})
	m := ref("held-cancel")
	_, heal := firstNodeStuck(t, cluster, e, m)
	cluster.SetLonghornUpgrader(dataplane.LonghornUpgrader{Settings: map[string]string{dataplane.SettingV2IMAutoUpgrade: "true"}})
	heal()
	e.WaitManager(m, 30*time.Second, "held", func(s manager.State) bool { return s.Held != nil && s.UpgradingNode == "" })
	e.Cancel(m)
	final := e.WaitManager(m, 30*time.Second, "a terminal state", terminal)
	assert.Equal(t, events.ManagerCancelled, final.State, final.Message)
	assert.Len(t, final.Nodes, 1, "no node started after the hold")
}

// failingUpgrader is a data plane whose read of Longhorn's own upgrader
// fails while failing is set (an RBAC rule missing, the apiserver away).
type failingUpgrader struct {
	dataplane.DataPlane
	failing atomic.Bool
}

func (f *failingUpgrader) LonghornUpgrader(ctx context.Context) (dataplane.LonghornUpgrader, error) {
	if f.failing.Load() {
		return dataplane.LonghornUpgrader{}, errors.New(`instancemanagerupgrades.longhorn.io is forbidden`)
	}
	return f.DataPlane.LonghornUpgrader(ctx)
}

// Longhorn's own upgrader unreadable before the next node: the outcome of
// the node in flight is recorded, the upgrade is held visibly (fail
// closed) and goes on once the read answers again.
func TestUnreadableUpgraderHoldsThenResumes(t *testing.T) {
	cluster := slowLayout(t)
	dp := &failingUpgrader{DataPlane: cluster}
	e := enginetest.Start(t, dp, enginetest.Options{})
	m := ref("unreadable")
	first, heal := firstNodeStuck(t, cluster, e, m)
	dp.failing.Store(true)
	heal()
	held := e.WaitManager(m, 30*time.Second, "held", func(s manager.State) bool { return s.Held != nil && s.UpgradingNode == "" })
	assert.Equal(t, "OtherUpgraderUnknown", held.Held.Reason)
	assert.Contains(t, held.Held.Message, "cannot be read (instancemanagerupgrades.longhorn.io is forbidden)")
	assert.Equal(t, events.NodeCompleted, held.Nodes[first].State, "the node's outcome is recorded")
	dp.failing.Store(false)
	final := e.WaitManager(m, 30*time.Second, "a terminal state", terminal)
	require.Equal(t, events.ManagerCompleted, final.State, final.Message)
}
