package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/natsauth"
	"github.com/switchback-dev/switchback/natsembed"
	"github.com/switchback-dev/switchback/natsembed/natstest"
	"github.com/switchback-dev/switchback/natsreload"
	"github.com/switchback-dev/switchback/sim"
	"github.com/switchback-dev/switchback/sim/simremote"
	"github.com/switchback-dev/switchback/test/harness/proctest"
	"github.com/switchback-dev/switchback/test/harness/syncbuf"
	"github.com/switchback-dev/switchback/test/harness/testenv"
	"github.com/switchback-dev/switchback/topology"
)

func get(t *testing.T, url string) (int, string) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// The production shape, in one process: NATS, a simulated cluster served on
// it, two controllers racing for the lease, one worker per node; a manager
// applied with kubectl is upgraded and shows up with kubectl get.
func TestControllerAndWorkersOnTheRealAPIServer(t *testing.T) {
	env := testenv.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ensureNamespace(t, ctx, env)

	srv, cluster, health := startProduction(t, ctx, env, production{controllers: 2})
	// Exactly one controller leads.
	require.Eventually(t, func() bool {
		leaders := 0
		for _, h := range health {
			if code, body := get(t, "http://"+h+"/leader"); code == 200 && strings.TrimSpace(body) == "true" {
				leaders++
			}
		}
		return leaders == 1
	}, 60*time.Second, 50*time.Millisecond, "one leader")

	// `history --follow` prints the upgrade as it happens.
	followCtx, stopFollow := context.WithCancel(ctx)
	var follow syncbuf.Buffer
	followDone := make(chan int, 1)
	go func() {
		followDone <- run(followCtx, "switchback", []string{"history", "e2e", "--follow", "--nats-url", srv.ClientURL()}, &follow, io.Discard)
	}()

	upgradeAllNodes(t, ctx, env, "e2e")

	out, stderr, err := env.Kubectl(ctx, nil, "-n", "longhorn-system", "get", "lhum,lhnu")
	require.NoError(t, err, stderr)
	assert.Regexp(t, `e2e\s+completed`, out)
	assert.Equal(t, 3, strings.Count(out, "completed")-1, "three node upgrades completed:\n%s", out)
	// Events are written asynchronously by the recorder: wait for the last.
	require.Eventually(t, func() bool {
		out, _, err = env.Kubectl(ctx, nil, "-n", "longhorn-system", "get", "events", "--field-selector", "involvedObject.name=e2e")
		return err == nil && strings.Contains(out, "UpgradeCompleted")
	}, 60*time.Second, 200*time.Millisecond, "the UpgradeCompleted Event:\n%s", out)

	require.Eventually(t, func() bool { return strings.Contains(follow.String(), "upgrade completed") }, 30*time.Second, 20*time.Millisecond,
		"history --follow shows the upgrade live")
	stopFollow()
	assert.Equal(t, 0, <-followDone)
	assert.Contains(t, follow.String(), "switching-over → upgrading-instance-manager")

	// The stream folds exactly to the live status.
	code, vout, verr := runCmd(t, time.Minute, "replay", "--nats-url", srv.ClientURL(), "--manager", "e2e", "--verify", "--kubeconfig", env.Kubeconfig)
	require.Equal(t, 0, code, "%s\n%s", vout, verr)
	assert.Contains(t, vout, "verified: 1 upgrade(s)")

	// Metrics are served.
	for _, h := range health {
		code, body := get(t, "http://"+h+"/metrics")
		require.Equal(t, 200, code)
		// One process here: the leader's and the workers' series share a
		// registry, so every series has samples by now.
		for _, series := range []string{"switchback_nodes{", "switchback_step_duration_seconds_bucket", "switchback_projection_lag_seconds_bucket",
			"switchback_dead_letters_total", "switchback_concurrency_conflicts_total", "switchback_events_appended_total", "go_goroutines"} {
			assert.Contains(t, body, series)
		}
	}

	// Deleting a finished manager: the finalizer goes, the object with it.
	_, stderr, err = env.Kubectl(ctx, nil, "-n", "longhorn-system", "delete", "lhum/e2e", "--timeout=60s")
	require.NoError(t, err, stderr)
	assert.Zero(t, cluster.IOStats().Failed)
}

