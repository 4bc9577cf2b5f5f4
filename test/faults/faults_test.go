//go:build linux

package faults

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/natsembed"
	"github.com/switchback-dev/switchback/sim"
	"github.com/switchback-dev/switchback/topology"
)

// Scenario names, as the summary table shows them.
const (
	scWorkerKill     = "kill -9 worker at each step"
	scControllerKill = "kill -9 controller mid-upgrade"
	scLeaderKill     = "two controllers, kill -9 the lease holder"
	scNATSRestart    = "NATS server restart (file store)"
	scClusterServer  = "R3 cluster: one server killed, later restarted"
	scAPIServer      = "apiserver stopped mid-upgrade"
	scConflicts      = "injected 409 conflicts on status writes"
	scNetworkDrop    = "worker-NATS connection cut during a long step"
	scLeaderNoNATS   = "two controllers, the lease holder partitioned from NATS"
	scMoveKill       = "move-workloads: kill -9 worker or controller mid-eviction"

	scLonghornWorkerKill     = "Longhorn v1.12: kill -9 worker at each step"
	scLonghornControllerKill = "Longhorn v1.12: kill -9 controller mid-upgrade"
	scLonghornAPIServer      = "Longhorn v1.12: apiserver stopped mid-upgrade"
)

// A worker is killed with SIGKILL inside each step in turn (one run per
// step), a fresh process takes over and the upgrade completes; the command
// the dead worker held comes back after the queue's AckWait.
//
// Most steps are a few quick calls, so a kill aimed from outside would land
// in a later step: the data plane holds the worker's first call of the step
// (see gate) and the worker dies there. Pending makes no call (the worker
// records the start and moves on in one go), so for it every worker is
// frozen (SIGSTOP) before the upgrade is requested and the scheduled node's
// worker is killed with the start command in its hands.
func TestKillWorkerAtEachStep(t *testing.T) {
	for _, step := range events.NodeSteps {
		t.Run(string(step), func(t *testing.T) {
			killWorkerAtStep(t, scWorkerKill, options{}, step, (*world).waitHeld)
		})
	}
}

// killWorkerAtStep kills, with SIGKILL, the worker of the node the gate
// stops in step once waitIn says the node is there (for pending, see
// killWorkerScheduled), starts a fresh process in its place and checks the
// upgrade to its end.
func killWorkerAtStep(t *testing.T, scenario string, opts options, step events.NodeState, waitIn func(*world) heldCall) {
	if step == events.NodePending {
		killWorkerScheduled(t, scenario, opts)
		return
	}
	opts.gateStep = step
	w := newWorld(t, scenario, opts)
	w.startController("c0")
	workers := w.startWorkers()
	w.createManager()

	held := waitIn(w)
	workers[held.node].kill9(t)
	// Only the node's worker appends its node's events: the last one says
	// where the kill landed. A step that makes no request is held by
	// nothing: one that only records (finalizing, on the Longhorn path) may
	// be over before the kill lands, which then lands right after it.
	landed := w.nodeState(held.node)
	if held.seen && landed != step {
		require.Greater(t, stepOrder(landed), stepOrder(step), "the kill landed in or after the step")
		t.Logf("worker of %s killed right after %s, at %s (the step makes no request to hold)", held.node, step, landed)
	} else {
		require.Equal(t, step, landed, "the kill landed inside the step")
	}
	t.Logf("worker of %s killed in %s (held: %q)", held.node, step, held.method)
	workers[held.node] = w.startWorker(held.node)
	w.gate.open()
	w.checkInvariants()
}

