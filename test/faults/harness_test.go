//go:build linux

package faults

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/eventstore"
	"github.com/switchback-dev/switchback/kubeclient"
	"github.com/switchback-dev/switchback/natsauth"
	"github.com/switchback-dev/switchback/natsembed"
	"github.com/switchback-dev/switchback/sim"
	"github.com/switchback-dev/switchback/sim/simremote"
	"github.com/switchback-dev/switchback/topology"
)

// Bounds of one run: the upgrade of three nodes takes a few seconds; the
// margins cover a worker's command coming back after its AckWait and a
// lease expiring (2 s and 4 s here) many times over on a loaded 2-core
// machine.
const (
	runTimeout      = 3 * time.Minute
	completeTimeout = 90 * time.Second
	stepTimeout     = 45 * time.Second
	pollEvery       = 10 * time.Millisecond
	managerName     = "upgrade"
)

// options shape one run's world.
type options struct {
	// cluster runs a 3-server JetStream cluster with the streams at R3.
	cluster bool
	// simConfig tunes the simulated cluster's latencies.
	simConfig sim.Config
	// kubeconfig replaces the apiserver's kubeconfig for the controllers
	// (the conflict-injecting proxy).
	kubeconfig string
	// workerURL, when set, is the NATS URL a node's worker gets (a proxy).
	workerURL func(node string) string
	// gateStep, when set, serves the data plane through a gate that holds
	// every call once a node has entered this step (world.gate); gateCall,
	// when set too, starts holding only at that call.
	gateStep events.NodeState
	gateCall dataplane.Call
	// moveWorkloads gives every attached volume a pod and creates the
	// manager with spec.initiatorPolicy move-workloads.
	moveWorkloads bool
	// longhorn runs the processes with --data-plane longhorn against the
	// apiserver, where a simulated Longhorn manager (longhornsim) keeps
	// Longhorn v1.12.1's objects in step with the simulator (see
	// longhornWorld); the gate then holds the workers' apiserver requests.
	longhorn bool
	// links puts a tcpProxy on every link of every process (one to each
	// NATS server, and the controllers' to the apiserver), so that the
	// nemesis can partition a process; the cluster's servers then
	// advertise no client URLs and the processes ping NATS every second.
	links bool
	// kubelet restarts a process that exits with an error (see
	// world.exitedOnItsOwn) instead of failing the run.
	kubelet bool
}

// world is one run: NATS, the simulated cluster served on it, the processes
// and the user's manager, all private to the run.
type world struct {
	t        *testing.T
	ctx      context.Context
	scenario string
	res      *runResult
	opts     options
	dir      string
	ns       string
	replicas int

	// NATS: a single server (restartable on the same port and store) or a
	// cluster.
	natsOpts natsembed.Options
	// auth is the run's NATS authorization (authorize).
	auth    *natsauth.Authorization
	srvMu   sync.Mutex
	srv     *natsembed.Server
	cluster *natsembed.Cluster
	url     string

	nc    *nats.Conn
	js    jetstream.JetStream
	store *eventstore.Store
	sim   *sim.Sim
	gate  *gate
	kc    *kubeclient.Client
	nodes []string
	// requested is the manager's spec.nodes (nil: every v2 node).
	requested []string
	// holds are the workers' kubeconfigs through the gate's proxy, by node.
	holds map[string]string

	// plane slows and fails data-plane calls (see planeFaults).
	plane planeFaults
	// links are each process's proxies, by process name (options.links).
	links map[string]*link

	// next, once set, starts every later process on the second build of
	// Switchback (nextBinPath): a rolling update of Switchback itself.
	next atomic.Bool

	mu     sync.Mutex
	procs  []*proc
	exited []string // processes that exited without being killed
	// restarts are the kubelet's (options.kubelet), with why each exited.
	restarts []string
	stopping bool
	ref      events.ManagerRef
	hist     []events.Envelope
	lastSeq  uint64
	checked  bool
	stops    []func()
}

var runSeq atomic.Int64

