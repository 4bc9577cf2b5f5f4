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
	"github.com/switchback-dev/switchback/natsauth"
	"github.com/switchback-dev/switchback/natsauth/callout"
	"github.com/switchback-dev/switchback/test/harness/syncbuf"
	"github.com/switchback-dev/switchback/test/harness/testenv"
	"github.com/switchback-dev/switchback/topology"
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
	removeUpgrade(t, ctx, env, "callout")
}

// TestUpgradeWithNodeAccountsThatFollowTheNodes is the node-account layout
// as an install without a node list runs it: nats-auth --callout
// --node-accounts writes no node account; the controller writes the
// accounts of the cluster's Nodes into the servers' Secret, which the
// server loads (twice, as its reloader does); each worker, admitted by its
// pod's token, is placed alone in its node's account and reaches the
// streams under $SB.API.; a whole upgrade completes, the reader's replay
// (by direct gets from its own account) equal to the live status.
func TestUpgradeWithNodeAccountsThatFollowTheNodes(t *testing.T) {
	env := testenv.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ensureNamespace(t, ctx, env)
	tokens := workerTokens(t, ctx, env, "n1", "n2", "n3")
	dir := t.TempDir()
	srv, cluster, _ := startProduction(t, ctx, env, production{controllers: 1, authDir: dir, nodeAccounts: true, workerTokens: func(n string) string { return tokens[n] }})

	upgradeAllNodes(t, ctx, env, "follow")
	code, vout, verr := runCmd(t, time.Minute, "replay", "--nats-url", srv.ClientURL(), "--manager", "follow", "--verify", "--kubeconfig", env.Kubeconfig,
		"--nats-nkey", filepath.Join(dir, natsauth.ReaderDir, "reader.nk"), "--nats-api-prefix", strings.TrimSuffix(topology.NodeAPIPrefix, "."))
	require.Equal(t, 0, code, "%s\n%s", vout, verr)
	assert.Zero(t, cluster.IOStats().Failed)
	for _, n := range []string{"n1", "n2", "n3"} {
		acc, err := srv.LookupAccount(natsauth.NodeAccount(natsauth.DefaultAccount, n))
		if assert.NoError(t, err, "the server holds %s's account", n) {
			assert.Positive(t, acc.NumLocalConnections(), "%s's worker is alone in its node's account", n)
		}
	}
	removeUpgrade(t, ctx, env, "follow")
}

// removeUpgrade deletes the manager and its node upgrades: the apiserver is
// the package's, and no garbage collector runs here, so none is left for
// the tests after this one.
func removeUpgrade(t *testing.T, ctx context.Context, env *testenv.Env, manager string) {
	t.Helper()
	_, _, err := env.Kubectl(ctx, nil, "-n", "longhorn-system", "delete", "lhum/"+manager, "--timeout=60s")
	require.NoError(t, err)
	_, _, err = env.Kubectl(ctx, nil, "-n", "longhorn-system", "delete", "lhnu", "-l", v1beta2.LabelDataEngineUpgradeManager+"="+manager, "--ignore-not-found", "--timeout=60s")
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