func killWorkerScheduled(t *testing.T, scenario string, opts options) {
	w := newWorld(t, scenario, opts)
	w.startController("c0")
	workers := w.startWorkers()
	w.eventually("every worker connected", 30*time.Second, func() bool { return readyCount(maps.Values(workers)) == len(workers) })
	for _, p := range workers {
		p.signal(t, syscall.SIGSTOP)
	}
	w.createManager()

	e := w.waitEvent("a node scheduled", stepTimeout, func(e events.Envelope) bool {
		_, ok := e.Data.(events.NodeScheduled)
		return ok
	})
	victim := e.Data.(events.NodeScheduled).Node
	workers[victim].kill9(t)
	require.Equal(t, events.NodeState(""), w.nodeState(victim), "killed before its node upgrade started")
	t.Logf("worker of %s killed while its node was scheduled (pending), before it started it", victim)
	for n, p := range workers {
		if n != victim {
			p.signal(t, syscall.SIGCONT)
		}
	}
	workers[victim] = w.startWorker(victim)
	w.checkInvariants()
}

// On Longhorn v1.12 with move-workloads every node of sim.ThreeNodes holds
// initiators, so each moves its pods before its IM is replaced. The worker,
// or the only controller, is killed with the first eviction in flight (held
// by the gate, and carried out once the gate opens, as a request the
// apiserver had received); a fresh process takes over, and no pod is
// evicted twice, no taint or mark is left behind, every pod runs somewhere.
func TestKillMidEviction(t *testing.T) {
	for _, victim := range []string{"worker", "controller"} {
		t.Run(victim, func(t *testing.T) {
			w := newWorld(t, scMoveKill, options{simConfig: sim.Config{Profile: dataplane.ProfileV112}, moveWorkloads: true,
				gateStep: events.NodeInitializing, gateCall: dataplane.CallEvictPod})
			c := w.startController("c0")
			workers := w.startWorkers()
			w.createManager()

			held := w.waitHeld()
			require.Equal(t, string(dataplane.CallEvictPod), held.method)
			if victim == "worker" {
				workers[held.node].kill9(t)
				workers[held.node] = w.startWorker(held.node)
			} else {
				c.kill9(t)
				w.startController("c1")
			}
			t.Logf("%s killed with an eviction of %s in flight", victim, held.node)
			w.gate.open()
			w.checkInvariants()
			w.checkMoves()
		})
	}
}

// checkMoves: no pod (by uid) was evicted twice, no node is left tainted
// or marked, and every pod runs on a node.
func (w *world) checkMoves() {
	t := w.t
	calls, _ := w.sim.ActionLog()
	evicted := map[string]int{}
	for _, c := range calls {
		if c.Action == string(dataplane.CallEvictPod) && !c.NoOp && c.Err == "" {
			evicted[c.Arg]++
		}
	}
	require.NotEmpty(t, evicted)
	for uid, n := range evicted {
		assert.Equal(t, 1, n, "pod uid %s evicted %d times", uid, n)
	}
	for _, n := range w.nodes {
		nd, err := w.sim.Node(w.ctx, n)
		require.NoError(t, err)
		assert.False(t, nd.WorkloadTainted, "node %s left tainted", n)
		assert.Empty(t, nd.UpgradePendingMark, "node %s left marked", n)
	}
	for _, p := range w.sim.Pods() {
		assert.NotEmpty(t, p.Node, "pod %s runs somewhere", p)
	}
}

// The same on the Longhorn path: the processes drive Longhorn v1.12.1's
// objects on the apiserver (--data-plane longhorn), a simulated Longhorn
// manager acts on them, and the workers' apiserver requests pass the gate.
// The storage nodes' steps all have work (see longhornWorld); a step that
// only waits on Longhorn makes no request, and is long enough for the kill
// to land inside it once the stream shows the node there.
func TestLonghornKillWorkerAtEachStep(t *testing.T) {
	for _, step := range events.NodeSteps {
		t.Run(string(step), func(t *testing.T) {
			killWorkerAtStep(t, scLonghornWorkerKill, options{longhorn: true}, step, (*world).waitInStep)
		})
	}
}

// The controller is killed while a storage node's switch-over is under way
// on the Longhorn path.
func TestLonghornKillControllerMidUpgrade(t *testing.T) {
	killControllerMidUpgrade(t, scLonghornControllerKill, options{longhorn: true})
}

