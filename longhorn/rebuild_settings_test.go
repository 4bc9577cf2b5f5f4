package longhorn_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/precheck"
	"github.com/switchback-dev/switchback/sim"
	"github.com/switchback-dev/switchback/test/harness/enginetest"
)

// TestFastReplicaRebuildOffIsRefused: with Longhorn's
// fast-replica-rebuild-enabled false for v2 (as the simulated manager
// writes it), the adapter reads that Longhorn would reuse no failed v2
// replica, and the upgrade is refused before any node is touched, saying
// what to set.
func TestFastReplicaRebuildOffIsRefused(t *testing.T) {
	s := sim.New(sim.Config{LonghornVersion: "v1.12.1", Profile: dataplane.ProfileV112, NoFastReplicaRebuild: true})
	for _, n := range []string{"node-1", "node-2", "node-3"} {
		require.NoError(t, s.AddNode(n))
	}
	require.NoError(t, s.AddVolumeSpec(sim.VolumeSpec{Name: "vol-1", ReplicasOn: []string{"node-1", "node-2"}, AttachedTo: "node-3", EngineOn: "node-1"}))
	c := newCluster(t, s)
	v, err := c.plane.Volume(c.ctx, "vol-1")
	require.NoError(t, err)
	assert.True(t, v.NoReplicaReuse, "read from the setting")

	e := enginetest.Start(t, c.plane, enginetest.Options{})
	m := ref("no-fast-rebuild")
	e.Request(m)
	st := e.WaitManager(m, 30*time.Second, "a terminal state", terminal)
	require.Equal(t, events.ManagerError, st.State, st.Message)
	for _, p := range st.Prechecks {
		if p.Check == precheck.FailedReplicasReusable {
			assert.False(t, p.Passed)
			assert.Equal(t, precheck.ReasonFastReplicaRebuildDisabled, p.Reason)
			assert.Contains(t, p.Message, `{"v1":"true","v2":"true"}`)
		}
	}
	assert.Empty(t, st.Nodes, "no node was touched")
	actions, _ := s.ActionLog()
	assert.Empty(t, actions, "the cluster was not touched")
}
