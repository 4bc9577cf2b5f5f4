package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/api/v1beta2"
	"github.com/switchback-dev/switchback/internal/syncbuf"
	"github.com/switchback-dev/switchback/natsauth"
	"github.com/switchback-dev/switchback/natsauth/callout"
	"github.com/switchback-dev/switchback/testenv"
)

// The default install's NATS shape, end to end through the commands: `nats-auth
// --callout` generates the servers' configuration and the callout's keys,
// the controller serves the callout (--nats-callout), and each worker
// connects with nothing but its pod's projected ServiceAccount token
// (--nats-token-file: a TokenRequest token bound to a Pod on its node). A
// whole upgrade completes with nothing denied, the reader replays it, and a
// worker holding n1's token cannot act as n2.
func TestUpgradeUnderNATSAuthCallout(t *testing.T) {
	env := testenv.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ensureNamespace(t, ctx, env)
	tokens := workerTokens(t, ctx, env, "n1", "n2", "n3")
	dir := t.TempDir()
	srv, cluster, _ := startProduction(t, ctx, env, production{controllers: 1, authDir: dir, workerTokens: func(n string) string { return tokens[n] }})

	upgradeAllNodes(t, ctx, env, "callout")
	code, vout, verr := runCmd(t, time.Minute, "replay", "--nats-url", srv.ClientURL(), "--manager", "callout", "--verify", "--kubeconfig", env.Kubeconfig,
		"--nats-nkey", filepath.Join(dir, natsauth.ReaderDir, "reader.nk"))
	require.Equal(t, 0, code, "%s\n%s", vout, verr)
	assert.Zero(t, cluster.IOStats().Failed)

	var werr syncbuf.Buffer
	wctx, wcancel := context.WithCancel(ctx)
	done := make(chan int, 1)
	go func() {
		done <- run(wctx, "switchback", []string{"worker", "--data-plane", "sim", "--node", "n2", "--nats-url", srv.ClientURL(), "--health-addr", "", "--nats-token-file", tokens["n1"]}, io.Discard, &werr)
	}()
	require.Eventually(t, func() bool { return strings.Contains(werr.String(), "Permissions Violation") }, 30*time.Second, 20*time.Millisecond,
		"n1's token gets n1's permissions only: the impostor's denial is logged")
	wcancel()
	assert.NotEqual(t, 0, <-done, "the impostor never starts")
	// The apiserver is the package's: leave no manager and no node upgrade
	// (no garbage collector runs here) for the tests after this one.
	_, _, err := env.Kubectl(ctx, nil, "-n", "longhorn-system", "delete", "lhum/callout", "--timeout=60s")
	require.NoError(t, err)
	_, _, err = env.Kubectl(ctx, nil, "-n", "longhorn-system", "delete", "lhnu", "-l", v1beta2.LabelDataEngineUpgradeManager+"=callout", "--ignore-not-found", "--timeout=60s")
	require.NoError(t, err)
}

// workerTokens writes, for each node, a token file of the worker
// ServiceAccount bound to a Pod on that node, as the kubelet projects it
// (audience callout.DefaultAudience), and returns the files by node.
func workerTokens(t *testing.T, ctx context.Context, env *testenv.Env, nodes ...string) map[string]string {
	t.Helper()
	dir := t.TempDir()
	out := map[string]string{}
	for _, n := range nodes {
		token, remove, err := env.PodToken(ctx, "longhorn-system", callout.DefaultServiceAccount, n, callout.DefaultAudience)
		require.NoError(t, err)
		t.Cleanup(remove)
		out[n] = filepath.Join(dir, n+".token")
		require.NoError(t, os.WriteFile(out[n], []byte(token), 0o600))
	}
	return out
}