// newWorld starts a run of scenario: its NATS, its simulated cluster (served
// over NATS with simremote) and a namespace of its own on the apiserver. The
// run's result is recorded for the summary when the test ends.
func newWorld(t *testing.T, scenario string, opts options) *world {
	t.Helper()
	res := &runResult{}
	t.Cleanup(func() {
		res.passed = !t.Failed() && !t.Skipped()
		if t.Skipped() && res.skipped == "" {
			res.skipped = "skipped"
		}
		record(scenario, res)
	})
	requireEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	t.Cleanup(cancel)
	n := runSeq.Add(1)
	w := &world{t: t, ctx: ctx, scenario: scenario, res: res, opts: opts, dir: t.TempDir(), ns: fmt.Sprintf("faults-%d", n), replicas: 1}
	w.authorize()

	if opts.cluster {
		copts := []natsembed.ClusterOption{w.configure}
		if opts.links {
			copts = append(copts, natsembed.NoAdvertise)
		}
		c, err := natsembed.StartCluster(fmt.Sprintf("faults%d", n), 3, filepath.Join(w.dir, "nats"), copts...)
		require.NoError(t, err)
		t.Cleanup(c.Shutdown)
		w.cluster, w.url, w.replicas = c, c.URLs(), 3
	} else {
		port, err := natsembed.FreePort("127.0.0.1")
		require.NoError(t, err)
		// A fixed port and store so a restart comes back where the
		// processes reconnect, with the history on disk.
		w.natsOpts = natsembed.Options{Name: fmt.Sprintf("faults-%d", n), Port: port, StoreDir: filepath.Join(w.dir, "nats")}
		w.configure(&w.natsOpts)
		srv, err := natsembed.Start(w.natsOpts)
		require.NoError(t, err)
		w.srv = srv
		t.Cleanup(func() {
			w.srvMu.Lock()
			defer w.srvMu.Unlock()
			if w.srv != nil {
				w.srv.Shutdown()
			}
		})
		w.url = srv.ClientURL()
	}

	// The test's own connection (the simulator's server side and the
	// stream reads) reconnects forever, like the processes'.
	nc, err := nats.Connect(w.url, append(w.controllerConnect(), nats.Name("faults-test"), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))...)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	w.nc = nc
	w.js, err = jetstream.New(nc)
	require.NoError(t, err)
	// The cluster is up with every peer known (natsembed.StartCluster).
	w.store, err = eventstore.Open(ctx, w.js, eventstore.Config{Replicas: w.replicas})
	require.NoError(t, err)

	if opts.longhorn {
		w.longhornWorld()
	} else {
		w.simWorld()
	}

	cs, err := kubernetes.NewForConfig(kenv.Config)
	require.NoError(t, err)
	// Namespaces are never deleted: without a namespace controller they
	// would stay Terminating, and the apiserver is thrown away at the end.
	_, err = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: w.ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	if opts.longhorn {
		w.startLonghorn()
	}
	w.kc, err = kubeclient.New(kenv.Config)
	require.NoError(t, err)

	// Registered last, so they run first: figures are taken (for a run
	// that failed before its checks) and processes die before NATS.
	t.Cleanup(w.stopAll)
	t.Cleanup(func() {
		w.mu.Lock()
		created := w.ref.UID != ""
		w.mu.Unlock()
		if !w.checked && created {
			w.takeFigures()
		}
	})
	return w
}

// simWorld is the simulated cluster of sim.ThreeNodes, served to the
// processes over NATS (simremote), through the gate when the run has one.
func (w *world) simWorld() {
	t := w.t
	cfg := w.opts.simConfig
	if cfg.Profile == "" {
		// Every node of sim.ThreeNodes holds initiators; on this profile
		// each of its steps has work to do.
		cfg.Profile = dataplane.ProfileInPlace
	}
	if cfg.TargetMoveLatency == 0 && cfg.IMStartLatency == 0 && cfg.RebuildLatency == 0 {
		cfg.TargetMoveLatency, cfg.IMStartLatency, cfg.RebuildLatency = 40*time.Millisecond, 80*time.Millisecond, 40*time.Millisecond
	}
	var err error
	w.sim, err = sim.ThreeNodes(cfg)
	require.NoError(t, err)
	if w.opts.moveWorkloads {
		require.NoError(t, w.sim.AddPods())
	}
	nodes, err := w.sim.Nodes(w.ctx)
	require.NoError(t, err)
	for _, nd := range nodes {
		w.nodes = append(w.nodes, nd.Name)
	}
	require.Equal(t, runNodes, w.nodes, "every node has a NATS account of its own")
	w.gate = newGate(w, w.sim, w.opts.gateStep)
	w.gate.call = w.opts.gateCall
	// Held calls are let go once the processes are dead, before the
	// simulator stops being served.
	w.onStop(w.gate.open)
	served, err := simremote.Serve(w.nc, topology.SimPrefix, w.gate.plane())
	require.NoError(t, err)
	t.Cleanup(served.Stop)
}

// dataPlane is the processes' --data-plane.
func (w *world) dataPlane() string {
	if w.opts.longhorn {
		return "longhorn"
	}
	return "sim"
}

// onStop registers f to run once every process of the run is dead (before
// NATS stops), for what the processes hold connections to.
func (w *world) onStop(f func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stops = append(w.stops, f)
}

// stopAll kills every process still running, runs the onStop functions
// and, when the test failed, prints the tail of every process's log.
func (w *world) stopAll() {
	w.mu.Lock()
	w.stopping = true
	procs := append([]*proc(nil), w.procs...)
	stops := w.stops
	w.mu.Unlock()
	for _, p := range procs {
		if p.alive() {
			p.killed.Store(true)
			_ = syscall.Kill(p.cmd.Process.Pid, syscall.SIGKILL)
		}
		<-p.done
	}
	for i := len(stops) - 1; i >= 0; i-- {
		stops[i]()
	}
	for _, p := range procs {
		if strings.HasPrefix(p.name, "controller") {
			if n := countLines(p.logPath, "stopped leading"); n > 0 {
				w.t.Logf("%s lost the lease %d time(s)", p.name, n)
			}
		}
	}
	if w.t.Failed() {
		for _, p := range procs {
			w.t.Logf("---- %s (pid %d, %v): last lines of %s\n%s", p.name, p.cmd.Process.Pid, p.waitErr, p.logPath, tail(p.logPath, 25))
		}
	}
}
