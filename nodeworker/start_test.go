package nodeworker_test

import (
	"context"
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
	"github.com/switchback-dev/switchback/topology"
)

// TestStartReadsWhatTheManagerDecidedLast: a node's start command waits in
// its queue while no worker runs. When the manager's last decision is still
// that node's scheduling, the worker starts the node; when the upgrade was
// cancelled meanwhile, the worker consumes the command and starts nothing.
func TestStartReadsWhatTheManagerDecidedLast(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cancel bool
	}{
		{"scheduled last: the node starts", false},
		{"cancelled since: nothing starts", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := sim.ThreeNodes(sim.Config{Profile: dataplane.ProfileInPlace})
			require.NoError(t, err)
			e := enginetest.Start(t, s, enginetest.Options{NoWorkers: true, Resync: hour})
			m := ref("start")
			e.Request(m)
			first := e.WaitManager(m, 30*time.Second, "a node scheduled", func(st manager.State) bool { return st.UpgradingNode != "" }).UpgradingNode
			if tc.cancel {
				e.Cancel(m)
				e.WaitManager(m, 30*time.Second, "cancelled", func(st manager.State) bool { return st.Terminal() })
			}
			e.StartWorker(first)
			if !tc.cancel {
				e.WaitNode(m, first, 30*time.Second, "started", func(st nodeupgrade.State) bool { return st.Exists })
				return
			}
			// The worker creates its consumer as it starts.
			require.Eventually(t, func() bool {
				cons, err := e.JS.Consumer(context.Background(), topology.CommandStream, topology.NodeConsumer(first))
				if err != nil {
					return false
				}
				info, err := cons.Info(context.Background())
				return err == nil && info.Delivered.Consumer >= 1 && info.NumAckPending == 0 && info.NumPending == 0
			}, 30*time.Second, 10*time.Millisecond, "the worker consumed the start command")
			assert.False(t, e.Node(m, first).Exists, "no node upgrade started after the cancel")
			for _, env := range e.History(m) {
				assert.NotEqual(t, events.TypeNodeUpgradeStarted, env.Type(), "seq %d", env.Sequence)
			}
		})
	}
}
