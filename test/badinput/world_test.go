package badinput_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/switchback-dev/switchback/aggregate/manager"
	"github.com/switchback-dev/switchback/aggregate/nodeupgrade"
	"github.com/switchback-dev/switchback/api/v1beta2"
	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/eventstore"
	"github.com/switchback-dev/switchback/projector"
	"github.com/switchback-dev/switchback/sim"
	"github.com/switchback-dev/switchback/test/harness/enginetest"
	"github.com/switchback-dev/switchback/test/harness/managertest"
)

// world is a test's whole system: Kubernetes (a namespace on the package's
// apiserver), the upgrade engine (embedded NATS, orchestrator, one worker
// per node) over a simulated cluster, and optionally a projector writing
// what users see.
type world struct {
	t   *testing.T
	ctx context.Context
	*kube
	e    *enginetest.Engine
	sim  *sim.Sim
	proj *projector.Projector
}

func newWorld(t *testing.T, cluster *sim.Sim, opts enginetest.Options) *world {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 80*time.Second)
	t.Cleanup(cancel)
	return &world{t: t, ctx: ctx, kube: newKube(t, ctx), e: enginetest.Start(t, cluster, opts), sim: cluster}
}

// threeNodes is a 3-node v2 cluster whose every node hosts targets, plus a
// detached volume; latencies make each step last a little.
func threeNodes(t *testing.T) *sim.Sim {
	t.Helper()
	s := sim.New(sim.Config{Profile: dataplane.ProfileInPlace, TargetMoveLatency: 10 * time.Millisecond, IMStartLatency: 20 * time.Millisecond, RebuildLatency: 10 * time.Millisecond})
	for _, n := range []string{"n1", "n2", "n3"} {
		require.NoError(t, s.AddNode(n))
	}
	for i, v := range []struct {
		on       []string
		attached string
	}{
		{[]string{"n1", "n2", "n3"}, "n1"},
		{[]string{"n1", "n2"}, "n1"},
		{[]string{"n2", "n3"}, "n2"},
		{[]string{"n1", "n3"}, "n3"},
		{[]string{"n1", "n2", "n3"}, ""},
	} {
		require.NoError(t, s.AddVolume(fmt.Sprintf("vol-%d", i), sim.EngineV2, v.on, v.attached))
	}
	return s
}

// stalledUpgrade is where most cases start: threeNodes with vol-0's target
// move failing, a world with a projector, and the upgrade name requested
// and running until n1 (which holds vol-0's target and is planned last)
// stalls in switching-over. It stays there until the test heals the move
// (w.sim.HealTargetMoveFailure("vol-0")).
func stalledUpgrade(t *testing.T, name string) (*world, events.ManagerRef) {
	t.Helper()
	cluster := threeNodes(t)
	require.NoError(t, cluster.InjectTargetMoveFailure("vol-0"))
	w := newWorld(t, cluster, enginetest.Options{StallAfter: 200 * time.Millisecond})
	w.startProjector()
	ref := w.createManager(name)
	w.e.Request(ref)
	w.e.WaitNode(ref, "n1", 20*time.Second, "stalled in switching-over", func(n nodeupgrade.State) bool {
		return n.Stalled && n.State == events.NodeSwitchingOver
	})
	return w, ref
}

// createManager creates the DataEngineUpgradeManager in Kubernetes and
// returns its identity as the intake would record it.
func (w *world) createManager(name string, nodes ...string) events.ManagerRef {
	w.t.Helper()
	return managertest.Create(w.t, w.ctx, w.kc, w.ns, name, nodes...)
}

// startProjector runs a projector until the test ends.
func (w *world) startProjector() {
	w.t.Helper()
	p, err := projector.New(projector.Config{
		Store: w.e.Store, Client: w.kc, Events: w.cs, Log: testLog(w.t),
		AckWait: 5 * time.Second, RetryBase: 10 * time.Millisecond, RetryMax: 200 * time.Millisecond,
	})
	require.NoError(w.t, err)
	ctx, cancel := context.WithCancel(w.ctx)
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	var once sync.Once
	w.t.Cleanup(func() {
		once.Do(func() {
			cancel()
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				w.t.Error("the projector did not stop")
			}
		})
	})
	w.proj = p
}