// upgradeAllNodes applies a manager for every node with kubectl and waits
// until it is Ready.
func upgradeAllNodes(t *testing.T, ctx context.Context, env *testenv.Env, name string) {
	t.Helper()
	manifest := "apiVersion: longhorn.io/v1beta2\nkind: DataEngineUpgradeManager\n" +
		"metadata: {name: " + name + ", namespace: longhorn-system}\nspec: {dataEngine: v2}\n"
	_, stderr, err := env.Kubectl(ctx, strings.NewReader(manifest), "apply", "-f", "-")
	require.NoError(t, err, stderr)
	out, stderr, err := env.Kubectl(ctx, nil, "-n", "longhorn-system", "wait", "--for=condition=Ready", "lhum/"+name, "--timeout=90s")
	require.NoError(t, err, "%s %s", out, stderr)
}

// production says how startProduction runs the system.
type production struct {
	controllers int
	// authDir, when set, runs NATS under the authorization `switchback
	// nats-auth` writes there: each worker connects as its own node's user.
	authDir string
	// authMode is nats-auth's --mode: nkey (default) or password.
	authMode natsauth.Mode
	// nodeAccounts, with authDir, puts each worker alone in its node's
	// account (nats-auth's default); false shares one account
	// (--node-accounts=false).
	nodeAccounts bool
	// workerTokens, with authDir, runs the default install's shape: NATS
	// in auth callout mode (`nats-auth --callout`), the controller serving
	// the callout, each worker presenting the token file workerTokens
	// returns for its node. With nodeAccounts, no node is listed: the
	// controller writes the accounts of the Nodes into the servers' Secret,
	// which the server reads from files and loads twice as its reloader
	// does (natsreload).
	workerTokens func(node string) string
}

// credentialFlags are the flags that authenticate as the controller (node
// "") or as node's worker with what `nats-auth --out dir` wrote.
func credentialFlags(dir string, mode natsauth.Mode, node string) []string {
	if mode == natsauth.ModePassword {
		if node == "" {
			return []string{"--nats-user", natsauth.ControllerUser, "--nats-password-file", filepath.Join(dir, natsauth.ControllerDir, "password")}
		}
		return []string{"--nats-password-file", filepath.Join(dir, natsauth.WorkersDir, node+".password")}
	}
	if node == "" {
		return []string{"--nats-nkey", filepath.Join(dir, natsauth.ControllerDir, "controller.nk")}
	}
	return []string{"--nats-nkey", filepath.Join(dir, natsauth.WorkersDir, node+".nk")}
}

