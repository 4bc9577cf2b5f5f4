//go:build linux

package faults

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/natsembed"
)

// injection is one fault of a schedule as it was played.
type injection struct {
	fault
	began, ended time.Time
	// missed: the upgrade ended before the fault's point.
	missed bool
	// recovery: from the end of the fault to the upgrade's next step
	// (recovered false: no step came after it).
	recovery  time.Duration
	recovered bool
}

// nemesis plays a schedule on a world.
type nemesis struct {
	w      *world
	sched  schedule
	played []*injection
	// quiet is how many quiet points were checked.
	quiet int
	// restarts: how many times the kubelet restarted a process.
	restarts int
	// apiserverDown is set while the shared apiserver is stopped, so that a
	// failing run starts it again for the runs after it.
	apiserverDown bool
}

// play injects each fault once the upgrade reaches its point, heals it
// after its hold, and at every quiet point (no fault active, the upgrade
// moved on since the last heal) checks what must hold at any time. It
// returns when every fault was healed, or when the upgrade ended (a fault
// whose point did not come is missed; active ones are healed then).
func (n *nemesis) play() {
	w := n.w
	t := w.t
	t.Cleanup(func() {
		if n.apiserverDown {
			assert.NoError(t, kenv.StartAPIServer(w.ctx), "restart the shared apiserver")
		}
	})
	pending := append([]fault(nil), n.sched.faults...)
	var active []*injection
	for len(pending) > 0 || len(active) > 0 {
		// A read waits out NATS faults, but not past the next heal.
		within := 3 * time.Second
		for _, in := range active {
			within = min(within, max(in.hold-time.Since(in.began), 50*time.Millisecond))
		}
		h, _ := w.refreshWithin(within)
		done := upgradeEnded(h)
		progress := stateChanges(h)
		for len(pending) > 0 && (done || pending[0].at <= progress) {
			in := &injection{fault: pending[0]}
			pending = pending[1:]
			n.played = append(n.played, in)
			if done {
				in.missed = true
				continue
			}
			n.inject(in)
			active = append(active, in)
		}
		var still []*injection
		for _, in := range active {
			if done || time.Since(in.began) >= in.hold {
				n.heal(in)
				continue
			}
			still = append(still, in)
		}
		healed := len(still) < len(active)
		active = still
		if healed && len(active) == 0 && !done {
			n.quietPoint(progress)
		}
		w.failIfExited()
		if w.ctx.Err() != nil {
			t.Fatalf("the run's time is up with %d fault(s) active and %d to come", len(active), len(pending))
		}
		time.Sleep(pollEvery)
	}
}

// quietPoint waits for the upgrade's next step after the last fault
// healed (it must come: a stall with nothing faulty is a violation), then
// checks what holds at any time: no I/O failed, no transition twice, no
// process died on its own.
func (n *nemesis) quietPoint(progress int) {
	w := n.w
	w.t.Helper()
	w.eventually("the upgrade moves on once every fault healed", stepTimeout, func() bool {
		h, _ := w.refresh()
		return stateChanges(h) > progress || upgradeEnded(h)
	})
	h, err := w.refresh()
	require.NoError(w.t, err)
	_, dups, detail := countTransitions(h, w.nodes)
	require.Zero(w.t, dups, "no transition twice at a quiet point: %v", detail)
	io := w.sim.IOStats()
	require.Zero(w.t, io.Failed, "no failed I/O at a quiet point: %+v", io.Failures)
	n.quiet++
}

// inject begins a fault.
func (n *nemesis) inject(in *injection) {
	w, t := n.w, n.w.t
	t.Helper()

	switch in.kind {
	case fkWorkerKill:
		if p := w.current("worker-" + in.target); p != nil && p.alive() {
			p.kill9(t)
		}
	case fkControllerKill:
		if p := n.leader(); p != nil {
			in.target = strings.TrimPrefix(p.name, "controller-")
			p.kill9(t)
		}
	case fkControllerNATS, fkControllerAPIServer:
		in.target = "c0"
		if p := n.leader(); p != nil {
			in.target = strings.TrimPrefix(p.name, "controller-")
		}
		l := w.link("controller-"+in.target, true)
		if in.kind == fkControllerNATS {
			l.partitionNATS()
		} else {
			l.api.block()
		}
	case fkNATSServer:
		if n.sched.cluster {
			w.cluster.Stop(serverIndex(t, in.target))
		} else {
			w.srvMu.Lock()
			w.srv.Shutdown()
			w.srv = nil
			w.srvMu.Unlock()
		}
	case fkWorkerPartition:
		w.link("worker-"+in.target, false).partitionNATS()
	case fkAPIServer:
		require.NoError(t, kenv.StopAPIServer())
		n.apiserverDown = true
	case fkSlowPlane:
		w.plane.delay.Store(int64(in.delay))
	case fkFlakyPlane:
		w.plane.flaky.Store(true)
	default:
		t.Fatalf("nemesis: no way to inject %q", in.kind)
	}
	in.began = time.Now()
	t.Logf("nemesis: %s begins (%s)", in.fault, in.began.Format("15:04:05.000"))
}

