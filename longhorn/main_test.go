package longhorn_test

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/longhorn"
	"github.com/switchback-dev/switchback/longhorn/longhornsim"
	"github.com/switchback-dev/switchback/sim"
	"github.com/switchback-dev/switchback/test/harness/testenv"
	"github.com/switchback-dev/switchback/test/harness/webhooktest"
)

func TestMain(m *testing.M) { testenv.Main(m) }

var (
	crdOnce sync.Once
	crdErr  error
	nsSeq   atomic.Int64
)

// cluster is one test's world: a namespace on the package's apiserver
// holding a simulated Longhorn (objects kept in step with s by a
// longhornsim.Manager) and the adapter over it.
type cluster struct {
	t     *testing.T
	ctx   context.Context
	sim   *sim.Sim
	dyn   dynamic.Interface
	ns    string
	mgr   *longhornsim.Manager
	plane *longhorn.Plane
}

// testLog is silent unless LONGHORN_LOG is set (like enginetest's ENGINE_LOG).
func testLog() *slog.Logger {
	if os.Getenv("LONGHORN_LOG") == "" {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// newCluster is a cluster whose adapter detected its Longhorn from the
// apiserver, as production does.
func newCluster(t *testing.T, s *sim.Sim) *cluster {
	t.Helper()
	return newClusterWith(t, s, clusterOptions{})
}

// clusterOptions change how newClusterWith builds the adapter.
type clusterOptions struct {
	// platform is told to the adapter instead of detected: how a test drives
	// the in-place profile over CRDs that have no in-place upgrader.
	platform *dataplane.Platform
	// log receives the adapter's logs (default: testLog).
	log *slog.Logger
	// guard serves deploy/webhook/guard.yaml for the cluster, as an
	// installation has it.
	guard bool
}

// longhornNamespace installs Longhorn's test CRDs on the package's
// apiserver (once) and returns a fresh namespace for one cluster, a
// dynamic client and a context both end with the test.
func longhornNamespace(tb testing.TB) (context.Context, *rest.Config, dynamic.Interface, string) {
	tb.Helper()
	env := testenv.Get(tb)
	crdOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		root, err := testenv.RepoRoot()
		if err != nil {
			crdErr = err
			return
		}
		crdErr = testenv.InstallCRDs(ctx, env.Config, filepath.Join(root, "test", "longhorn-crds"))
	})
	require.NoError(tb, crdErr, "install test/longhorn-crds")

	ctx, cancel := context.WithCancel(context.Background())
	tb.Cleanup(cancel)
	// Longhorn's finalizer "longhorn.io" draws a warning from the apiserver
	// on every write of an object carrying it, as on a real cluster.
	cfg := rest.CopyConfig(env.Config)
	cfg.WarningHandler = rest.NoWarnings{}
	dyn, err := dynamic.NewForConfig(cfg)
	require.NoError(tb, err)
	ns := fmt.Sprintf("lh-%d", nsSeq.Add(1))
	nsObj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}}}
	_, err = dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}).Create(ctx, nsObj, metav1.CreateOptions{})
	require.NoError(tb, err)
	return ctx, cfg, dyn, ns
}

func newClusterWith(t *testing.T, s *sim.Sim, o clusterOptions) *cluster {
	t.Helper()
	platform := o.platform
	ctx, cfg, dyn, ns := longhornNamespace(t)

	startCtx, stop := context.WithTimeout(ctx, 30*time.Second)
	defer stop()
	mgr, err := longhornsim.Start(startCtx, dyn, s, longhornsim.Options{Namespace: ns, Log: testLog()})
	require.NoError(t, err)
	t.Cleanup(mgr.Close)
	opts := longhorn.Options{Namespace: ns, Log: o.log, SyncTimeout: 30 * time.Second}
	if opts.Log == nil {
		opts.Log = testLog()
	}
	if platform != nil {
		opts.Platform = *platform
	} else {
		disc, err := discovery.NewDiscoveryClientForConfig(cfg)
		require.NoError(t, err)
		surface, err := longhorn.ReadSurface(ctx, disc, dyn, ns)
		require.NoError(t, err)
		opts.Platform, err = surface.Platform(false)
		require.NoError(t, err, "Longhorn v1.12.1's CRDs are detected as the v1.12 profile")
	}
	plane, err := longhorn.New(ctx, dyn, opts)
	require.NoError(t, err)
	if o.guard {
		webhooktest.ServeGuard(t, cfg, ns, plane)
	}
	c := &cluster{t: t, ctx: ctx, sim: s, dyn: dyn, ns: ns, mgr: mgr, plane: plane}
	c.waitInStep("the adapter shows the simulated cluster")
	return c
}

