package sim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/dataplane"
)

// Longhorn v1.12 replaces an old-image IM by itself as soon as it runs
// nothing, and keeps it while it runs an engine, an initiator or a replica;
// the default-image IM waits, stopped, meanwhile.
func TestV112_LonghornReplacesAnIdleOldImageIM(t *testing.T) {
	const imStart = 20 * time.Second
	s, fc := cluster3(t, Config{IMStartLatency: imStart},
		VolumeSpec{Name: "vol-1", ReplicasOn: []string{"node-2", "node-3"}, AttachedTo: "node-3", EngineOn: "node-2"})
	ims, err := s.InstanceManagers(ctx, "")
	require.NoError(t, err)
	require.Equal(t, []dataplane.InstanceManager{
		{Name: "im-node-1-2", Node: "node-1", Image: NewIMImage, DataEngine: "v2", State: dataplane.IMStarting},
		{Name: "im-node-2-1", Node: "node-2", Image: OldIMImage, DataEngine: "v2", State: dataplane.IMRunning, Engines: 1, Replicas: 1},
		{Name: "im-node-2-2", Node: "node-2", Image: NewIMImage, DataEngine: "v2", State: dataplane.IMStopped},
		{Name: "im-node-3-1", Node: "node-3", Image: OldIMImage, DataEngine: "v2", State: dataplane.IMRunning, Frontends: 1, Replicas: 1},
		{Name: "im-node-3-2", Node: "node-3", Image: NewIMImage, DataEngine: "v2", State: dataplane.IMStopped},
	}, ims, "node-1 runs nothing: replaced at once")
	fc.Advance(imStart)
	require.Equal(t, dataplane.IMRunning, currentIM(t, s, "node-1").State)

	// node-2 empties: its engine moves to node-1, its replica is failed.
	require.NoError(t, s.SetReplicaScheduling(ctx, "node-2", false))
	retire(t, s, "vol-1", "vol-1-r-1")
	require.Equal(t, "im-node-2-1", currentIM(t, s, "node-2").Name, "the engine still runs there")
	require.NoError(t, s.SetEngineNode(ctx, "vol-1", "node-1"))
	im := currentIM(t, s, "node-2")
	assert.Equal(t, "im-node-2-2", im.Name)
	assert.Equal(t, dataplane.IMStarting, im.State)
	fc.Advance(imStart)
	assert.Equal(t, dataplane.IMRunning, currentIM(t, s, "node-2").State)
	require.Zero(t, s.IOStats().Failed, s.IOStats())
}

// On v1.12 the initiator lives in the IM of the attached node: cutting that
// IM faults the volume even though its target is elsewhere.
func TestV112_CuttingTheIMOfAnAttachedNodeFaultsItsVolumes(t *testing.T) {
	s, _ := cluster3(t, Config{IMStartLatency: time.Minute},
		VolumeSpec{Name: "vol-1", ReplicasOn: []string{"node-2", "node-3"}, AttachedTo: "node-1", EngineOn: "node-2"})
	require.NoError(t, s.CutInstanceManager("im-node-1-1"))
	st := s.IOStats()
	require.NotZero(t, st.FailedByActions(), st.String())
	assert.Equal(t, "initiator on node-1 lost: instance manager im-node-1-1 was stopped", st.Failures[0].Reason)
	assert.Equal(t, "im-node-1-1", st.Failures[0].InstanceManager)
	s.Settle()
	assert.NotZero(t, s.CheckIO(), "the initiator does not come back with the new IM")
	require.Equal(t, UnsafeInitiatorDown, s.Unsafe("")[0].Kind)

	require.NoError(t, s.DetachVolume("vol-1"))
	s.Settle() // node-2 ran only the engine: Longhorn replaces its IM
	require.NoError(t, s.AttachVolume("vol-1", "node-1"))
	assert.Zero(t, s.CheckIO(), "attached again, in the new IM")
}

// On ProfileInPlace the initiator is a kernel client: re-imaging the
// attached node's IM keeps I/O once the target is elsewhere, and cuts it
// when the target is left there.
func TestInPlace_InitiatorSurvivesTheIMRestart(t *testing.T) {
	for _, tc := range []struct {
		name     string
		engineOn string
		fails    bool
	}{
		{"target away", "node-2", false},
		{"target left on the IM", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := cluster3(t, Config{Profile: dataplane.ProfileInPlace, IMStartLatency: time.Minute},
				VolumeSpec{Name: "vol-1", ReplicasOn: []string{"node-2", "node-3"}, AttachedTo: "node-1", EngineOn: tc.engineOn})
			require.NoError(t, s.SetInstanceManagerImage(ctx, "im-node-1-1", NewIMImage))
			im := currentIM(t, s, "node-1")
			assert.Equal(t, "im-node-1-1", im.Name, "the same IM restarts")
			assert.Equal(t, dataplane.IMStarting, im.State)
			s.Settle()
			st := s.IOStats()
			if !tc.fails {
				require.Zero(t, st.Failed, st.String())
				return
			}
			require.NotZero(t, st.FailedByActions())
			assert.Equal(t, "target on node-1 lost: instance manager im-node-1-1 was stopped", st.Failures[0].Reason)
		})
	}
}