// heal ends a fault.
func (n *nemesis) heal(in *injection) {
	w, t := n.w, n.w.t
	t.Helper()
	switch in.kind {
	case fkWorkerKill:
		if p := w.current("worker-" + in.target); p == nil || !p.alive() {
			w.startWorker(in.target)
		}
	case fkControllerKill:
		if p := w.current("controller-" + in.target); in.target != "" && (p == nil || !p.alive()) {
			w.startController(in.target)
		}
	case fkNATSServer:
		if n.sched.cluster {
			require.NoError(t, w.cluster.Restart(serverIndex(t, in.target)))
		} else {
			srv, err := natsembed.Start(w.natsOpts)
			require.NoError(t, err)
			w.srvMu.Lock()
			w.srv = srv
			w.srvMu.Unlock()
		}
	case fkWorkerPartition:
		w.link("worker-"+in.target, false).healNATS()
	case fkControllerNATS:
		w.link("controller-"+in.target, true).healNATS()
	case fkControllerAPIServer:
		w.link("controller-"+in.target, true).api.heal()
	case fkAPIServer:
		require.NoError(t, kenv.StartAPIServer(w.ctx))
		n.apiserverDown = false
	case fkSlowPlane:
		w.plane.delay.Store(0)
	case fkFlakyPlane:
		w.plane.flaky.Store(false)
	}
	in.ended = time.Now()
	t.Logf("nemesis: %s healed after %s (%s)", in.fault, in.ended.Sub(in.began).Round(time.Millisecond), in.ended.Format("15:04:05.000"))
}

// serverIndex is the index of an R3 cluster's server a fault's target
// names ("server 1").
func serverIndex(t require.TestingT, target string) int {
	i, err := strconv.Atoi(strings.TrimPrefix(target, "server "))
	require.NoError(t, err, "fault target %q", target)
	return i
}

// leader is the controller holding the lease (the first one alive when
// none does: the lease may be between holders).
func (n *nemesis) leader() *proc {
	var alive *proc
	for i := range n.sched.controllers {
		p := n.w.current(fmt.Sprintf("controller-c%d", i))
		if p == nil || !p.alive() {
			continue
		}
		if p.leading() {
			return p
		}
		if alive == nil {
			alive = p
		}
	}
	return alive
}

// measureRecoveries sets each healed fault's recovery from the history:
// the time of the first step the upgrade took after the fault ended.
func (n *nemesis) measureRecoveries(h []events.Envelope) {
	for _, in := range n.played {
		if in.missed || in.ended.IsZero() {
			continue
		}
		for _, e := range h {
			if isStep(e) && e.Time.After(in.ended) {
				in.recovery, in.recovered = e.Time.Sub(in.ended), true
				n.w.t.Logf("nemesis: %s: recovered in %s (%s at %s)", in.fault, in.recovery.Round(time.Millisecond), e.Type(), e.Time.Format("15:04:05.000"))
				break
			}
		}
	}
}

// stateChanges counts the node state changes in h: the upgrade's progress.
func stateChanges(h []events.Envelope) int {
	c := 0
	for _, e := range h {
		if _, ok := e.Data.(events.NodeStateChanged); ok {
			c++
		}
	}
	return c
}

// isStep reports whether e is a step of the upgrade: a node changing
// state or completing, the manager completing.
func isStep(e events.Envelope) bool {
	switch e.Data.(type) {
	case events.NodeStateChanged, events.NodeUpgradeCompleted, events.UpgradeCompleted:
		return true
	}
	return false
}

// upgradeEnded reports whether the manager's upgrade ended in h.
func upgradeEnded(h []events.Envelope) bool {
	for _, e := range h {
		switch e.Data.(type) {
		case events.UpgradeCompleted, events.UpgradeFailed, events.UpgradeCancelled:
			return true
		}
	}
	return false
}
