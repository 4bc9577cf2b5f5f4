package nodeworker_test

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"strings"
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

// recorder is a data plane that writes down every change the workers ask
// of it, in order: the sequence a reviewer reads in testdata/*.golden. A
// call repeating the line just before it (a wait asking again, as often as
// the timing makes it) is written once. The one exception to the order: a
// step takes or removes its volumes' snapshots several at once (apply.go,
// actAll), so each such phase is written sorted by volume, between the calls
// before and after it, which keep their order.
type recorder struct {
	dataplane.DataPlane
	goldentest.Lines
}

func (r *recorder) log(err error, format string, args ...any) error {
	r.AddUnlessRepeated(callLine(err, format, args...))
	return err
}

// callLine is the line of one call, with its refusal if any.
func callLine(err error, format string, args ...any) string {
	line := fmt.Sprintf(format, args...)
	if err != nil {
		line += " → refused: " + err.Error()
	}
	return line
}

// logSorted records a call of a concurrent phase, named by its first word
// (the call), in its sorted place within the phase.
func (r *recorder) logSorted(err error, format string, args ...any) error {
	call, _, _ := strings.Cut(format, " ")
	r.AddSorted(call, callLine(err, format, args...))
	return err
}

func (r *recorder) SetReplicaScheduling(ctx context.Context, node string, allow bool) error {
	return r.log(r.DataPlane.SetReplicaScheduling(ctx, node, allow), "SetReplicaScheduling %s allow=%t", node, allow)
}

func (r *recorder) CreateSnapshot(ctx context.Context, volume, name string) error {
	return r.logSorted(r.DataPlane.CreateSnapshot(ctx, volume, name), "CreateSnapshot %s %s", volume, name)
}

func (r *recorder) DeleteSnapshot(ctx context.Context, volume, name string) error {
	return r.logSorted(r.DataPlane.DeleteSnapshot(ctx, volume, name), "DeleteSnapshot %s %s", volume, name)
}

func (r *recorder) FailReplica(ctx context.Context, volume, replica string) error {
	return r.log(r.DataPlane.FailReplica(ctx, volume, replica), "FailReplica %s %s", volume, replica)
}

func (r *recorder) StopReplica(ctx context.Context, volume, replica string) error {
	return r.log(r.DataPlane.StopReplica(ctx, volume, replica), "StopReplica %s %s", volume, replica)
}

func (r *recorder) SetEngineNode(ctx context.Context, volume, node string) error {
	return r.log(r.DataPlane.SetEngineNode(ctx, volume, node), "SetEngineNode %s %q", volume, node)
}

func (r *recorder) DeleteInstanceManager(ctx context.Context, name string) error {
	return r.log(r.DataPlane.DeleteInstanceManager(ctx, name), "DeleteInstanceManager %s", name)
}

func (r *recorder) SetInstanceManagerImage(ctx context.Context, name, image string) error {
	return r.log(r.DataPlane.SetInstanceManagerImage(ctx, name, image), "SetInstanceManagerImage %s %s", name, image)
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
			st := e.WaitManager(m, 30*time.Second, "a terminal state", manager.State.Terminal)
			require.Equal(t, events.ManagerCompleted, st.State, st.Message)
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
			rec := &recorder{DataPlane: s}
			rec.Add(sortedNote)
			e := enginetest.Start(t, rec, enginetest.Options{StallAfter: 100 * time.Millisecond, FailAfter: time.Second})
			tc.run(t, s, e)
			assert.Zero(t, s.IOStats().FailedByActions(), "no I/O failed because of an action")

			goldentest.Compare(t, filepath.Join("testdata", tc.name+".golden"), rec.String(), *update, "the data-plane changes, in order (each phase of snapshot calls sorted by volume)")
		})
	}
}
