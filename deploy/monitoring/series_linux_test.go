//go:build linux

package monitoring

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchback-dev/switchback/test/harness/proctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/natsembed"
	"github.com/switchback-dev/switchback/sim"
	"github.com/switchback-dev/switchback/sim/simremote"
	"github.com/switchback-dev/switchback/test/harness/testenv"
	"github.com/switchback-dev/switchback/topology"
)

// TestRulesAndDashboardReadExportedSeries: every series name the alerts and
// the dashboard read is exported on /metrics by a real `switchback
// controller` or `switchback worker` process (the built binary, on embedded
// NATS and the test apiserver) at some point of an upgrade that stalls on a
// stuck volume and then completes; a series selected by job is exported by
// that job's process. It fails naming each missing series and who reads it.
func TestRulesAndDashboardReadExportedSeries(t *testing.T) {
	env := testenv.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	kubectl(t, nil, "apply", "-f", repoPath(t, "deploy", "testdata", "longhorn-namespace.yaml"))
	bin := buildSwitchback(t)

	srv, err := natsembed.Start(natsembed.Options{StoreDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(srv.Shutdown)
	nc, err := srv.Connect()
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	cluster, err := sim.ThreeNodes(sim.Config{Profile: dataplane.ProfileInPlace,
		TargetMoveLatency: 10 * time.Millisecond, IMStartLatency: 20 * time.Millisecond, RebuildLatency: 10 * time.Millisecond})
	require.NoError(t, err)
	// vol-0 has its target on n1: n1's switch-over stalls until healed.
	require.NoError(t, cluster.InjectTargetMoveFailure("vol-0"))
	served, err := simremote.Serve(nc, topology.SimPrefix, cluster)
	require.NoError(t, err)
	t.Cleanup(served.Stop)

	logs := t.TempDir()
	controller := startProcess(t, ctx, bin, logs, "controller", "controller", "--data-plane", "sim", "--kubeconfig", env.Kubeconfig, "--nats-url", srv.ClientURL(),
		"--namespace", namespace, "--webhook-addr", "", "--log-level", "debug")
	workers := map[string]*process{}
	for _, n := range []string{"n1", "n2", "n3"} {
		workers[n] = startProcess(t, ctx, bin, logs, "worker-"+n, "worker", "--data-plane", "sim", "--node", n, "--nats-url", srv.ClientURL(),
			"--poll-interval", "20ms", "--stall-after", "200ms", "--log-level", "debug")
	}

	manifest := "apiVersion: longhorn.io/v1beta2\nkind: DataEngineUpgradeManager\n" +
		"metadata: {name: monitored, namespace: " + namespace + "}\nspec: {dataEngine: v2}\n"
	kubectl(t, []byte(manifest), "apply", "-f", "-")

	exported := map[string]map[string]bool{controllerName: {}, workerName: {}}
	scrapeAll := func() {
		t.Helper()
		maps.Copy(exported[controllerName], controller.seriesNames(t))
		for _, w := range workers {
			maps.Copy(exported[workerName], w.seriesNames(t))
		}
	}
	// While n1 is stalled: the stall's series exist only now.
	require.Eventually(t, func() bool {
		return controller.seriesNames(t)["switchback_stalled_nodes"]
	}, 2*time.Minute, 50*time.Millisecond, "the controller exports switchback_stalled_nodes while n1 is stalled\n%s", controller.tail())
	scrapeAll()

	require.NoError(t, cluster.HealTargetMoveFailure("vol-0"))
	kubectl(t, nil, "-n", namespace, "wait", "--for=condition=Ready", "lhum/monitored", "--timeout=120s")
	scrapeAll()
	assert.False(t, controller.seriesNames(t)["switchback_stalled_nodes"], "no stall left once completed")

	all := map[string]bool{}
	for _, names := range exported {
		maps.Copy(all, names)
	}
	missing := map[string][]string{}
	for _, u := range usedSeries(t) {
		switch {
		case u.job != "" && !exported[u.job][u.name]:
			missing[u.name] = append(missing[u.name], fmt.Sprintf("%s (job %s)", u.where, u.job))
		case !all[u.name]:
			missing[u.name] = append(missing[u.name], u.where)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(missing)) {
		t.Errorf("series %s is read by %s but no process exports it", name, strings.Join(slices.Compact(missing[name]), ", "))
	}
	if t.Failed() {
		t.Logf("the controller exports: %s", strings.Join(slices.Sorted(maps.Keys(exported[controllerName])), " "))
		t.Logf("the workers export: %s", strings.Join(slices.Sorted(maps.Keys(exported[workerName])), " "))
	}
	kubectl(t, nil, "-n", namespace, "delete", "lhum/monitored", "--timeout=60s")
}

// buildSwitchback builds cmd/switchback into a temporary directory.
func buildSwitchback(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "switchback")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/switchback")
	cmd.Dir = repoPath(t)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go build ./cmd/switchback:\n%s", out)
	return bin
}

// process is one running switchback process.
type process struct {
	name, health, log string
}

// startProcess runs `switchback args...` with its health endpoint on a free
// loopback port and its output in a log file under logs; it is stopped
// (SIGTERM, then SIGKILL) when the test ends, and killed by the kernel if
// the test binary dies first.
func startProcess(t *testing.T, ctx context.Context, bin, logs, name string, args ...string) *process {
	t.Helper()
	p := &process{name: name, health: proctest.FreeAddr(t), log: filepath.Join(logs, name+".log")}
	f, err := os.Create(p.log)
	require.NoError(t, err)
	cmd := exec.CommandContext(ctx, bin, append(args, "--health-addr", p.health)...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	require.NoError(t, cmd.Start(), "start %s", name)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); f.Close(); close(done) }()
	t.Cleanup(func() {
		proctest.Stop(cmd.Process, done)
		if t.Failed() {
			t.Logf("---- %s: last lines of %s\n%s", p.name, p.log, p.tail())
		}
	})
	return p
}

// seriesNames scrapes the process's /metrics and returns the names of the
// samples it exports (a histogram's _bucket, _sum and _count); none while
// the endpoint does not answer yet.
func (p *process) seriesNames(t *testing.T) map[string]bool {
	t.Helper()
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + p.health + "/metrics")
	if err != nil {
		return map[string]bool{}
	}
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s /metrics", p.name)
	names := map[string]bool{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		// The text format's "# TYPE <name> <type>" heads each family that
		// has samples.
		f := strings.Fields(sc.Text())
		if len(f) != 4 || f[0] != "#" || f[1] != "TYPE" {
			continue
		}
		switch f[3] {
		case "histogram":
			names[f[2]+"_bucket"], names[f[2]+"_sum"], names[f[2]+"_count"] = true, true, true
		case "summary":
			names[f[2]], names[f[2]+"_sum"], names[f[2]+"_count"] = true, true, true
		default:
			names[f[2]] = true
		}
	}
	require.NoError(t, sc.Err())
	return names
}

// tail is the end of the process's log.
func (p *process) tail() string {
	b, err := os.ReadFile(p.log)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-30):], "\n")
}
