package replay_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/switchback-dev/switchback/aggregate/manager"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/eventstore"
	"github.com/switchback-dev/switchback/internal/enginetest"
	"github.com/switchback-dev/switchback/replay"
	"github.com/switchback-dev/switchback/sim"
)

func upgraded(t *testing.T) (*enginetest.Engine, events.ManagerRef) {
	cluster := sim.New(sim.Config{})
	for _, n := range []string{"n1", "n2", "n3"} {
		require.NoError(t, cluster.AddNode(n))
	}
	for i, a := range []string{"n1", "n2", ""} {
		require.NoError(t, cluster.AddVolume(fmt.Sprintf("vol-%d", i), sim.EngineV2, []string{"n1", "n2", "n3"}, a))
	}
	e := enginetest.Start(t, cluster, enginetest.Options{})
	ref := events.ManagerRef{Namespace: "longhorn-system", Name: "replayed", UID: "uid-r"}
	e.Request(ref)
	st := e.WaitManager(ref, 30*time.Second, "terminal", func(s manager.State) bool { return s.Terminal() })
	require.Equal(t, events.ManagerCompleted, st.State)
	return e, ref
}

func TestReplayRebuildsTheUpgrade(t *testing.T) {
	e, ref := upgraded(t)
	res, err := replay.Run(e.Context(), e.Store, replay.Options{})
	require.NoError(t, err)
	require.Len(t, res.Upgrades, 1)
	u := res.Upgrades[0]
	assert.Equal(t, e.Manager(ref), u.Manager, "replay folds exactly what the controller folds")
	for _, n := range u.Manager.Plan {
		assert.Equal(t, e.Node(ref, n), u.Nodes[n])
		assert.Equal(t, events.NodeCompleted, u.Nodes[n].State)
	}

	// Part-way through: the node in flight shows up as in flight.
	var mid uint64
	for _, env := range e.History(ref) {
		if d, ok := env.Data.(events.NodeStateChanged); ok && d.To == events.NodeSwitchingOver {
			mid = env.Sequence
			break
		}
	}
	require.NotZero(t, mid)
	part, err := replay.Run(e.Context(), e.Store, replay.Options{ScanOptions: eventstore.ScanOptions{UntilSeq: mid}})
	require.NoError(t, err)
	pu := part.Upgrades[0]
	assert.Equal(t, events.ManagerUpgrading, pu.Manager.State)
	require.NotEmpty(t, pu.Manager.UpgradingNode)
	assert.Equal(t, events.NodeSwitchingOver, pu.Nodes[pu.Manager.UpgradingNode].State)
	assert.Equal(t, mid, part.LastSequence)
}

func TestReplayOutputs(t *testing.T) {
	e, _ := upgraded(t)
	res, err := replay.Run(e.Context(), e.Store, replay.Options{Manager: "replayed", Namespace: "longhorn-system"})
	require.NoError(t, err)
	for _, format := range []string{"table", "json", "yaml"} {
		t.Run(format, func(t *testing.T) {
			var buf bytes.Buffer
			require.NoError(t, res.Write(&buf, format))
			switch format {
			case "table":
				assert.Contains(t, buf.String(), "longhorn-system/replayed")
				assert.Contains(t, buf.String(), "completed")
			case "json":
				var views []replay.View
				require.NoError(t, json.Unmarshal(buf.Bytes(), &views))
				require.Len(t, views, 1)
				assert.Equal(t, events.ManagerCompleted, views[0].State)
				assert.Len(t, views[0].Nodes, 3)
			case "yaml":
				var views []replay.View
				require.NoError(t, yaml.Unmarshal(buf.Bytes(), &views))
				assert.Equal(t, "replayed", views[0].Name)
			}
		})
	}
	assert.Error(t, res.Write(&bytes.Buffer{}, "xml"))

	none, err := replay.Run(e.Context(), e.Store, replay.Options{Manager: "nobody"})
	require.NoError(t, err)
	assert.Empty(t, none.Upgrades)
}

func TestHistoryLinesDescribeEveryEvent(t *testing.T) {
	e, ref := upgraded(t)
	for _, env := range e.History(ref) {
		l := replay.Describe(env)
		assert.NotEmpty(t, l.What, "%s", env.Type())
		assert.NotContains(t, l.What, "io.switchback", "every type has a readable line")
		assert.NotEmpty(t, l.String())
	}
}
