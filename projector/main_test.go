package projector_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/switchback-dev/switchback/api/v1beta2"
	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/eventstore"
	"github.com/switchback-dev/switchback/kubeclient"
	"github.com/switchback-dev/switchback/projector"
	"github.com/switchback-dev/switchback/sim"
	"github.com/switchback-dev/switchback/test/harness/enginetest"
	"github.com/switchback-dev/switchback/test/harness/managertest"
	"github.com/switchback-dev/switchback/test/harness/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

var nsSeq atomic.Int64

// harness is one test's world: a namespace on the package's apiserver and
// an upgrade engine (embedded NATS, orchestrator, workers) over a simulated
// cluster.
type harness struct {
	t   *testing.T
	env *testenv.Env
	ctx context.Context
	kc  *kubeclient.Client
	cs  kubernetes.Interface
	ns  string
	e   *enginetest.Engine
}

func newHarness(t *testing.T, cluster *sim.Sim, opts enginetest.Options) *harness {
	t.Helper()
	env := testenv.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	cs, err := kubernetes.NewForConfig(env.Config)
	require.NoError(t, err)
	kc, err := kubeclient.New(env.Config)
	require.NoError(t, err)
	ns := fmt.Sprintf("proj-%d", nsSeq.Add(1))
	_, err = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	return &harness{t: t, env: env, ctx: ctx, kc: kc, cs: cs, ns: ns, e: enginetest.Start(t, cluster, opts)}
}

// threeNodes is a 3-node v2 cluster with six volumes: attached ones with
// their target on n1, n2 and n3, and a detached one.
func threeNodes(t *testing.T, cfg sim.Config) *sim.Sim {
	t.Helper()
	s, err := sim.ThreeNodes(cfg)
	require.NoError(t, err)
	return s
}

// slow makes each step last long enough to stop things in the middle.
var slow = sim.Config{Profile: dataplane.ProfileInPlace, TargetMoveLatency: 20 * time.Millisecond, IMStartLatency: 30 * time.Millisecond, RebuildLatency: 20 * time.Millisecond}

// createManager creates a DataEngineUpgradeManager and returns its identity
// as the intake records it.
func (h *harness) createManager(name string, nodes ...string) events.ManagerRef {
	h.t.Helper()
	return managertest.Create(h.t, h.ctx, h.kc, h.ns, name, nodes...)
}

// running is a projector running in the background.
type running struct {
	p    *projector.Projector
	stop func()
}

// startProjector runs a projector until the test ends or stop is called.
func (h *harness) startProjector(mutate func(*projector.Config)) *running {
	h.t.Helper()
	cfg := projector.Config{
		Store: h.e.Store, Client: h.kc, Events: h.cs, Log: testLogger(h.t),
		AckWait: 5 * time.Second, RetryBase: 10 * time.Millisecond, RetryMax: 200 * time.Millisecond,
	}
	if mutate != nil {
		mutate(&cfg)
	}
	p, err := projector.New(cfg)
	require.NoError(h.t, err)
	ctx, cancel := context.WithCancel(h.ctx)
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				assert.ErrorIs(h.t, err, context.Canceled, "the projector stops only when told")
			case <-time.After(20 * time.Second):
				h.t.Error("the projector did not stop")
			}
		})
	}
	h.t.Cleanup(stop)
	return &running{p: p, stop: stop}
}

func testLogger(t *testing.T) *slog.Logger {
	level := slog.LevelWarn
	if os.Getenv("PROJECTOR_LOG") == "debug" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: level}))
}