// startProduction runs NATS, a simulated cluster served on it, controllers
// (racing for the lease) and one worker per node, all in this process; they
// stop when the test ends. It returns the controllers' health addresses.
func startProduction(t *testing.T, ctx context.Context, env *testenv.Env, p production) (*natsembed.Server, *sim.Sim, []string) {
	t.Helper()
	nodes := []string{"n1", "n2", "n3"}
	opts := natsembed.Options{StoreDir: t.TempDir()}
	var controllerAuth []string
	workerAuth := func(string) []string { return nil }
	var connectAuth []nats.Option
	var files *natstest.FileServers
	if p.authDir != "" {
		mode := cmp.Or(p.authMode, natsauth.ModeNKey)
		gen := []string{"nats-auth", "--node", strings.Join(nodes, ","), "--sim", "--mode", string(mode), "--out", p.authDir}
		if p.workerTokens != nil {
			gen = []string{"nats-auth", "--callout", "--mode", string(mode), "--out", p.authDir}
		}
		gen = append(gen, fmt.Sprintf("--node-accounts=%t", p.nodeAccounts))
		followNodes := p.workerTokens != nil && p.nodeAccounts
		if followNodes {
			gen = append(gen, "--sim")
		}
		code, out, errOut := runCmd(t, time.Minute, gen...)
		require.Equal(t, 0, code, "%s\n%s", out, errOut)
		conf, err := os.ReadFile(filepath.Join(p.authDir, natsauth.ConfigFile))
		require.NoError(t, err)
		opts.Configure = func(o *server.Options) { require.NoError(t, o.ProcessConfigString(string(conf))) }
		controllerAuth = credentialFlags(p.authDir, mode, "")
		workerAuth = func(n string) []string { return credentialFlags(p.authDir, mode, n) }
		if p.nodeAccounts {
			workerAuth = func(n string) []string {
				return append(credentialFlags(p.authDir, mode, n), "--nats-api-prefix", strings.TrimSuffix(topology.NodeAPIPrefix, "."))
			}
		}
		if p.workerTokens != nil {
			controllerAuth = append(controllerAuth, "--nats-callout", filepath.Join(p.authDir, "callout"))
			workerAuth = func(n string) []string { return []string{"--nats-token-file", p.workerTokens(n)} }
		}
		if followNodes {
			workerAuth = func(n string) []string {
				return []string{"--nats-token-file", p.workerTokens(n), "--nats-api-prefix", strings.TrimSuffix(topology.NodeAPIPrefix, ".")}
			}
			files = natstest.StartFromFiles(t, 1, string(conf))
			followServerAuth(t, ctx, env, files, conf)
		}
		if mode == natsauth.ModePassword {
			pw, err := os.ReadFile(filepath.Join(p.authDir, natsauth.ControllerDir, "password"))
			require.NoError(t, err)
			connectAuth = append(connectAuth, nats.UserInfo(natsauth.ControllerUser, string(pw)))
		} else {
			o, err := nats.NkeyOptionFromSeed(filepath.Join(p.authDir, natsauth.ControllerDir, "controller.nk"))
			require.NoError(t, err)
			connectAuth = append(connectAuth, o)
		}
	}
	var srv *natsembed.Server
	if files != nil {
		srv = files.Servers[0]
	} else {
		var err error
		srv, err = natsembed.Start(opts)
		require.NoError(t, err)
		t.Cleanup(srv.Shutdown)
	}
	nc, err := srv.Connect(connectAuth...)
	require.NoError(t, err)
	cluster := sim.New(sim.Config{Profile: dataplane.ProfileInPlace, TargetMoveLatency: 10 * time.Millisecond})
	for _, n := range nodes {
		require.NoError(t, cluster.AddNode(n))
	}
	for i, a := range []string{"n1", "n2", "n3", ""} {
		require.NoError(t, cluster.AddVolume(fmt.Sprintf("pvc-%d", i), sim.EngineV2, nodes, a))
	}
	served, err := simremote.Serve(nc, topology.SimPrefix, cluster)
	require.NoError(t, err)
	t.Cleanup(served.Stop)

	var wg sync.WaitGroup
	runCtx, stop := context.WithCancel(ctx)
	t.Cleanup(func() { stop(); wg.Wait() })
	background := func(args ...string) {
		wg.Go(func() {
			var out strings.Builder
			if code := run(runCtx, "switchback", args, &out, &out); code != 0 && runCtx.Err() == nil {
				t.Errorf("%v exited %d:\n%s", args, code, out.String())
			}
		})
	}
	var health []string
	for i := range p.controllers {
		h := proctest.FreeAddr(t)
		health = append(health, h)
		background(append([]string{"controller", "--data-plane", "sim", "--kubeconfig", env.Kubeconfig, "--nats-url", srv.ClientURL(), "--webhook-addr", "",
			"--health-addr", h, "--id", fmt.Sprintf("controller-%d", i), "--log-level", "error"}, controllerAuth...)...)
	}
	for _, n := range nodes {
		background(append([]string{"worker", "--data-plane", "sim", "--node", n, "--nats-url", srv.ClientURL(), "--health-addr", "", "--poll-interval", "20ms",
			"--stall-after", "200ms", "--log-level", "error"}, workerAuth(n)...)...)
	}
	return srv, cluster, health
}

