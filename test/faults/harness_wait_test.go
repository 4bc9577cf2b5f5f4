//go:build linux

package faults

import (
	"context"
	"strings"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/switchback-dev/switchback/api/v1beta2"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/eventstore"
)

// createManager does what the user does: create a DataEngineUpgradeManager.
func (w *world) createManager() {
	w.t.Helper()
	spec := v1beta2.DataEngineUpgradeManagerSpec{DataEngine: v1beta2.DataEngineTypeV2, Nodes: w.requested}
	if w.opts.moveWorkloads {
		spec.InitiatorPolicy = v1beta2.InitiatorPolicyMoveWorkloads
	}
	m, err := w.kc.Managers(w.ns).Create(w.ctx, &v1beta2.DataEngineUpgradeManager{
		ObjectMeta: metav1.ObjectMeta{Name: managerName, Namespace: w.ns},
		Spec:       spec,
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
	return w.refreshWithin(3 * time.Second)
}

// refreshWithin is refresh giving up after timeout.
func (w *world) refreshWithin(timeout time.Duration) ([]events.Envelope, error) {
	w.mu.Lock()
	ref, from := w.ref, w.lastSeq+1
	w.mu.Unlock()
	ctx, cancel := context.WithTimeout(w.ctx, timeout)
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
				return heldCall{node: n, method: "none yet (the step waits on Longhorn)", seen: true}
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

// apiServerOutage stops the shared apiserver, runs during (when not nil)
// without it, waits until controller c stops leading (it cannot renew its
// lease), starts the apiserver again and waits until c leads again. When
// the test fails before the apiserver is back, it is started again at the
// test's end, for the scenarios after it.
func (w *world) apiServerOutage(c *proc, during func()) {
	w.t.Helper()
	began := time.Now()
	require.NoError(w.t, kenv.StopAPIServer())
	stopped := true
	w.t.Cleanup(func() {
		if stopped {
			require.NoError(w.t, kenv.StartAPIServer(w.ctx), "restart the shared apiserver")
		}
	})
	w.t.Logf("kube-apiserver stopped (stop took %s)", time.Since(began).Round(time.Millisecond))
	if during != nil {
		during()
	}
	w.eventually("the controller stops leading: it cannot renew its lease", stepTimeout,
		func() bool { return countLines(c.logPath, "stopped leading") > 0 })
	require.NoError(w.t, kenv.StartAPIServer(w.ctx))
	stopped = false
	w.t.Log("kube-apiserver started again")
	w.eventually("the controller leads again", stepTimeout, c.leading)
}
