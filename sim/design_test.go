package sim

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/dataplane"
)

// The design in one test: restarting a node's IM cuts the I/O of a volume
// whose target lives there, unless the target is moved to another node
// first; the initiator, a kernel NVMe-oF initiator, survives the restart.
func TestDesign_MovingTheTargetAwayBeforeDeletingTheIMKeepsIO(t *testing.T) {
	layout := VolumeSpec{Name: "vol-1", ReplicasOn: []string{"node-1", "node-2", "node-3"}, AttachedTo: "node-1"}

	t.Run("target left on the IM: I/O fails", func(t *testing.T) {
		s, _ := cluster3(t, Config{}, layout)
		require.NoError(t, s.DeleteInstanceManager(ctx, "im-node-1-1"))

		st := s.IOStats()
		require.NotZero(t, st.FailedByActions(), st.String())
		require.Equal(t, "vol-1", st.Failures[0].Volume)
		require.Equal(t, "im-node-1-1", st.Failures[0].InstanceManager)
		require.Contains(t, st.Failures[0].Reason, "instance manager im-node-1-1 stopped")
		require.False(t, st.Failures[0].Injected)
	})

	t.Run("target moved away first: no I/O fails", func(t *testing.T) {
		s, _ := cluster3(t, Config{}, layout)
		require.NoError(t, s.SetTargetNode(ctx, "vol-1", "node-2"))
		require.Equal(t, "node-2", vol(t, s, "vol-1").TargetNode)

		require.NoError(t, s.DeleteInstanceManager(ctx, "im-node-1-1"))
		require.Equal(t, dataplane.IMRunning, currentIM(t, s, "node-1").State)
		require.NoError(t, s.SetTargetNode(ctx, "vol-1", ""))
		v := vol(t, s, "vol-1")
		require.Equal(t, "node-1", v.TargetNode)
		require.Equal(t, NewIMImage, v.Image)

		st := s.IOStats()
		require.NotZero(t, st.Issued)
		require.Zero(t, st.Failed, st.String())
		require.Empty(t, s.Unsafe(""))
	})
}

// SPEC.md's test plan layouts (3 nodes): the refused ones lose I/O when every
// node is upgraded by the design's steps, the accepted ones do not.
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
		t.Run(tc.name, func(t *testing.T) {
			s, _ := cluster3(t, Config{}, tc.vols...)
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
				require.Empty(t, got.DesiredTargetNode)
			}
		})
	}
}