// The apiserver, which on the Longhorn path is also where the workers see
// and drive Longhorn, stops while a storage node switches over: the worker
// waits (its writes fail, its caches stop), the controller loses its lease,
// Longhorn goes on; once it is back, everything resumes where it was.
func TestLonghornAPIServerStoppedMidUpgrade(t *testing.T) {
	w := newWorld(t, scLonghornAPIServer, options{longhorn: true})
	c := w.startController("c0")
	w.startWorkers()
	w.createManager()

	w.waitStep(events.NodeSwitchingOver)
	w.apiServerOutage(c, nil)
	w.checkInvariants()
}

// The only controller is killed with SIGKILL while a node is in flight (its
// switch-over held at the data plane, see gate); a new process of the same
// replica (same identity, as after a container restart) takes the lease over
// at once and the upgrade completes.
func TestKillControllerMidUpgrade(t *testing.T) {
	killControllerMidUpgrade(t, scControllerKill, options{})
}

func killControllerMidUpgrade(t *testing.T, scenario string, opts options) {
	opts.gateStep = events.NodeSwitchingOver
	w := newWorld(t, scenario, opts)
	c := w.startController("c0")
	w.startWorkers()
	w.createManager()

	w.waitInStep() // the upgrade is certainly in flight
	c.kill9(t)
	w.gate.open()
	c = w.startController("c0")
	w.eventually("the new process leads", 30*time.Second, c.leading)
	w.checkInvariants()
}

// Two controllers race for the lease from the start; exactly one leads.
// Mid-upgrade (a switch-over held at the data plane) the lease holder is
// killed with SIGKILL; the other takes over once the lease expires (4 s
// here, --leader-elect-lease-duration) and the upgrade completes.
func TestTwoControllersKillTheLeader(t *testing.T) {
	w := newWorld(t, scLeaderKill, options{gateStep: events.NodeSwitchingOver})
	cs := []*proc{w.startController("c0"), w.startController("c1")}
	w.startWorkers()
	var leader, other *proc
	w.eventually("exactly one controller leads", 60*time.Second, func() bool {
		leader, other = nil, nil
		n := 0
		for _, c := range cs {
			if c.leading() {
				n++
				leader = c
			} else {
				other = c
			}
		}
		return n == 1
	})
	w.createManager()

	w.waitHeld() // the upgrade is certainly in flight
	require.True(t, leader.leading(), "the lease holder still leads")
	leader.kill9(t)
	w.gate.open()
	w.eventually("the other controller takes the lease over", 60*time.Second, other.leading)
	w.checkInvariants()
}

// Two controllers; mid-upgrade the lease holder is partitioned from NATS
// (a black hole, not a reset) while it still reaches the apiserver and
// renews its lease. It steps down once NATS has been gone for a lease
// duration; the other replica, which reaches NATS, takes the lease and the
// upgrade goes on during the partition; healed, the first one competes
// again and the upgrade completes.
func TestLeaderPartitionedFromNATS(t *testing.T) {
	w := newWorld(t, scLeaderNoNATS, options{links: true})
	cs := []*proc{w.startController("c0"), w.startController("c1")}
	w.startWorkers()
	var leader, other *proc
	w.eventually("one controller leads", 60*time.Second, func() bool {
		leader, other = nil, nil
		for _, c := range cs {
			if c.leading() {
				leader = c
			} else {
				other = c
			}
		}
		return leader != nil && other != nil
	})
	w.createManager()

	w.waitStep(events.NodeSwitchingOver)
	l := w.link(leader.name, true)
	l.partitionNATS()
	t.Logf("%s partitioned from NATS", leader.name)
	w.eventually("the other controller takes the lease over", 60*time.Second, other.leading)
	require.Positive(t, countLines(leader.logPath, "stepping down"), "the partitioned leader stepped down")
	w.waitProgress("the upgrade goes on while the old leader is partitioned", 2)
	l.healNATS()
	w.checkInvariants()
}

