package natsauth_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/eventstore"
	"github.com/switchback-dev/switchback/natsauth"
	"github.com/switchback-dev/switchback/natsembed"
	"github.com/switchback-dev/switchback/nodequeue"
	"github.com/switchback-dev/switchback/nodeworker"
	"github.com/switchback-dev/switchback/orchestrator"
)

// deployment is an embedded NATS server running a generated authorization,
// with the controller connected (streams created, node consumers ensured)
// and any number of workers, each on a connection of its own user, as
// separate processes would be.
type deployment struct {
	t    testing.TB
	ctx  context.Context
	auth *natsauth.Authorization
	// srv is the server (the first one of a cluster).
	srv *natsembed.Server
	// dial opens a client connection that is closed before the servers stop.
	dial func(opts ...nats.Option) (*nats.Conn, error)
	// replicas of the streams: 1, or 3 on a cluster.
	replicas int

	// The controller's connection, store and queue.
	nc    *nats.Conn
	js    jetstream.JetStream
	store *eventstore.Store
	queue *nodequeue.Queue
	viol  *natsauth.Violations

	log *slog.Logger
	wg  sync.WaitGroup
}

// queueConfig makes redelivery quick enough for tests.
var queueConfig = nodequeue.Config{AckWait: 2 * time.Second, MaxDeliver: 4}

func newDeployment(t testing.TB, cfg natsauth.Config) *deployment {
	t.Helper()
	auth, err := natsauth.Generate(cfg)
	require.NoError(t, err)
	return startDeployment(t, auth)
}

func startDeployment(t testing.TB, auth *natsauth.Authorization) *deployment {
	t.Helper()
	srv, err := natsembed.Start(natsembed.Options{StoreDir: t.TempDir(), Configure: auth.Configure})
	require.NoError(t, err)
	t.Cleanup(srv.Shutdown)
	return setUp(t, auth, srv, srv.Connect, 1)
}

// startClusterDeployment runs the authorization on a 3-server JetStream
// cluster, Switchback's streams at R3: the production shape, where
// multi-event appends are atomic batches.
func startClusterDeployment(t testing.TB, auth *natsauth.Authorization) *deployment {
	t.Helper()
	const n = 3
	servers, dial := startServers(t, n, auth.Configure)
	return setUp(t, auth, servers[0], dial, n)
}

// startServers starts n servers configured by configure (a cluster when n
// > 1), waits for a JetStream meta leader and returns them with a dialer
// to all of them whose connections close when the test ends.
func startServers(t testing.TB, n int, configure func(*server.Options)) ([]*natsembed.Server, func(...nats.Option) (*nats.Conn, error)) {
	t.Helper()
	ports := make([]int, n)
	for i := range ports {
		p, err := natsembed.FreePort("127.0.0.1")
		require.NoError(t, err)
		ports[i] = p
	}
	servers := make([]*natsembed.Server, n)
	var urls []string
	for i := range n {
		o := natsembed.Options{Name: fmt.Sprintf("authz-%d", i), StoreDir: filepath.Join(t.TempDir(), fmt.Sprint(i)), Configure: configure}
		if n > 1 {
			var routes []string
			for j, p := range ports {
				if j != i {
					routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", p))
				}
			}
			o.Cluster = &natsembed.ClusterOptions{Name: "authz", Port: ports[i], Routes: routes}
		}
		srv, err := natsembed.Start(o)
		require.NoError(t, err)
		t.Cleanup(srv.Shutdown)
		servers[i] = srv
		urls = append(urls, srv.ClientURL())
	}
	eventually(t, 30*time.Second, "a JetStream meta leader", func() bool {
		for _, s := range servers {
			if s.JetStreamIsLeader() {
				return true
			}
		}
		return false
	})
	var (
		mu    sync.Mutex
		conns []*nats.Conn
	)
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, nc := range conns {
			nc.Close()
		}
	})
	return servers, func(opts ...nats.Option) (*nats.Conn, error) {
		nc, err := nats.Connect(strings.Join(urls, ","), opts...)
		if err == nil {
			mu.Lock()
			conns = append(conns, nc)
			mu.Unlock()
		}
		return nc, err
	}
}

// setUp connects the controller, which creates the streams and the node
// consumers (retried: a young cluster may not place streams yet).
func setUp(t testing.TB, auth *natsauth.Authorization, srv *natsembed.Server, dial func(...nats.Option) (*nats.Conn, error), replicas int) *deployment {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	d := &deployment{t: t, ctx: ctx, auth: auth, srv: srv, dial: dial, replicas: replicas, log: testLogger(t)}
	// Stop the components before the connections and the servers
	// (cleanups run last-in first-out).
	t.Cleanup(func() { cancel(); d.wg.Wait() })
	var err error
	d.nc, d.viol = d.connect(auth.Controller)
	d.js, err = jetstream.New(d.nc)
	require.NoError(t, err)
	eventually(t, 30*time.Second, "the controller creates the streams", func() bool {
		d.store, err = eventstore.Open(ctx, d.js, eventstore.Config{Replicas: replicas})
		if err == nil {
			cfg := queueConfig
			cfg.Replicas = replicas
			d.queue, err = nodequeue.Open(ctx, d.js, cfg)
		}
		if err == nil {
			err = d.queue.EnsureNodeConsumers(ctx, auth.Nodes()...)
		}
		return err == nil
	})
	return d
}

