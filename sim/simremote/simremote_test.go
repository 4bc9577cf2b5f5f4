package simremote_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/aggregate/manager"
	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/natsembed/natstest"
	"github.com/switchback-dev/switchback/sim"
	"github.com/switchback-dev/switchback/sim/simremote"
	"github.com/switchback-dev/switchback/test/harness/enginetest"
	"github.com/switchback-dev/switchback/topology"
)

func TestRemoteClientMatchesTheSimulator(t *testing.T) {
	srv := natstest.Start(t)
	nc, _ := natstest.Connect(t, srv)
	s := sim.Random(3, sim.RandomOptions{Nodes: 4, Volumes: 10})
	server, err := simremote.Serve(nc, topology.SimPrefix, s)
	require.NoError(t, err)
	defer server.Stop()
	c := simremote.NewClient(nc, topology.SimPrefix)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	wantNodes, _ := s.Nodes(ctx)
	gotNodes, err := c.Nodes(ctx)
	require.NoError(t, err)
	assert.Equal(t, wantNodes, gotNodes)
	wantVols, _ := s.Volumes(ctx)
	gotVols, err := c.Volumes(ctx)
	require.NoError(t, err)
	assert.Equal(t, wantVols, gotVols)
	gotCounts, err := c.TargetCounts(ctx)
	require.NoError(t, err)
	require.NotEmpty(t, gotCounts)
	assert.Equal(t, dataplane.CountTargets(wantVols), gotCounts)

	_, err = c.Node(ctx, "ghost")
	assert.ErrorIs(t, err, dataplane.ErrNotFound, "sentinels survive the wire")
	require.NoError(t, c.SetReplicaScheduling(ctx, "node-1", false))
	n, err := s.Node(ctx, "node-1")
	require.NoError(t, err)
	assert.False(t, n.AllowScheduling, "actions reach the simulator")
	p, err := c.Platform(ctx)
	require.NoError(t, err)
	assert.Equal(t, dataplane.ProfileV112, p.Profile)

	up := dataplane.LonghornUpgrader{Settings: map[string]string{dataplane.SettingV2IMAutoUpgrade: "true"},
		Controls: []dataplane.UpgradeControl{{Name: "control", CurrentNode: "node-2", Nodes: map[string]string{"node-2": "in-progress"}}},
		Upgrades: []dataplane.IMUpgrade{{Name: "upgrade-node-2", Node: "node-2", State: "relocating-engines"}}}
	s.SetLonghornUpgrader(up)
	gotUp, err := c.LonghornUpgrader(ctx)
	require.NoError(t, err)
	assert.Equal(t, up, gotUp, "Longhorn's own upgrader as the simulator shows it")
}

// A whole upgrade whose workers reach the cluster only over NATS (on the
// in-place profile: every node holds initiators).
func TestUpgradeThroughTheRemoteClient(t *testing.T) {
	s := sim.New(sim.Config{Profile: dataplane.ProfileInPlace})
	for _, n := range []string{"n1", "n2", "n3"} {
		require.NoError(t, s.AddNode(n))
	}
	for i, a := range []string{"n1", "n2", "n3"} {
		require.NoError(t, s.AddVolume(fmt.Sprintf("v%d", i), sim.EngineV2, []string{"n1", "n2", "n3"}, a))
	}
	srv := natstest.Start(t)
	nc, _ := natstest.Connect(t, srv)
	server, err := simremote.Serve(nc, topology.SimPrefix, s)
	require.NoError(t, err)
	defer server.Stop()
	e := enginetest.Start(t, simremote.NewClient(nc, topology.SimPrefix), enginetest.Options{})
	ref := events.ManagerRef{Namespace: "ns", Name: "remote", UID: "u"}
	e.Request(ref)
	st := e.WaitManager(ref, 30*time.Second, "terminal", func(s manager.State) bool { return s.Terminal() })
	assert.Equal(t, events.ManagerCompleted, st.State, st.Message)
	assert.Zero(t, s.IOStats().Failed)
}