// The NATS server (file store) is shut down mid-upgrade (a switch-over held
// at the data plane); once every process reports it lost NATS, it starts
// again on the same port and store; the processes reconnect and the upgrade
// completes.
func TestNATSRestartMidUpgrade(t *testing.T) {
	w := newWorld(t, scNATSRestart, options{gateStep: events.NodeSwitchingOver})
	procs := []*proc{w.startController("c0")}
	for _, p := range w.startWorkers() {
		procs = append(procs, p)
	}
	w.createManager()

	w.waitHeld() // the upgrade is certainly in flight
	w.srvMu.Lock()
	w.srv.Shutdown()
	w.srv = nil
	w.srvMu.Unlock()
	t.Log("NATS server shut down")
	w.eventually("every process sees NATS gone", 30*time.Second, func() bool { return readyCount(slices.Values(procs)) == 0 })
	srv, err := natsembed.Start(w.natsOpts)
	require.NoError(t, err)
	w.srvMu.Lock()
	w.srv = srv
	w.srvMu.Unlock()
	t.Log("NATS server restarted on the same port and store")
	w.eventually("every process reconnects", 30*time.Second, func() bool { return readyCount(slices.Values(procs)) == len(procs) })
	w.gate.open()
	w.checkInvariants()
}

// A 3-server JetStream cluster with the streams at R3: the event stream's
// leader is shut down mid-upgrade (a switch-over held at the data plane,
// let go once the server is down); the upgrade goes on with two servers,
// the server is restarted later and the upgrade completes with no event
// lost.
func TestClusterServerKilledAndRestarted(t *testing.T) {
	w := newWorld(t, scClusterServer, options{cluster: true, gateStep: events.NodeSwitchingOver})
	w.startController("c0")
	w.startWorkers()
	w.createManager()

	w.waitHeld() // the upgrade is certainly in flight
	info, err := w.streamInfo()
	require.NoError(t, err)
	require.NotNil(t, info.Cluster)
	victim := -1
	for i, s := range w.cluster.Servers {
		if s != nil && s.Name() == info.Cluster.Leader {
			victim = i
		}
	}
	require.GreaterOrEqual(t, victim, 0, "the stream leader %q is one of the servers", info.Cluster.Leader)
	w.cluster.Stop(victim)
	t.Logf("stream leader %s shut down", info.Cluster.Leader)
	w.gate.open()
	w.waitProgress("the upgrade goes on with two servers", 3)
	require.NoError(t, w.cluster.Restart(victim))
	t.Logf("server %d restarted", victim)
	w.checkInvariants()
	// The restarted server caught up: it holds every event too.
	w.eventually("the restarted server is a current replica", 30*time.Second, func() bool {
		info, err := w.streamInfo()
		if err != nil || info.Cluster == nil {
			return false
		}
		for _, r := range info.Cluster.Replicas {
			if r.Name == w.cluster.Servers[victim].Name() {
				return r.Current && r.Lag == 0
			}
		}
		return info.Cluster.Leader == w.cluster.Servers[victim].Name()
	})
}

func (w *world) streamInfo() (*jetstream.StreamInfo, error) {
	s, err := w.js.Stream(w.ctx, topology.EventStream)
	if err != nil {
		return nil, err
	}
	return s.Info(w.ctx)
}