func testLogger(t testing.TB) *slog.Logger {
	var w io.Writer = io.Discard
	if os.Getenv("NATSAUTH_LOG") != "" {
		w = t.Output()
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// connect opens a connection as u, recording its permission violations.
func (d *deployment) connect(u natsauth.User) (*nats.Conn, *natsauth.Violations) {
	d.t.Helper()
	opts, err := u.ConnectOptions()
	require.NoError(d.t, err)
	v := &natsauth.Violations{}
	nc, err := d.dial(append(opts, v.Option(), nats.Name(u.Credential.User))...)
	require.NoError(d.t, err)
	return nc, v
}

// worker is one node worker's world: its user's connection, JetStream
// bound to the controller's streams, its store and queue.
type worker struct {
	node  string
	nc    *nats.Conn
	js    jetstream.JetStream // raw: what a hostile client would use
	store *eventstore.Store
	queue *nodequeue.Queue
	viol  *natsauth.Violations
}

// connectWorker connects node's worker user and binds to the streams the
// way the worker command should (natsauth.BindOnly).
func (d *deployment) connectWorker(node string) *worker {
	d.t.Helper()
	u, ok := d.auth.Worker(node)
	require.True(d.t, ok, "no user for node %s", node)
	nc, v := d.connect(u)
	js, err := natsauth.JetStream(nc, d.auth.APIPrefix(u))
	require.NoError(d.t, err)
	bound := natsauth.BindOnly(js)
	store, err := eventstore.Open(d.ctx, bound, eventstore.Config{Replicas: d.replicas, ReadOnlySnapshots: true})
	require.NoError(d.t, err, "worker %s binds to the event stream", node)
	q, err := nodequeue.Open(d.ctx, bound, d.queue.Config())
	require.NoError(d.t, err, "worker %s binds to the command queue", node)
	return &worker{node: node, nc: nc, js: js, store: store, queue: q, viol: v}
}

// runWorker runs node's worker until the test ends.
func (d *deployment) runWorker(node string, plane dataplane.DataPlane) *worker {
	d.t.Helper()
	w := d.connectWorker(node)
	nw, err := nodeworker.New(nodeworker.Config{
		Node: node, Store: w.store, Queue: w.queue, DataPlane: plane, Log: d.log.With("worker", node),
		PollInterval: 5 * time.Millisecond, StallAfter: time.Second, FailAfter: 5 * time.Second,
	})
	require.NoError(d.t, err)
	d.wg.Go(func() {
		if err := nw.Run(d.ctx); err != nil && d.ctx.Err() == nil {
			d.t.Errorf("worker %s stopped: %v", node, err)
		}
	})
	return w
}

// runOrchestrator runs the orchestrator on the controller's connection.
func (d *deployment) runOrchestrator(plane dataplane.Reader) {
	d.t.Helper()
	o, err := orchestrator.New(orchestrator.Config{Store: d.store, Queue: d.queue, Cluster: plane, Log: d.log.With("component", "orchestrator")})
	require.NoError(d.t, err)
	d.wg.Go(func() {
		if err := o.Run(d.ctx); err != nil && d.ctx.Err() == nil {
			d.t.Errorf("orchestrator stopped: %v", err)
		}
	})
}

// short is the patience for an operation expected to be denied: NATS
// reports the violation at once, but a denied request only times out.
const short = 300 * time.Millisecond

// denied asserts that op fails and that the server reported a permission
// violation naming subject; it returns the clear error (the violation
// joined with op's own error).
func denied(t *testing.T, v *natsauth.Violations, subject string, op func(ctx context.Context) error) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), short)
	err := op(ctx)
	cancel()
	wctx, wcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer wcancel()
	pv := v.Wait(wctx, subject)
	require.ErrorIs(t, pv, nats.ErrPermissionViolation, "the server reports a permissions violation for %s", subject)
	require.Contains(t, pv.Error(), fmt.Sprintf("%q", subject), "the violation names the subject")
	if err == nil {
		// A plain publish has no answer to fail: the violation is the error.
		return pv
	}
	return v.Explain(err, subject)
}

// eventually polls cond every 10ms until it holds or timeout passes.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached within %s", what, timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// reader is the read-only user's world: its connection, JetStream (raw,
// what the nats CLI or a hostile client would use) and the event store
// bound the way `switchback history` and `switchback replay` bind it.
type reader struct {
	nc    *nats.Conn
	js    jetstream.JetStream
	store *eventstore.Store
	viol  *natsauth.Violations
}

// connectReader connects the reader user and opens the event store through
// natsauth.BindOnly, as the read-only commands do.
func (d *deployment) connectReader() *reader {
	d.t.Helper()
	nc, v := d.connect(d.auth.Reader)
	prefix := d.auth.APIPrefix(d.auth.Reader)
	js, err := natsauth.JetStream(nc, prefix)
	require.NoError(d.t, err)
	// In an account of its own the reader has no consumer API: it scans by
	// direct gets, as the read-only commands do behind an API prefix.
	store, err := eventstore.Open(d.ctx, natsauth.BindOnly(js), eventstore.Config{Replicas: d.replicas, DirectScans: prefix != ""})
	require.NoError(d.t, err, "the reader binds to the event stream")
	return &reader{nc: nc, js: js, store: store, viol: v}
}
