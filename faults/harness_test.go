//go:build linux

package faults

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/switchback-dev/switchback/api/v1beta2"
	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/eventstore"
	"github.com/switchback-dev/switchback/internal/enginetest"
	"github.com/switchback-dev/switchback/kubeclient"
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
	// every call once a node has entered this step (world.gate).
	gateStep events.NodeState
	// longhorn runs the processes with --data-plane longhorn against the
	// apiserver, where a simulated Longhorn manager (longhornsim) keeps
	// Longhorn v1.12.1's objects in step with the simulator (see
	// longhornWorld); the gate then holds the workers' apiserver requests.
	longhorn bool
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
	srvMu    sync.Mutex
	srv      *natsembed.Server
	cluster  *natsembed.Cluster
	url      string

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

	mu      sync.Mutex
	procs   []*proc
	exited  []string // processes that exited without being killed
	ref     events.ManagerRef
	hist    []events.Envelope
	lastSeq uint64
	checked bool
	stops   []func()
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

	if opts.cluster {
		c, err := natsembed.StartCluster(fmt.Sprintf("faults%d", n), 3, filepath.Join(w.dir, "nats"))
		require.NoError(t, err)
		t.Cleanup(c.Shutdown)
		w.cluster, w.url, w.replicas = c, c.URLs(), 3
	} else {
		port, err := natsembed.FreePort("127.0.0.1")
		require.NoError(t, err)
		// A fixed port and store so a restart comes back where the
		// processes reconnect, with the history on disk.
		w.natsOpts = natsembed.Options{Name: fmt.Sprintf("faults-%d", n), Port: port, StoreDir: filepath.Join(w.dir, "nats")}
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
	nc, err := nats.Connect(w.url, nats.Name("faults-test"), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
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
	nodes, err := w.sim.Nodes(w.ctx)
	require.NoError(t, err)
	for _, nd := range nodes {
		w.nodes = append(w.nodes, nd.Name)
	}
	var plane dataplane.DataPlane = w.sim
	if w.opts.gateStep != "" {
		w.gate = newGate(w, w.sim, w.opts.gateStep)
		plane = w.gate
		// Held calls are let go once the processes are dead, before the
		// simulator stops being served.
		w.onStop(w.gate.open)
	}
	served, err := simremote.Serve(w.nc, topology.SimPrefix, plane)
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

// proc is one switchback process.
type proc struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	health  string
	done    chan struct{}
	killed  atomic.Bool
	waitErr error
}

// start runs `switchback args...` with its output in a log file of the run.
func (w *world) start(name string, args ...string) *proc {
	w.t.Helper()
	health := freeAddr(w.t)
	logPath := filepath.Join(w.dir, fmt.Sprintf("%s-%d.log", name, time.Now().UnixNano()))
	f, err := os.Create(logPath)
	require.NoError(w.t, err)
	cmd := exec.Command(binPath, append(args, "--health-addr", health)...)
	cmd.Stdout, cmd.Stderr = f, f
	// The kernel kills the process if the test binary dies without cleanup
	// (a panic, a -timeout): no process outlives the suite.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	require.NoError(w.t, cmd.Start(), "start %s", name)
	p := &proc{name: name, cmd: cmd, logPath: logPath, health: health, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		f.Close()
		if !p.killed.Load() {
			w.mu.Lock()
			w.exited = append(w.exited, fmt.Sprintf("%s (pid %d): %v", name, cmd.Process.Pid, p.waitErr))
			w.mu.Unlock()
		}
		close(p.done)
	}()
	w.mu.Lock()
	w.procs = append(w.procs, p)
	w.mu.Unlock()
	w.t.Logf("started %s (pid %d)", name, cmd.Process.Pid)
	return p
}

// kill9 is kill -9: no cleanup of any kind runs in the process.
func (p *proc) kill9(t *testing.T) {
	t.Helper()
	p.killed.Store(true)
	if err := syscall.Kill(p.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		select {
		case <-p.done:
		default:
			t.Errorf("kill -9 %s: %v", p.name, err)
		}
	}
	<-p.done
	t.Logf("killed %s (pid %d) with SIGKILL", p.name, p.cmd.Process.Pid)
}

// signal sends sig (SIGSTOP, SIGCONT) to the process.
func (p *proc) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	require.NoError(t, syscall.Kill(p.cmd.Process.Pid, sig), "%v to %s", sig, p.name)
	t.Logf("%v sent to %s (pid %d)", sig, p.name, p.cmd.Process.Pid)
}

