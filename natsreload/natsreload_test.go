package natsreload_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/eventstore"
	"github.com/switchback-dev/switchback/natsauth"
	"github.com/switchback-dev/switchback/natsembed"
	"github.com/switchback-dev/switchback/natsreload"
	"github.com/switchback-dev/switchback/nodequeue"
	"github.com/switchback-dev/switchback/test/harness/syncbuf"
)

// buildServer builds the nats-server of go.mod under a name of its own
// (its comm in /proc), so that the reloader finds this test's server only.
func buildServer(t *testing.T) (path, name string) {
	t.Helper()
	name = fmt.Sprintf("nats-rl-%06d", rand.IntN(1_000_000))
	path = filepath.Join(t.TempDir(), name)
	cmd := exec.Command("go", "build", "-o", path, "github.com/nats-io/nats-server/v2")
	cmd.Dir = ".."
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "build nats-server: %s", out)
	return path, name
}

// TestReloaderLoadsANewNodeAccount runs a real nats-server process from
// files in the node-account layout of n1, and the reloader beside it: once the included authorization is rewritten with n2 (credentials
// kept), the reloader loads it twice, confirmed by the server's
// monitoring, and n2's worker then binds to the streams through its new
// account's imports, which one reload alone leaves silent
// (natsauth.TestAddingANodeAccountTakesTwoReloads); n1's worker is served
// throughout, and the server's log shows two reloads in all (none while
// the files stayed as they were).
func TestReloaderLoadsANewNodeAccount(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bin, name := buildServer(t)
	dir := t.TempDir()
	port, err := natsembed.FreePort("127.0.0.1")
	require.NoError(t, err)
	monitor, err := natsembed.FreePort("127.0.0.1")
	require.NoError(t, err)
	conf := fmt.Sprintf("listen: \"127.0.0.1:%d\"\nhttp: \"127.0.0.1:%d\"\njetstream { store_dir: %q }\ninclude auth/%s\n", port, monitor, filepath.Join(dir, "store"), natsauth.ConfigFile)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "nats.conf"), []byte(conf), 0o600))
	before, err := natsauth.Generate(natsauth.Config{Nodes: []string{"n1"}, Account: natsauth.DefaultAccount, NodeAccounts: true})
	require.NoError(t, err)
	// As the kubelet updates a Secret volume: the files in a new hidden
	// directory, then the visible name's link swapped to it at once.
	version := 0
	writeAuth := func(a *natsauth.Authorization) {
		version++
		data := filepath.Join(dir, fmt.Sprintf("..data_%d", version))
		require.NoError(t, os.MkdirAll(data, 0o700))
		require.NoError(t, os.WriteFile(filepath.Join(data, natsauth.ConfigFile), []byte(a.ServerConfig()), 0o600))
		link := filepath.Join(dir, "auth.tmp")
		require.NoError(t, os.Symlink(filepath.Base(data), link))
		require.NoError(t, os.Rename(link, filepath.Join(dir, "auth")))
	}
	writeAuth(before)

	srv := exec.Command(bin, "--config", filepath.Join(dir, "nats.conf"))
	var log syncbuf.Buffer
	srv.Stdout, srv.Stderr = &log, &log
	require.NoError(t, srv.Start())
	t.Cleanup(func() { _ = srv.Process.Kill(); _ = srv.Wait() })
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	connect := func(u natsauth.User) (*nats.Conn, error) {
		opts, err := u.ConnectOptions()
		require.NoError(t, err)
		return nats.Connect(url, append(opts, nats.Name(u.Credential.User))...)
	}
	var controller *nats.Conn
	require.Eventually(t, func() bool { controller, err = connect(before.Controller); return err == nil }, 30*time.Second, 50*time.Millisecond, "the server starts")
	defer controller.Close()
	js, err := natsauth.JetStream(controller, "")
	require.NoError(t, err)
	_, err = eventstore.Open(ctx, js, eventstore.Config{})
	require.NoError(t, err)
	q, err := nodequeue.Open(ctx, js, nodequeue.Config{})
	require.NoError(t, err)
	require.NoError(t, q.EnsureNodeConsumers(ctx, "n1", "n2"))
	bind := func(a *natsauth.Authorization, node string) error {
		u, ok := a.Worker(node)
		require.True(t, ok)
		nc, err := connect(u)
		if err != nil {
			return err
		}
		defer nc.Close()
		wjs, err := natsauth.JetStream(nc, a.APIPrefix(u))
		require.NoError(t, err)
		bctx, bcancel := context.WithTimeout(ctx, 5*time.Second)
		defer bcancel()
		_, err = eventstore.Open(bctx, natsauth.BindOnly(wjs), eventstore.Config{ReadOnlySnapshots: true})
		return err
	}
	require.NoError(t, bind(before, "n1"))

	r, err := natsreload.New(natsreload.Config{Watch: []string{dir}, Interval: 50 * time.Millisecond, ProcessName: name,
		MonitorURL: fmt.Sprintf("http://127.0.0.1:%d", monitor)})
	require.NoError(t, err)
	rctx, rcancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(rctx) }()
	require.NoError(t, bind(before, "n1"))

	n1, _ := before.Worker("n1")
	after, err := natsauth.Generate(natsauth.Config{Nodes: []string{"n1", "n2"}, Account: natsauth.DefaultAccount, NodeAccounts: true,
		Existing: map[string]natsauth.Credential{"": before.Controller.Credential, natsauth.ReaderKey: before.Reader.Credential, "n1": n1.Credential}})
	require.NoError(t, err)
	writeAuth(after)
	require.Eventually(t, func() bool { return bind(after, "n2") == nil }, 30*time.Second, 100*time.Millisecond, "n2's worker binds through its new account")
	require.NoError(t, bind(after, "n1"), "n1's worker is served")
	rcancel()
	require.NoError(t, <-done)
	assert.Equal(t, natsreload.Reloads, strings.Count(log.String(), "Reloaded server configuration"),
		"the change loaded twice, and nothing else:\n%s", log.String())
}