// followServerAuth plays the servers' side of the node accounts that follow
// the Nodes: it creates the servers' Secret from what nats-auth wrote, and
// whenever the controller rewrites it, writes it where the server reads it
// and has it load the change twice, as its reloader does (natsreload's own
// test runs the reloader on a nats-server process).
func followServerAuth(t *testing.T, ctx context.Context, env *testenv.Env, files *natstest.FileServers, generated []byte) {
	t.Helper()
	cs, err := kubernetes.NewForConfig(env.Config)
	require.NoError(t, err)
	secrets := cs.CoreV1().Secrets("longhorn-system")
	_, err = secrets.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: natsauth.ServerSecretName},
		Data: map[string][]byte{natsauth.ServerSecretKey: generated}}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = secrets.Delete(context.Background(), natsauth.ServerSecretName, metav1.DeleteOptions{}) })
	fctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	t.Cleanup(func() { stop(); <-done })
	go func() {
		defer close(done)
		loaded := string(generated)
		for fctx.Err() == nil {
			if s, err := secrets.Get(fctx, natsauth.ServerSecretName, metav1.GetOptions{}); err == nil {
				if conf := string(s.Data[natsauth.ServerSecretKey]); conf != loaded {
					if err := os.WriteFile(filepath.Join(files.Dir, natstest.AuthFile), []byte(conf), 0o600); err != nil {
						t.Errorf("write the servers' authorization: %v", err)
						return
					}
					for range natsreload.Reloads {
						if err := files.Servers[0].Reload(); err != nil {
							t.Errorf("reload: %v", err)
							return
						}
					}
					loaded = conf
				}
			}
			select {
			case <-fctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
}

// The production shape under per-node NATS users generated by `switchback
// nats-auth`: the controller creates the streams and every node's consumer,
// each worker binds to its own with its own nkey, and a whole upgrade
// completes with nothing denied.
func TestUpgradeUnderGeneratedNATSAuthorization(t *testing.T) {
	for _, mode := range []natsauth.Mode{natsauth.ModeNKey, natsauth.ModePassword} {
		t.Run(string(mode), func(t *testing.T) { upgradeUnderAuthorization(t, mode, false) })
	}
	// Each worker alone in its node's account, through its imports.
	t.Run("node-accounts", func(t *testing.T) { upgradeUnderAuthorization(t, natsauth.ModeNKey, true) })
}

func upgradeUnderAuthorization(t *testing.T, mode natsauth.Mode, nodeAccounts bool) {
	env := testenv.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ensureNamespace(t, ctx, env)
	dir := t.TempDir()
	srv, cluster, _ := startProduction(t, ctx, env, production{controllers: 1, authDir: dir, authMode: mode, nodeAccounts: nodeAccounts})

	upgradeAllNodes(t, ctx, env, "authz")
	code, vout, verr := runCmd(t, time.Minute, append([]string{"replay", "--nats-url", srv.ClientURL(),
		"--manager", "authz", "--verify", "--kubeconfig", env.Kubeconfig}, credentialFlags(dir, mode, "")...)...)
	require.Equal(t, 0, code, "%s\n%s", vout, verr)
	assert.Zero(t, cluster.IOStats().Failed)
	if nodeAccounts {
		// The reader, alone in its account, replays by direct gets.
		code, rout, rerr := runCmd(t, time.Minute, "replay", "--nats-url", srv.ClientURL(), "--manager", "authz", "--verify", "--kubeconfig", env.Kubeconfig,
			"--nats-nkey", filepath.Join(dir, natsauth.ReaderDir, "reader.nk"), "--nats-api-prefix", strings.TrimSuffix(topology.NodeAPIPrefix, "."))
		require.Equal(t, 0, code, "%s\n%s", rout, rerr)
		assert.Equal(t, vout, rout, "the reader's replay is the controller's")
	}

	// A worker holding n1's key cannot act as n2: it waits for a consumer
	// its user may not even look up, and says what it waits for.
	var werr syncbuf.Buffer
	wctx, wcancel := context.WithCancel(ctx)
	done := make(chan int, 1)
	go func() {
		// n1's credential, n2's name (and, in password mode, n1's user).
		creds := credentialFlags(dir, mode, "n1")
		if mode == natsauth.ModePassword {
			creds = append(creds, "--nats-user", natsauth.WorkerUser("n1"))
		}
		if nodeAccounts {
			creds = append(creds, "--nats-api-prefix", strings.TrimSuffix(topology.NodeAPIPrefix, "."))
		}
		done <- run(wctx, "switchback", append([]string{"worker", "--data-plane", "sim", "--node", "n2", "--nats-url", srv.ClientURL(), "--health-addr", ""}, creds...), io.Discard, &werr)
	}()
	require.Eventually(t, func() bool { return strings.Contains(werr.String(), "Permissions Violation") }, 30*time.Second, 20*time.Millisecond,
		"the denial is logged")
	assert.Contains(t, werr.String(), "worker-n2")
	wcancel()
	assert.NotEqual(t, 0, <-done, "the impostor never starts")
	_, _, err := env.Kubectl(ctx, nil, "-n", "longhorn-system", "delete", "lhum/authz", "--timeout=60s")
	require.NoError(t, err)
}

// An apiserver outage mid-upgrade: the upgrade goes on in NATS, and once the
// apiserver is back the projection catches up, nothing lost.
func TestAPIServerOutageMidUpgrade(t *testing.T) {
	env := testenv.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ensureNamespace(t, ctx, env)
	srv, cluster, _ := startProduction(t, ctx, env, production{controllers: 1})
	require.NoError(t, cluster.InjectTargetMoveFailure("pvc-1")) // holds n2 in switching-over

	manifest := `apiVersion: longhorn.io/v1beta2
kind: DataEngineUpgradeManager
metadata: {name: outage, namespace: longhorn-system}
spec: {dataEngine: v2, nodes: [n2, n3]}
`
	_, stderr, err := env.Kubectl(ctx, strings.NewReader(manifest), "apply", "-f", "-")
	require.NoError(t, err, stderr)
	require.Eventually(t, func() bool {
		out, _, err := env.Kubectl(ctx, nil, "-n", "longhorn-system", "get", "lhum/outage", "-o", "jsonpath={.status.conditions[?(@.type=='Stalled')].status}")
		return err == nil && out == "True"
	}, 60*time.Second, 50*time.Millisecond, "the stall is visible")

	// The apiserver goes away; meanwhile the volume is fixed and the upgrade
	// finishes in NATS alone.
	require.NoError(t, env.StopAPIServer())
	require.NoError(t, cluster.HealTargetMoveFailure("pvc-1"))
	code, out, _ := 0, "", ""
	require.Eventually(t, func() bool {
		code, out, _ = runCmd(t, 30*time.Second, "replay", "--nats-url", srv.ClientURL(), "--manager", "outage", "-o", "json")
		return code == 0 && strings.Contains(out, `"state": "completed"`)
	}, 60*time.Second, 100*time.Millisecond, "the upgrade completes while the apiserver is down")
	require.NoError(t, env.StartAPIServer(ctx))

	out, stderr, err = env.Kubectl(ctx, nil, "-n", "longhorn-system", "wait", "--for=condition=Ready", "lhum/outage", "--timeout=90s")
	require.NoError(t, err, "%s %s", out, stderr)
	code, vout, verr := runCmd(t, time.Minute, "replay", "--nats-url", srv.ClientURL(), "--manager", "outage", "--verify", "--kubeconfig", env.Kubeconfig)
	require.Equal(t, 0, code, "%s\n%s", vout, verr)
	_, _, err = env.Kubectl(ctx, nil, "-n", "longhorn-system", "delete", "lhum/outage", "--timeout=60s")
	require.NoError(t, err)
}

func ensureNamespace(t *testing.T, ctx context.Context, env *testenv.Env) {
	t.Helper()
	cs, err := kubernetes.NewForConfig(env.Config)
	require.NoError(t, err)
	_, err = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "longhorn-system"}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
}