// The proposal's test-plan layouts (3 nodes, every node upgraded): on the
// in-place profile the refused ones lose I/O when walked and the accepted
// ones do not; on v1.12 any node holding an initiator loses it, while a
// node holding only targets and replicas is upgraded live.
func TestTestPlanLayouts(t *testing.T) {
	all := []string{"node-1", "node-2", "node-3"}
	for _, tc := range []struct {
		name    string
		vols    []VolumeSpec
		loseIOs bool
	}{
		{"refused: single replica on node 1, engine on node 1", []VolumeSpec{
			{Name: "vol-1", ReplicasOn: []string{"node-1"}, AttachedTo: "node-1"},
		}, true},
		{"refused: single replica on node 2, engine on node 1", []VolumeSpec{
			{Name: "vol-1", ReplicasOn: []string{"node-2"}, AttachedTo: "node-1"},
		}, true},
		{"accepted: 3 replicas each, engines all on node 1", []VolumeSpec{
			{Name: "vol-1", ReplicasOn: all, AttachedTo: "node-1"},
			{Name: "vol-2", ReplicasOn: all, AttachedTo: "node-1"},
			{Name: "vol-3", ReplicasOn: all, AttachedTo: "node-1"},
		}, false},
		{"accepted: replicas only on nodes 2 and 3, engines on node 1", []VolumeSpec{
			{Name: "vol-1", ReplicasOn: []string{"node-2", "node-3"}, AttachedTo: "node-1"},
			{Name: "vol-2", ReplicasOn: []string{"node-2", "node-3"}, AttachedTo: "node-1"},
			{Name: "vol-3", ReplicasOn: []string{"node-2", "node-3"}, AttachedTo: "node-1"},
		}, false},
		{"accepted: engines spread over nodes 1, 2 and 3", []VolumeSpec{
			{Name: "vol-1", ReplicasOn: all, AttachedTo: "node-1"},
			{Name: "vol-2", ReplicasOn: all, AttachedTo: "node-2"},
			{Name: "vol-3", ReplicasOn: all, AttachedTo: "node-3"},
		}, false},
	} {
		t.Run("in-place/"+tc.name, func(t *testing.T) {
			s, _ := cluster3(t, inPlace, tc.vols...)
			for _, n := range all {
				upgradeNode(t, s, n)
			}
			st := s.IOStats()
			if tc.loseIOs {
				require.NotZero(t, st.FailedByActions(), st.String())
				require.Contains(t, st.Failures[0].Reason, "no healthy replica")
				return
			}
			require.Zero(t, st.Failed, "%s\n%s", st, s)
			require.Empty(t, s.Unsafe(""))
			for _, n := range all {
				require.Equal(t, NewIMImage, currentIM(t, s, n).Image)
			}
			for _, v := range tc.vols {
				got := vol(t, s, v.Name)
				require.Equal(t, dataplane.RobustnessHealthy, got.Robustness)
				require.Equal(t, v.AttachedTo, got.TargetNode)
				require.Empty(t, got.EngineNode)
			}
		})
	}
	t.Run("v1.12/a node holding initiators loses them", func(t *testing.T) {
		s, _ := cluster3(t, Config{}, VolumeSpec{Name: "vol-1", ReplicasOn: all, AttachedTo: "node-1"})
		upgradeNode(t, s, "node-1")
		require.Contains(t, s.IOStats().Failures[0].Reason, "initiator on node-1 lost")
	})
	t.Run("v1.12/nodes holding only targets and replicas are upgraded live", func(t *testing.T) {
		s, _ := cluster3(t, Config{},
			VolumeSpec{Name: "vol-1", ReplicasOn: []string{"node-2", "node-3"}, AttachedTo: "node-1", EngineOn: "node-2"},
			VolumeSpec{Name: "vol-2", ReplicasOn: []string{"node-2", "node-3"}, AttachedTo: "node-1", EngineOn: "node-3"})
		upgradeNode(t, s, "node-2")
		upgradeNode(t, s, "node-3")
		st := s.IOStats()
		require.Zero(t, st.Failed, "%s\n%s", st, s)
		require.Empty(t, s.Unsafe(""))
		for _, n := range []string{"node-2", "node-3"} {
			require.Equal(t, NewIMImage, currentIM(t, s, n).Image)
		}
		assert.Equal(t, "node-2", vol(t, s, "vol-1").TargetNode)
		assert.Equal(t, "node-3", vol(t, s, "vol-2").TargetNode)
	})
}
