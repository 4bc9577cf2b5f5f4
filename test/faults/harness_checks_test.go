//go:build linux

package faults

import (
	"fmt"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/api/v1beta2"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/test/harness/enginetest"
	"github.com/switchback-dev/switchback/topology"
)

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
// unsafe (every spec.engineNodeID as its user set it), no command parked as
// dead, every upgraded node
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
		code, out = w.runCLI(append([]string{"replay", "--nats-url", w.url, "--stream-replicas", fmt.Sprint(w.replicas),
			"--namespace", w.ns, "--manager", managerName, "--verify", "--kubeconfig", kenv.Kubeconfig}, w.credentialFlags("", true)...)...)
		return code == 0
	})
	assert.Contains(t, out, "verified: 1 upgrade(s)")

	// A read right after a cluster server restarted may meet a stream
	// whose direct-get responders are not back yet: read until one answers.
	var h []events.Envelope
	var err error
	w.eventually("the history reads", 30*time.Second, func() bool {
		h, err = w.refresh()
		return err == nil
	})
	require.NoError(t, err)
	lost, dups, detail := countTransitions(h, w.nodes)
	assert.Zero(t, lost, "transitions lost: %v", detail)
	assert.Zero(t, dups, "duplicated transitions: %v", detail)

	// No command was lost: none was parked as dead.
	var dead uint64
	w.eventually("the dead-letter stream reads", 30*time.Second, func() bool {
		s, err := w.js.Stream(w.ctx, topology.DeadLetterStream)
		if err != nil {
			return false
		}
		info, err := s.Info(w.ctx)
		if err != nil {
			return false
		}
		dead = info.State.Msgs
		return true
	})
	assert.Zero(t, dead, "commands parked as dead")

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