func terminal(s manager.State) bool { return s.Terminal() }

// finish waits until the engine ends the upgrade and, with a projector,
// until the manager's status shows the stream's last event of the upgrade.
func (w *world) finish(ref events.ManagerRef, timeout time.Duration) manager.State {
	w.t.Helper()
	st := w.e.WaitManager(ref, timeout, "a terminal state", terminal)
	if w.proj != nil {
		last := w.lastSeq(ref)
		waitFor(w.t, timeout, fmt.Sprintf("status at stream sequence %d", last), w.getManager(ref.Name),
			func(o *v1beta2.DataEngineUpgradeManager) bool { return o.Status.StreamSequence >= last })
	}
	return st
}

// lastSeq is the sequence of the last message of the upgrade's subjects,
// decodable or not.
func (w *world) lastSeq(ref events.ManagerRef) uint64 {
	w.t.Helper()
	var last uint64
	err := w.e.Store.Scan(w.ctx, eventstore.ScanOptions{Subjects: []string{events.ManagerSubjectPrefix(ref) + ".>"}},
		func(e events.Envelope) error { last = e.Sequence; return nil },
		func(de *events.DecodeError) { last = max(last, de.Sequence) })
	require.NoError(w.t, err)
	return last
}

func (w *world) getManager(name string) func() (*v1beta2.DataEngineUpgradeManager, error) {
	return func() (*v1beta2.DataEngineUpgradeManager, error) { return w.kc.Managers(w.ns).Get(w.ctx, name) }
}

// assertStatusIsReplay checks that the manager's status is exactly the fold
// of its history, as `switchback replay --verify` would: nothing was lost
// or corrupted on the way.
func (w *world) assertStatusIsReplay(ref events.ManagerRef) {
	w.t.Helper()
	wm, obj, _ := managertest.ReplayedStatus(w.t, w.ctx, w.e.Store, w.kc, ref)
	assert.JSONEq(w.t, toJSON(wm), toJSON(obj.Status), "the manager's status is the fold of its history (replay --verify)")
}

func toJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%#v", v)
	}
	return string(b)
}

// warnings lists the Warning Events in the test's namespace.
func (w *world) warnings() ([]eventsv1.Event, error) {
	list, err := w.cs.EventsV1().Events(w.ns).List(w.ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []eventsv1.Event
	for _, ev := range list.Items {
		if ev.Type == "Warning" {
			out = append(out, ev)
		}
	}
	slices.SortFunc(out, func(a, b eventsv1.Event) int { return a.CreationTimestamp.Compare(b.CreationTimestamp.Time) })
	return out, nil
}

// onceEach asserts every transition of the upgrade appears exactly once.
func (w *world) onceEach(ref events.ManagerRef) {
	w.t.Helper()
	for key, n := range enginetest.Transitions(w.history(ref)) {
		assert.Equal(w.t, 1, n, "transition %q appears once", key)
	}
}

// history returns the upgrade's events in stream order; messages that do
// not decode (put there on purpose by the poison cases) are skipped.
func (w *world) history(ref events.ManagerRef) []events.Envelope {
	w.t.Helper()
	var out []events.Envelope
	err := w.e.Store.Scan(w.ctx, eventstore.ScanOptions{Subjects: []string{events.ManagerSubjectPrefix(ref) + ".>"}},
		func(e events.Envelope) error { out = append(out, e); return nil }, nil)
	require.NoError(w.t, err)
	return out
}

func isNotFound(err error) bool { return apierrors.IsNotFound(err) }

// engineOnly starts an engine (no Kubernetes) over cluster, or over an
// idle 2-node cluster with no worker when cluster is nil.
func engineOnly(t *testing.T, cluster *sim.Sim, opts ...enginetest.Options) *enginetest.Engine {
	t.Helper()
	var o enginetest.Options
	if len(opts) > 0 {
		o = opts[0]
	}
	if cluster == nil {
		cluster = sim.New(sim.Config{Profile: dataplane.ProfileInPlace})
		require.NoError(t, cluster.AddNode("n1"))
		require.NoError(t, cluster.AddNode("n2"))
		o.NoWorkers = true
	}
	return enginetest.Start(t, cluster, o)
}
