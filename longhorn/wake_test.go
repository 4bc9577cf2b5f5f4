package longhorn_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/aggregate/nodeupgrade"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/sim"
	"github.com/switchback-dev/switchback/test/harness/enginetest"
)

// The adapter's change signal fires on what its informers deliver from the
// apiserver's watch: objects Longhorn (the simulated manager) writes.
func TestPlaneSignalsWatchedChanges(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, s *sim.Sim)
	}{
		{"a node turning NotReady", func(t *testing.T, s *sim.Sim) { require.NoError(t, s.InjectNodeNotReady("n2")) }},
		{"a replica failing", func(t *testing.T, s *sim.Sim) { require.NoError(t, s.FailReplica(t.Context(), "vol-4", "vol-4-r-1")) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := storageLayout(t, sim.Config{})
			c := newCluster(t, s)
			ch := c.plane.Changed()
			tc.change(t, s)
			c.mgr.Kick()
			select {
			case <-ch:
			case <-time.After(20 * time.Second):
				t.Fatal("no change signalled")
			}
		})
	}
}

// TestStepWakesOnAWatchedChange: a node held in switching-over is reported
// stalled (its deadline wakes the step), then the switch-over is healed in
// Longhorn; with an hour's resync the upgrade completes only because the
// watch event wakes the step.
func TestStepWakesOnAWatchedChange(t *testing.T) {
	s, _ := storageLayout(t, latencies)
	require.NoError(t, s.InjectTargetMoveFailure("vol-0"))
	c := newCluster(t, s)
	e := enginetest.Start(t, c.plane, enginetest.Options{Resync: time.Hour, StallAfter: 50 * time.Millisecond, FailAfter: time.Hour})
	m := ref("wake")
	e.Request(m, "n1")
	e.WaitNode(m, "n1", 20*time.Second, "stalled at switching-over", func(n nodeupgrade.State) bool {
		return n.Stalled && n.State == events.NodeSwitchingOver
	})
	require.NoError(t, s.HealTargetMoveFailure("vol-0"))
	c.mgr.Kick()
	final := e.WaitManager(m, 30*time.Second, "a terminal state", terminal)
	assert.Equal(t, events.ManagerCompleted, final.State, final.Message)
	assert.Zero(t, s.IOStats().Failed, "%s", s.IOStats())
}