// alive reports whether the process still runs.
func (p *proc) alive() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// get fetches a path of the process's health endpoint.
func (p *proc) get(path string) (int, string) {
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get("http://" + p.health + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

// leading reports whether a controller holds the lease.
func (p *proc) leading() bool {
	code, body := p.get("/leader")
	return code == http.StatusOK && body == "true"
}

// ready reports whether the process is connected to NATS.
func (p *proc) ready() bool {
	code, _ := p.get("/readyz")
	return code == http.StatusOK
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

// countLines counts the lines of a log holding s.
func countLines(path, s string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	return strings.Count(string(b), s)
}

func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}

// kubeconfig is the controllers' kubeconfig.
func (w *world) kubeconfig() string {
	if w.opts.kubeconfig != "" {
		return w.opts.kubeconfig
	}
	return kenv.Kubeconfig
}

// startController runs `switchback controller` for the run's namespace,
// with leader election on (the lease lives in the run's namespace).
func (w *world) startController(id string) *proc {
	w.t.Helper()
	return w.start("controller-"+id, "controller", "--kubeconfig", w.kubeconfig(), "--nats-url", w.url,
		"--stream-replicas", fmt.Sprint(w.replicas), "--namespace", w.ns, "--id", id, "--leader-elect=true",
		"--webhook-addr", "", "--log-level", "debug", "--data-plane", w.dataPlane(), "--longhorn-namespace", w.ns,
		// Short enough that a dead worker's command and a dead leader's
		// lease come back within seconds, not the production 10 s and 15 s.
		"--command-ack-wait", "2s", "--leader-elect-lease-duration", "4s", "--leader-elect-renew-deadline", "3s",
		"--leader-elect-retry-period", "500ms")
}

// startWorker runs `switchback worker` for node.
func (w *world) startWorker(node string) *proc {
	w.t.Helper()
	url := w.url
	if w.opts.workerURL != nil {
		url = w.opts.workerURL(node)
	}
	kubeconfig := kenv.Kubeconfig
	if k, ok := w.holds[node]; ok {
		kubeconfig = k
	}
	return w.start("worker-"+node, "worker", "--node", node, "--nats-url", url, "--stream-replicas", fmt.Sprint(w.replicas),
		"--data-plane", w.dataPlane(), "--kubeconfig", kubeconfig, "--longhorn-namespace", w.ns,
		"--poll-interval", "20ms", "--stall-after", "5s", "--log-level", "debug")
}

// startWorkers starts one worker per node.
func (w *world) startWorkers() map[string]*proc {
	out := map[string]*proc{}
	for _, n := range w.nodes {
		out[n] = w.startWorker(n)
	}
	return out
}

// createManager does what the user does: create a DataEngineUpgradeManager.
func (w *world) createManager() {
	w.t.Helper()
	m, err := w.kc.Managers(w.ns).Create(w.ctx, &v1beta2.DataEngineUpgradeManager{
		ObjectMeta: metav1.ObjectMeta{Name: managerName, Namespace: w.ns},
		Spec:       v1beta2.DataEngineUpgradeManagerSpec{DataEngine: v1beta2.DataEngineTypeV2, Nodes: w.requested},
	})
	require.NoError(w.t, err)
	w.mu.Lock()
	w.ref = events.ManagerRef{Namespace: w.ns, Name: managerName, UID: string(m.UID)}
	w.mu.Unlock()
}

// refresh reads the manager's events appended since the last read. Errors
// (NATS down, a cluster electing a leader) are the faults under test: the
// caller polls again.
func (w *world) refresh() ([]events.Envelope, error) {
	w.mu.Lock()
	ref, from := w.ref, w.lastSeq+1
	w.mu.Unlock()
	ctx, cancel := context.WithTimeout(w.ctx, 3*time.Second)
	defer cancel()
	var fresh []events.Envelope
	err := w.store.Scan(ctx, eventstore.ScanOptions{FromSeq: from, Subjects: []string{events.ManagerSubjectPrefix(ref) + ".>"}},
		func(e events.Envelope) error { fresh = append(fresh, e); return nil },
		func(de *events.DecodeError) { w.t.Errorf("a message of the stream does not decode: %v", de) })
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, e := range fresh {
		if e.Sequence > w.lastSeq {
			w.hist = append(w.hist, e)
			w.lastSeq = e.Sequence
		}
	}
	return append([]events.Envelope(nil), w.hist...), err
}

// waitEvent waits for the first event of the manager's history (in stream
// order, from the beginning) that match accepts, and returns it.
func (w *world) waitEvent(what string, timeout time.Duration, match func(events.Envelope) bool) events.Envelope {
	w.t.Helper()
	deadline := time.Now().Add(timeout)
	var lastErr error
	for {
		h, err := w.refresh()
		if err != nil {
			lastErr = err
		}
		for _, e := range h {
			if match(e) {
				return e
			}
		}
		w.failIfExited()
		if time.Now().After(deadline) || w.ctx.Err() != nil {
			w.t.Fatalf("%s: not seen within %s (%d events so far, last read error %v)", what, timeout, len(h), lastErr)
		}
		time.Sleep(pollEvery)
	}
}

// waitStep waits until some node's upgrade enters step and returns the node.
func (w *world) waitStep(step events.NodeState) string {
	w.t.Helper()
	e := w.waitEvent("a node entering "+string(step), stepTimeout, func(e events.Envelope) bool { return entered(e, step) })
	w.t.Logf("node %s entered %s (seq %d)", e.Aggregate.Node, step, e.Sequence)
	return e.Aggregate.Node
}

// waitProgress waits until n more node state changes than now are in the
// stream: the upgrade moves on.
func (w *world) waitProgress(what string, n int) {
	w.t.Helper()
	count := func() int {
		h, _ := w.refresh()
		c := 0
		for _, e := range h {
			if _, ok := e.Data.(events.NodeStateChanged); ok {
				c++
			}
		}
		return c
	}
	if w.completed() {
		w.t.Fatalf("%s: the upgrade already completed, the fault landed too late", what)
	}
	want := count() + n
	w.eventually(what, stepTimeout, func() bool { return count() >= want })
}

// waitHeld waits until the gate holds a call and returns it.
func (w *world) waitHeld() heldCall {
	w.t.Helper()
	timeout := time.After(stepTimeout)
	for {
		select {
		case h := <-w.gate.held:
			return h
		case <-timeout:
			w.t.Fatalf("no node entered %s within %s", w.gate.step, stepTimeout)
		case <-time.After(100 * time.Millisecond):
			w.failIfExited()
		}
	}
}

// waitInStep waits until a node is inside the gate's step: the gate holds
// one of its worker's calls, or, for a step that only waits on Longhorn and
// makes none, the stream shows the node there.
func (w *world) waitInStep() heldCall {
	w.t.Helper()
	deadline := time.Now().Add(stepTimeout)
	for {
		select {
		case h := <-w.gate.held:
			return h
		default:
		}
		h, _ := w.refresh()
		for _, n := range w.nodes {
			if stateOf(h, n) == w.gate.step {
				return heldCall{node: n, method: "none yet (the step waits on Longhorn)"}
			}
		}
		w.failIfExited()
		if time.Now().After(deadline) {
			w.t.Fatalf("no node entered %s within %s", w.gate.step, stepTimeout)
		}
		time.Sleep(pollEvery)
	}
}

// completed reports whether the manager's upgrade completed in the stream.
func (w *world) completed() bool {
	h, _ := w.refresh()
	for _, e := range h {
		if _, ok := e.Data.(events.UpgradeCompleted); ok {
			return true
		}
	}
	return false
}

// nodeState is node's state as its events in the stream say.
func (w *world) nodeState(node string) events.NodeState {
	h, _ := w.refresh()
	return stateOf(h, node)
}

// stateOf folds node's state from h.
func stateOf(h []events.Envelope, node string) events.NodeState {
	var st events.NodeState
	for _, e := range h {
		if e.Aggregate.Node != node {
			continue
		}
		switch d := e.Data.(type) {
		case events.NodeUpgradeStarted:
			st = events.NodePending
		case events.NodeStateChanged:
			st = d.To
		case events.NodeUpgradeCompleted:
			st = events.NodeCompleted
		}
	}
	return st
}

// entered reports whether e puts its node in step.
func entered(e events.Envelope, step events.NodeState) bool {
	switch d := e.Data.(type) {
	case events.NodeUpgradeStarted:
		return step == events.NodePending
	case events.NodeStateChanged:
		return d.To == step
	}
	return false
}

// failIfExited fails the run when a process died on its own: a crash is a
// finding, not something the suite should silently restart.
func (w *world) failIfExited() {
	w.t.Helper()
	w.mu.Lock()
	exited := append([]string(nil), w.exited...)
	w.mu.Unlock()
	if len(exited) > 0 {
		w.t.Fatalf("process(es) exited on their own: %s", strings.Join(exited, "; "))
	}
}

// eventually polls cond until it holds, failing the run after timeout.
func (w *world) eventually(what string, timeout time.Duration, cond func() bool) {
	w.t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		w.failIfExited()
		if time.Now().After(deadline) || w.ctx.Err() != nil {
			w.t.Fatalf("%s: not reached within %s", what, timeout)
		}
		time.Sleep(pollEvery)
	}
}

// expectedTransitions lists, in enginetest.Transitions' keys, what a
// completed upgrade of nodes must hold exactly once: each node's walk
// through every step, its completion, and the manager scheduling and
// finishing it.
func expectedTransitions(nodes []string) []string {
	var out []string
	for _, n := range nodes {
		for i := 0; i+1 < len(events.NodeSteps); i++ {
			out = append(out, fmt.Sprintf("%s %s->%s", n, events.NodeSteps[i], events.NodeSteps[i+1]))
		}
		out = append(out, fmt.Sprintf("%s %s", n, events.TypeNodeUpgradeCompleted), "scheduled "+n, "finished "+n)
	}
	return append(out, " "+string(events.TypeUpgradeCompleted))
}

// countTransitions returns how many expected transitions the history lacks
// and how many extra copies of any transition it holds.
func countTransitions(h []events.Envelope, nodes []string) (lost, dups int, detail []string) {
	got := enginetest.Transitions(h)
	for _, k := range expectedTransitions(nodes) {
		if got[k] == 0 {
			lost++
			detail = append(detail, "lost: "+k)
		}
	}
	for k, n := range got {
		if n > 1 {
			dups += n - 1
			detail = append(detail, fmt.Sprintf("%d× %s", n, k))
		}
	}
	return lost, dups, detail
}

// checkInvariants ends every run: the manager completed on the CR, the
// stream folds exactly to the CRs' status (`switchback replay --verify`),
// every transition appears exactly once, no I/O failed and nothing is left
// unsafe (every spec.engineNodeID as its user set it), every upgraded node
// runs the target image and schedules replicas again; no process died on
// its own. The run's figures for the summary
// come from these checks.
func (w *world) checkInvariants() {
	t := w.t
	t.Helper()
	w.checked = true
	// The figures are taken whatever happens below, so a run that fails
	// half-way still shows what it lost.
	defer w.takeFigures()

	var st v1beta2.DataEngineUpgradeManagerStatus
	w.eventually("manager status completed on the CR", completeTimeout, func() bool {
		m, err := w.kc.Managers(w.ns).Get(w.ctx, managerName)
		if err != nil {
			return false
		}
		st = m.Status
		return st.State == v1beta2.UpgradeState(events.ManagerCompleted) || st.State == v1beta2.UpgradeState(events.ManagerError)
	})
	require.Equal(t, v1beta2.UpgradeState(events.ManagerCompleted), st.State, "manager state; message %q", st.Message)

	// The NodeDataEngineUpgrades are written after the manager's status;
	// the fold must match once the projector has caught up.
	var code int
	var out string
	w.eventually("replay --verify exits 0", 30*time.Second, func() bool {
		code, out = w.runCLI("replay", "--nats-url", w.url, "--stream-replicas", fmt.Sprint(w.replicas),
			"--namespace", w.ns, "--manager", managerName, "--verify", "--kubeconfig", kenv.Kubeconfig)
		return code == 0
	})
	assert.Contains(t, out, "verified: 1 upgrade(s)")

	h, err := w.refresh()
	require.NoError(t, err)
	lost, dups, detail := countTransitions(h, w.nodes)
	assert.Zero(t, lost, "transitions lost: %v", detail)
	assert.Zero(t, dups, "duplicated transitions: %v", detail)

	io := w.sim.IOStats()
	assert.NotZero(t, io.Issued, "the I/O checker ran")
	assert.Zero(t, io.Failed, "failed I/Os: %+v", io.Failures)
	assert.Empty(t, w.sim.Unsafe(""), "nothing left unsafe")
	require.NotEmpty(t, st.InstanceManagerImage)
	for _, n := range w.nodes {
		ims, err := w.sim.InstanceManagers(w.ctx, n)
		require.NoError(t, err)
		for _, im := range ims {
			assert.Equal(t, st.InstanceManagerImage, im.Image, "IM %s runs the target image", im.Name)
		}
		node, err := w.sim.Node(w.ctx, n)
		require.NoError(t, err)
		assert.True(t, node.AllowScheduling, "node %s schedules replicas again", n)
	}
	w.failIfExited()
}

// takeFigures fills the run's row from the stream and the simulator.
func (w *world) takeFigures() {
	h, _ := w.refresh()
	w.res.lost, w.res.dups, _ = countTransitions(h, w.nodes)
	w.res.failedIO = int(w.sim.IOStats().Failed)
}

// runCLI runs the switchback binary to completion and returns its exit
// code and combined output.
func (w *world) runCLI(args ...string) (int, string) {
	ctx, cancel := context.WithTimeout(w.ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binPath, args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), string(out)
		}
		return -1, err.Error() + "\n" + string(out)
	}
	return 0, string(out)
}
