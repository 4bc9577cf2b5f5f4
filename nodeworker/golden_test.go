package nodeworker_test

import (
	"context"
	"flag"
	"path/filepath"
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
	"github.com/switchback-dev/switchback/test/harness/goldentest"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// recorder writes down every change the workers ask of a data plane, in
// order: the sequence a reviewer reads in testdata/*.golden. A call
// repeating the line just before it (a wait asking again, as often as the
// timing makes it) is written once. The one exception to the order: a step
// takes or removes its volumes' snapshots several at once (apply.go,
// actAll), so each such phase is written sorted by volume, between the calls
// before and after it, which keep their order.
type recorder struct {
	goldentest.Lines
}

// plane is dp with its actions recorded.
func (r *recorder) plane(dp dataplane.DataPlane) dataplane.DataPlane {
	return dataplane.WithActions(dp, func(ctx context.Context, a dataplane.Action) error {
		err := a.Apply(ctx, dp)
		line := a.String()
		if err != nil {
			line += " → refused: " + err.Error()
		}
		if a.Call == dataplane.CallCreateSnapshot || a.Call == dataplane.CallDeleteSnapshot {
			r.AddSorted(string(a.Call), line)
		} else {
			r.AddUnlessRepeated(line)
		}
		return err
	})
}

// sortedNote heads every golden log, so that a reader of it knows which
// order is the workers' and which the recorder's.
const sortedNote = "# data-plane calls in order; the snapshot calls of one phase run at once and are listed sorted by volume"

func ref(name string) events.ManagerRef {
	return events.ManagerRef{Namespace: "longhorn-system", Name: name, UID: "uid-" + name}
}

// stalledOnVol0 has the move of vol-0's target hang, requests the upgrade
// name of n1 (which holds that target), and returns it once n1 stalls in
// switching-over.
func stalledOnVol0(t *testing.T, s *sim.Sim, e *enginetest.Engine, name string) events.ManagerRef {
	t.Helper()
	require.NoError(t, s.InjectTargetMoveFailure("vol-0"))
	m := ref(name)
	e.StalledSwitchover(m, "n1")
	return m
}

// TestGoldenActionLogs runs whole scenarios on the simulated cluster and
// compares the exact sequence of data-plane changes with
// testdata/<scenario>.golden (go test -run TestGoldenActionLogs -update
// rewrites them).
func TestGoldenActionLogs(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, s *sim.Sim, e *enginetest.Engine)
	}{
		{"three-node-upgrade", func(t *testing.T, _ *sim.Sim, e *enginetest.Engine) {
			m := ref("three")
			e.Request(m, "n1", "n2", "n3")
			e.Completes(m)
		}},
		{"stuck-volume-healed", func(t *testing.T, s *sim.Sim, e *enginetest.Engine) {
			m := stalledOnVol0(t, s, e, "stuck")
			require.NoError(t, s.HealTargetMoveFailure("vol-0"))
			e.Completes(m)
		}},
		{"cancel-at-switching-over", func(t *testing.T, s *sim.Sim, e *enginetest.Engine) {
			// The move of vol-0 hangs, so the cancel finds the node in
			// switching-over whatever the timing.
			m := stalledOnVol0(t, s, e, "cancel")
			e.Cancel(m)
			// Healed only once the node's history holds the cancel: the
			// worker then sees it before any later step can act (its next
			// append would conflict with it and load it).
			e.WaitNode(m, "n1", 20*time.Second, "cancel requested", func(n nodeupgrade.State) bool { return n.CancelRequested })
			require.NoError(t, s.HealTargetMoveFailure("vol-0"))
			st := e.WaitManager(m, 30*time.Second, "a terminal state", manager.State.Terminal)
			require.Equal(t, events.ManagerCancelled, st.State, st.Message)
		}},
		{"instance-manager-never-starts", func(t *testing.T, s *sim.Sim, e *enginetest.Engine) {
			require.NoError(t, s.InjectIMStartFailure("n1"))
			e.IMNeverStarts(ref("im"), "n1")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// No latency: each change the sim makes happens at the write,
			// so what a step observes, hence what it decides, does not
			// depend on the timing of its polls.
			s, err := sim.ThreeNodes(sim.Config{Profile: dataplane.ProfileInPlace})
			require.NoError(t, err)
			rec := &recorder{}
			rec.Add(sortedNote)
			e := enginetest.Start(t, rec.plane(s), enginetest.Options{StallAfter: 100 * time.Millisecond, FailAfter: time.Second})
			tc.run(t, s, e)
			assert.Zero(t, s.IOStats().FailedByActions(), "no I/O failed because of an action")

			goldentest.Compare(t, filepath.Join("testdata", tc.name+".golden"), rec.String(), *update, "the data-plane changes, in order (each phase of snapshot calls sorted by volume)")
		})
	}
}
