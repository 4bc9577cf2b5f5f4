package main

import (
	"bufio"
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/metrics"
	"github.com/switchback-dev/switchback/natsembed"
	"github.com/switchback-dev/switchback/sim"
	"github.com/switchback-dev/switchback/sim/simremote"
	"github.com/switchback-dev/switchback/test/harness/proctest"
	"github.com/switchback-dev/switchback/test/harness/testenv"
	"github.com/switchback-dev/switchback/topology"
)

// The per-process series, each read from its own process's /metrics: a
// worker reports switchback_ready 0 while it waits for the controller and 1
// once it can work, and never switchback_leader; of two controllers exactly
// the one holding the Lease reports switchback_leader 1, and when it stops
// (releasing the Lease) the other takes over and reports 1.
func TestLeaderAndReadySeries(t *testing.T) {
	env := testenv.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ensureNamespace(t, ctx, env)
	srv, err := natsembed.Start(natsembed.Options{StoreDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(srv.Shutdown)
	nc, err := srv.Connect()
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	cluster := sim.New(sim.Config{})
	require.NoError(t, cluster.AddNode("n1"))
	served, err := simremote.Serve(nc, topology.SimPrefix, cluster)
	require.NoError(t, err)
	t.Cleanup(served.Stop)

	// A lease of its own, so that no other test's controller competes.
	const ns = "leader-metric"
	_, stderr, err := env.Kubectl(ctx, strings.NewReader("apiVersion: v1\nkind: Namespace\nmetadata: {name: "+ns+"}\n"), "apply", "-f", "-")
	require.NoError(t, err, stderr)

	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	start := func(args ...string) (health string, stop func()) {
		health = proctest.FreeAddr(t)
		runCtx, cancelRun := context.WithCancel(ctx)
		done := make(chan struct{})
		wg.Go(func() {
			defer close(done)
			var out strings.Builder
			if code := run(runCtx, "switchback", append(args, "--health-addr", health, "--log-level", "error"), &out, &out); code != 0 && runCtx.Err() == nil {
				t.Errorf("%v exited %d:\n%s", args, code, out.String())
			}
		})
		t.Cleanup(cancelRun)
		return health, func() { cancelRun(); <-done }
	}
	value := func(health, name string) (float64, bool) {
		code, body := get(t, "http://"+health+"/metrics")
		if code != 200 {
			return 0, false
		}
		return sampleValue(body, name)
	}
	is := func(health, name string, want float64) func() bool {
		return func() bool { v, ok := value(health, name); return ok && v == want }
	}

	worker, _ := start("worker", "--data-plane", "sim", "--node", "n1", "--nats-url", srv.ClientURL())
	require.Eventually(t, is(worker, metrics.ReadyName, 0), 30*time.Second, 20*time.Millisecond, "the worker waiting for the controller is not ready")
	_, exported := value(worker, metrics.LeaderName)
	assert.False(t, exported, "a worker reports no leadership")

	controller := func(id string) (string, func()) {
		return start("controller", "--data-plane", "sim", "--kubeconfig", env.Kubeconfig, "--nats-url", srv.ClientURL(), "--namespace", ns, "--webhook-addr", "", "--id", id,
			"--leader-elect-lease-duration", "4s", "--leader-elect-renew-deadline", "3s", "--leader-elect-retry-period", "200ms")
	}
	c0, stop0 := controller("c0")
	c1, stop1 := controller("c1")
	leaders := func() (lead, follow []string) {
		for _, h := range []string{c0, c1} {
			switch v, ok := value(h, metrics.LeaderName); {
			case ok && v == 1:
				lead = append(lead, h)
			case ok && v == 0:
				follow = append(follow, h)
			}
		}
		return lead, follow
	}
	var leader, follower string
	require.Eventually(t, func() bool {
		lead, follow := leaders()
		if len(lead) == 1 && len(follow) == 1 {
			leader, follower = lead[0], follow[0]
			return true
		}
		return false
	}, time.Minute, 20*time.Millisecond, "one controller reports switchback_leader 1, the other 0")
	_, body := get(t, "http://"+leader+"/leader")
	assert.Equal(t, "true", strings.TrimSpace(body), "/leader agrees")
	for _, h := range []string{c0, c1} {
		assert.True(t, is(h, metrics.ReadyName, 1)(), "a controller connected to NATS is ready, leading or not")
	}
	require.Eventually(t, is(worker, metrics.ReadyName, 1), 30*time.Second, 20*time.Millisecond, "the worker is ready once the leader created its consumer")

	// The leader stops and releases the Lease: the other leads.
	if leader == c0 {
		stop0()
	} else {
		stop1()
	}
	require.Eventually(t, is(follower, metrics.LeaderName, 1), 30*time.Second, 20*time.Millisecond, "the other controller takes the Lease over")
}

// sampleValue is the value of the unlabelled sample name in a Prometheus
// text exposition.
func sampleValue(exposition, name string) (float64, bool) {
	sc := bufio.NewScanner(strings.NewReader(exposition))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f, err == nil
		}
	}
	return 0, false
}
