package nodeworker_test

import (
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

// unsignalled hides the simulator's change signal: a data plane the worker
// must poll.
type unsignalled struct{ dataplane.DataPlane }

// silent is a data plane whose change signal never fires: a step waiting
// on it wakes only on the node's events, its deadlines and the resync.
type silent struct{ *sim.Sim }

func (silent) Changed() <-chan struct{} { return nil }

// hour is a resync (and stall or failure time) no test waits for: a step
// that proceeds was woken by something else.
const hour = time.Hour

// TestStepWakesOnDataPlaneChange holds a node in switching-over until it is
// reported stalled (the stall deadline wakes the step: nothing else would
// within the resync), then heals the move; with an hour's resync the node
// completes only if the change wakes the step.
func TestStepWakesOnDataPlaneChange(t *testing.T) {
	for _, tc := range []struct {
		name  string
		plane func(*sim.Sim) dataplane.DataPlane
		poll  time.Duration
	}{
		{"the simulator's signal", func(s *sim.Sim) dataplane.DataPlane { return s }, hour},
		{"a data plane without the signal is polled", func(s *sim.Sim) dataplane.DataPlane { return unsignalled{s} }, 5 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := sim.ThreeNodes(sim.Config{Profile: dataplane.ProfileInPlace})
			require.NoError(t, err)
			require.NoError(t, s.InjectTargetMoveFailure("vol-0"))
			e := enginetest.Start(t, tc.plane(s), enginetest.Options{Resync: hour, PollInterval: tc.poll, StallAfter: 50 * time.Millisecond, FailAfter: hour})
			m := ref("wake")
			e.StalledSwitchover(m, "n1")
			require.NoError(t, s.HealTargetMoveFailure("vol-0"))
			e.Completes(m)
		})
	}
}

// TestCancelWakesAWaitingStep: the orchestrator's cancel request, appended
// to the node's history, wakes a step that waits on a data plane which
// signals nothing.
func TestCancelWakesAWaitingStep(t *testing.T) {
	s, err := sim.ThreeNodes(sim.Config{Profile: dataplane.ProfileInPlace})
	require.NoError(t, err)
	require.NoError(t, s.InjectTargetMoveFailure("vol-0"))
	e := enginetest.Start(t, silent{s}, enginetest.Options{Resync: hour, StallAfter: 50 * time.Millisecond, FailAfter: hour})
	m := ref("wake-cancel")
	e.Request(m, "n1")
	e.WaitNode(m, "n1", 20*time.Second, "stalled at switching-over", func(n nodeupgrade.State) bool {
		return n.Stalled && n.State == events.NodeSwitchingOver
	})
	e.Cancel(m)
	st := e.WaitManager(m, 20*time.Second, "a terminal state", manager.State.Terminal)
	assert.Equal(t, events.ManagerCancelled, st.State, st.Message)
}