// The kube-apiserver is stopped mid-upgrade (etcd keeps running) for longer
// than the controller's lease: the worker with a command in hand finishes its
// step in NATS alone; the leader, unable to renew, stops leading (by design:
// it must assume another replica leads), so no new step is issued; once the
// apiserver is back the controller leads again, the upgrade completes and
// the projection catches up, nothing lost. The apiserver's graceful stop
// takes seconds, longer than a whole upgrade here, so the first node is held
// in switching-over (its target cannot move) until the apiserver is down.
func TestAPIServerStoppedMidUpgrade(t *testing.T) {
	w := newWorld(t, scAPIServer, options{})
	held := []string{"vol-0", "vol-3", "vol-5"} // one target on each node
	for _, v := range held {
		require.NoError(t, w.sim.InjectTargetMoveFailure(v))
	}
	c := w.startController("c0")
	w.startWorkers()
	w.createManager()

	w.waitStep(events.NodeSwitchingOver)
	w.apiServerOutage(c, func() {
		for _, v := range held {
			require.NoError(t, w.sim.HealTargetMoveFailure(v))
		}
		w.waitProgress("the worker finishes its step without the apiserver", 1)
	})
	w.checkInvariants()
}

// Every third status write of the controller gets a 409 Conflict from a
// proxy in front of the apiserver; the projector retries and the status
// still matches the stream.
func TestInjectedConflicts(t *testing.T) {
	w := newWorld(t, scConflicts, options{})
	proxy, kubeconfig := newConflictProxy(t, w, 3)
	w.opts.kubeconfig = kubeconfig
	w.startController("c0")
	w.startWorkers()
	w.createManager()
	w.checkInvariants()
	assert.NotZero(t, proxy.injected.Load(), "409s were injected (%d status writes)", proxy.writes.Load())
	t.Logf("%d of %d status writes answered 409", proxy.injected.Load(), proxy.writes.Load())
}

// Each worker reaches NATS through a proxy. While a node is upgrading its
// instance manager, a long step (the new IM errors until the suite heals it,
// then takes 1 s to start), its worker's connection is cut twice; the worker
// reconnects each time and the upgrade completes.
func TestWorkerConnectionCutDuringLongStep(t *testing.T) {
	proxies := map[string]*tcpProxy{}
	opts := options{
		simConfig: sim.Config{Profile: dataplane.ProfileInPlace, TargetMoveLatency: 40 * time.Millisecond, IMStartLatency: time.Second, RebuildLatency: 40 * time.Millisecond},
		workerURL: func(node string) string { return proxies[node].URL() },
	}
	w := newWorld(t, scNetworkDrop, opts)
	target := strings.TrimPrefix(w.url, "nats://")
	for _, n := range w.nodes {
		proxies[n] = newTCPProxy(t, w, target)
		// Whichever node goes first stays in the step until healed.
		require.NoError(t, w.sim.InjectIMStartFailure(n))
	}
	w.startController("c0")
	workers := w.startWorkers()
	w.createManager()

	node := w.waitStep(events.NodeUpgradingInstanceManager)
	p := proxies[node]
	for i := range 2 {
		before := p.accepted.Load()
		n := p.cut()
		t.Logf("cut %d: dropped %d connection(s) of worker %s", i+1, n, node)
		require.NotZero(t, n, "the worker was connected")
		w.eventually(fmt.Sprintf("worker %s reconnects after cut %d", node, i+1), 30*time.Second, func() bool {
			return p.accepted.Load() > before && workers[node].ready()
		})
	}
	h, err := w.refresh()
	require.NoError(t, err)
	require.False(t, nodeLeft(h, node, events.NodeUpgradingInstanceManager), "the cuts landed inside the step")
	for _, n := range w.nodes {
		require.NoError(t, w.sim.HealIMStartFailure(n))
	}
	w.checkInvariants()
}

// nodeLeft reports whether node has left step in h.
func nodeLeft(h []events.Envelope, node string, step events.NodeState) bool {
	for _, e := range h {
		if d, ok := e.Data.(events.NodeStateChanged); ok && e.Aggregate.Node == node && d.From == step {
			return true
		}
	}
	return false
}

// stepOrder places a node state in the walk: its working step's index, the
// terminal states after every step.
func stepOrder(s events.NodeState) int {
	if i := slices.Index(events.NodeSteps, s); i >= 0 {
		return i
	}
	return len(events.NodeSteps)
}