// eventually polls cond every 20ms until it holds, failing after timeout.
func eventually[T any](t *testing.T, timeout time.Duration, what string, get func() (T, error), cond func(T) bool) T {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var (
		last T
		err  error
	)
	for time.Now().Before(deadline) {
		if last, err = get(); err == nil && cond(last) {
			return last
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s: not reached within %s (last error %v); last value:\n%s", what, timeout, err, toJSON(last))
	return last
}

func (h *harness) getManager(name string) func() (*v1beta2.DataEngineUpgradeManager, error) {
	return func() (*v1beta2.DataEngineUpgradeManager, error) { return h.kc.Managers(h.ns).Get(h.ctx, name) }
}

// waitCaughtUp waits until the engine finished the upgrade and the
// manager's status reflects the last event of its history.
func (h *harness) waitCaughtUp(ref events.ManagerRef, timeout time.Duration) *v1beta2.DataEngineUpgradeManager {
	h.t.Helper()
	h.e.WaitManager(ref, timeout, "a terminal state", func(s managerState) bool { return s.Terminal() })
	hist := h.history(ref)
	last := hist[len(hist)-1].Sequence
	return eventually(h.t, timeout, fmt.Sprintf("status at stream sequence %d", last), h.getManager(ref.Name),
		func(o *v1beta2.DataEngineUpgradeManager) bool { return o.Status.StreamSequence == last })
}

// history returns the manager's events in stream order, skipping messages
// that do not decode (the poison test puts some there on purpose).
func (h *harness) history(ref events.ManagerRef) []events.Envelope {
	h.t.Helper()
	var out []events.Envelope
	err := h.e.Store.Scan(h.ctx, eventstore.ScanOptions{Subjects: []string{events.ManagerSubjectPrefix(ref) + ".>"}}, func(e events.Envelope) error {
		out = append(out, e)
		return nil
	}, nil)
	require.NoError(h.t, err)
	require.NotEmpty(h.t, out)
	return out
}

// nodeUpgrades lists the manager's node upgrades by label.
func (h *harness) nodeUpgrades(manager string) []v1beta2.NodeDataEngineUpgrade {
	h.t.Helper()
	list, err := h.kc.NodeUpgrades(h.ns).List(h.ctx, metav1.ListOptions{LabelSelector: v1beta2.LabelDataEngineUpgradeManager + "=" + manager})
	require.NoError(h.t, err)
	return list.Items
}

// assertMatchesReplay checks that what is in Kubernetes is exactly the fold
// of the stream, as projector.Replay computes it offline.
func (h *harness) assertMatchesReplay(ref events.ManagerRef) {
	h.t.Helper()
	wm, obj, want := managertest.ReplayedStatus(h.t, h.ctx, h.e.Store, h.kc, ref)
	assert.JSONEq(h.t, toJSON(wm), toJSON(obj.Status), "the manager's status is the fold of its history")

	nodes := h.nodeUpgrades(ref.Name)
	assert.Len(h.t, nodes, len(want.NodeUpgrades), "one node upgrade per scheduled node")
	for node, ws := range want.NodeUpgrades {
		nu, err := h.kc.NodeUpgrades(h.ns).Get(h.ctx, projector.NodeUpgradeName(ref.Name, node))
		if !assert.NoError(h.t, err, "node upgrade of %s", node) {
			continue
		}
		ws.ObservedGeneration = nu.Generation
		ws.Conditions = withGeneration(ws.Conditions, nu.Generation)
		assert.JSONEq(h.t, toJSON(ws), toJSON(nu.Status), "node upgrade %s is the fold of its history", node)
	}
}

func withGeneration(conds []metav1.Condition, gen int64) []metav1.Condition {
	out := slices.Clone(conds)
	for i := range out {
		out[i].ObservedGeneration = gen
	}
	return out
}

func toJSON(v any) string {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Sprintf("%#v", v)
	}
	return string(b)
}

// watchSequences records every streamSequence the manager's status shows,
// from an informer (a list, then a watch), in the order the apiserver
// delivered them.
func (h *harness) watchSequences(name string) func() []uint64 {
	h.t.Helper()
	var (
		mu   sync.Mutex
		seen []uint64
	)
	record := func(obj any) {
		if m, ok := obj.(*v1beta2.DataEngineUpgradeManager); ok && m.Name == name {
			mu.Lock()
			seen = append(seen, m.Status.StreamSequence)
			mu.Unlock()
		}
	}
	inf := h.kc.Managers(h.ns).Informer(0)
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: record, UpdateFunc: func(_, obj any) { record(obj) }})
	require.NoError(h.t, err)
	ctx, cancel := context.WithCancel(h.ctx)
	done := make(chan struct{})
	go func() { inf.RunWithContext(ctx); close(done) }()
	h.t.Cleanup(func() { cancel(); <-done })
	require.True(h.t, cache.WaitForCacheSync(ctx.Done(), inf.HasSynced))
	return func() []uint64 {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(seen)
	}
}

// k8sEvents lists the events.k8s.io Events of the test: in its namespace,
// plus those about core Nodes (recorded in "default") related to an object
// of its namespace.
func (h *harness) k8sEvents() ([]eventsv1.Event, error) {
	var out []eventsv1.Event
	for _, ns := range []string{h.ns, metav1.NamespaceDefault} {
		list, err := h.cs.EventsV1().Events(ns).List(h.ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		for _, ev := range list.Items {
			if ns == h.ns || (ev.Related != nil && ev.Related.Namespace == h.ns) {
				out = append(out, ev)
			}
		}
	}
	return out, nil
}

// eventKey is what tells Events apart in assertions.
type eventKey struct{ typ, reason, kind, name string }

func keyOf(ev eventsv1.Event) eventKey {
	return eventKey{ev.Type, ev.Reason, ev.Regarding.Kind, ev.Regarding.Name}
}

// hasEvents reports whether every wanted key has at least one Event.
func hasEvents(want ...eventKey) func([]eventsv1.Event) bool {
	return func(evs []eventsv1.Event) bool {
		got := map[eventKey]bool{}
		for _, ev := range evs {
			got[keyOf(ev)] = true
		}
		for _, k := range want {
			if !got[k] {
				return false
			}
		}
		return true
	}
}

// faults wraps the projector's apiserver transport: it can refuse every
// connection (an outage) and answer every n-th status write with a 409
// Conflict without forwarding it.
type faults struct {
	down          atomic.Bool
	conflictEvery atomic.Int64
	statusPuts    atomic.Int64
	injected      atomic.Int64
	refused       atomic.Int64
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func (f *faults) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if f.down.Load() {
			f.refused.Add(1)
			return nil, fmt.Errorf("dial tcp %s: connect: connection refused (injected outage)", req.URL.Host)
		}
		if req.Method == http.MethodPut && strings.HasSuffix(req.URL.Path, "/status") {
			n := f.statusPuts.Add(1)
			if every := f.conflictEvery.Load(); every > 0 && n%every == 0 {
				f.injected.Add(1)
				body, _ := json.Marshal(metav1.Status{
					TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
					Status:   metav1.StatusFailure, Reason: metav1.StatusReasonConflict, Code: http.StatusConflict,
					Message: "Operation cannot be fulfilled: the object has been modified (injected)",
				})
				return &http.Response{
					StatusCode: http.StatusConflict, Status: "409 Conflict", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
					Header: http.Header{"Content-Type": []string{"application/json"}},
					Body:   io.NopCloser(strings.NewReader(string(body))), ContentLength: int64(len(body)), Request: req,
				}, nil
			}
		}
		return rt.RoundTrip(req)
	})
}