// view is a data plane's whole read side, normalized for comparison
// (replicas and IMs in name order: the simulator keeps creation order).
type view struct {
	Nodes   []dataplane.Node
	IMs     []dataplane.InstanceManager
	Volumes []dataplane.Volume
	Image   string
}

func readView(ctx context.Context, r dataplane.Reader) (view, error) {
	var v view
	var err error
	if v.Nodes, err = r.Nodes(ctx); err != nil {
		return v, err
	}
	if v.IMs, err = r.InstanceManagers(ctx, ""); err != nil {
		return v, err
	}
	if v.Volumes, err = r.Volumes(ctx); err != nil {
		return v, err
	}
	if v.Image, err = r.DefaultInstanceManagerImage(ctx); err != nil {
		return v, err
	}
	slices.SortFunc(v.IMs, func(a, b dataplane.InstanceManager) int {
		return cmp.Or(strings.Compare(a.Node, b.Node), strings.Compare(a.Name, b.Name))
	})
	for i := range v.Volumes {
		slices.SortFunc(v.Volumes[i].Replicas, func(a, b dataplane.Replica) int { return strings.Compare(a.Name, b.Name) })
		if len(v.Volumes[i].Replicas) == 0 {
			v.Volumes[i].Replicas = nil
		}
	}
	return v, nil
}

// waitInStep waits until the adapter reads what the simulator holds, the
// proof that the objects carry the model faithfully both ways.
func (c *cluster) waitInStep(what string) {
	c.t.Helper()
	var want, got view
	var err error
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if want, err = readView(c.ctx, c.sim); err != nil {
			c.t.Fatalf("read simulator: %v", err)
		}
		if got, err = readView(c.ctx, c.plane); err == nil && equalViews(want, got) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	require.Equal(c.t, want, got, "%s (last error %v)", what, err)
}

func equalViews(a, b view) bool {
	return fmt.Sprintf("%+v", a) == fmt.Sprintf("%+v", b)
}

// object reads one Longhorn object (or Kubernetes Node) from the apiserver.
func (c *cluster) object(gvr schema.GroupVersionResource, name string) *unstructured.Unstructured {
	c.t.Helper()
	var ri dynamic.ResourceInterface = c.dyn.Resource(gvr).Namespace(c.ns)
	if gvr == longhorn.KubeNodesResource {
		ri = c.dyn.Resource(gvr)
	}
	u, err := ri.Get(c.ctx, name, metav1.GetOptions{})
	require.NoError(c.t, err, "get %s %s", gvr.Resource, name)
	return u
}

// decode reads one Longhorn object into its typed struct.
func decode[T any](c *cluster, gvr schema.GroupVersionResource, name string) *T {
	c.t.Helper()
	out := new(T)
	require.NoError(c.t, longhorn.FromUnstructured(c.object(gvr, name), out))
	return out
}

// list lists Longhorn objects of a resource in the test's namespace.
func (c *cluster) list(gvr schema.GroupVersionResource) []unstructured.Unstructured {
	c.t.Helper()
	l, err := c.dyn.Resource(gvr).Namespace(c.ns).List(c.ctx, metav1.ListOptions{})
	require.NoError(c.t, err)
	return l.Items
}

// eventually polls cond until it holds, failing after timeout.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s not reached within %s", what, timeout)
}
