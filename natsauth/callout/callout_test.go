package callout_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/eventstore"
	"github.com/switchback-dev/switchback/metrics"
	"github.com/switchback-dev/switchback/natsauth"
	"github.com/switchback-dev/switchback/natsauth/callout"
	"github.com/switchback-dev/switchback/test/harness/consumertest"
	"github.com/switchback-dev/switchback/test/harness/testenv"
	"github.com/switchback-dev/switchback/topology"
)

// Every integration test runs against one real kube-apiserver: it signs
// the ServiceAccount tokens and answers the TokenReviews.
func TestMain(m *testing.M) { testenv.Main(m) }

const (
	ns = "longhorn-system"
	// calloutSA is the callout's own identity: the controller's.
	calloutSA = "switchback-controller"
	// intruderSA runs a pod on n1 too, but is not the worker.
	intruderSA = "intruder"
)

var testRef = events.ManagerRef{Namespace: ns, Name: "upgrade-v2", UID: "3f0c9d1e-uid"}

// TestWorkerTokens: each worker's projected token gets exactly its node's
// permissions; every other token, or none, is refused with a reason, and
// the controller's static user never goes through the callout.
func TestWorkerTokens(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := newCluster(t, ctx)
	d := newDeployment(t, ctx, 0)
	d.service(callout.NewCache(callout.KubeReviewer{TokenReviews: c.callout.AuthenticationV1().TokenReviews()}, 10*time.Second, 0, 128), 0)

	// Every request in the account reaches every subscriber of the callout
	// subject, the controller's ">" included: with the xkey, what it sees
	// is sealed.
	spyViol := &natsauth.Violations{}
	spyNC := d.connectController(spyViol.Option())
	spy, err := spyNC.SubscribeSync(server.AuthCalloutSubject)
	require.NoError(t, err)

	tokens := map[string]string{
		"n1":             c.token(callout.DefaultServiceAccount, c.pods["worker-n1"], callout.DefaultAudience),
		"n2":             c.token(callout.DefaultServiceAccount, c.pods["worker-n2"], callout.DefaultAudience),
		"intruder":       c.token(intruderSA, c.pods["intruder-n1"], callout.DefaultAudience),
		"wrong audience": c.token(callout.DefaultServiceAccount, c.pods["worker-n1"], "not-nats"),
		"unbound":        c.token(callout.DefaultServiceAccount, nil, callout.DefaultAudience),
		"garbage":        "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl",
	}
	cases := []struct {
		name   string
		token  string // key of tokens; "" = no token at all
		node   string // allowed: the node; refused: the inbox prefix asked for
		other  string
		reason string
	}{
		{name: "worker of n1", token: "n1", node: "n1", other: "n2", reason: callout.ReasonAllowed},
		{name: "worker of n2", token: "n2", node: "n2", other: "n1", reason: callout.ReasonAllowed},
		{name: "another ServiceAccount's pod on n1", token: "intruder", node: "n1", reason: callout.ReasonWrongServiceAccount},
		{name: "worker token for another audience", token: "wrong audience", node: "n1", reason: callout.ReasonNotAuthenticated},
		{name: "worker token not bound to a pod", token: "unbound", node: "n1", reason: callout.ReasonNoNode},
		{name: "garbage", token: "garbage", node: "n1", reason: callout.ReasonNotAuthenticated},
		{name: "no token", node: "n1", reason: callout.ReasonNoToken},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := ""
			if tc.token != "" {
				path = filepath.Join(t.TempDir(), "token")
				require.NoError(t, os.WriteFile(path, []byte(tokens[tc.token]+"\n"), 0o600))
			}
			before := decisions(tc.reason)
			nc, viol, err := d.dialWorker(tc.node, path)
			assert.Equal(t, before+1, decisions(tc.reason), "decided as %s", tc.reason)
			if tc.reason != callout.ReasonAllowed {
				require.Error(t, err, "refused")
				assert.ErrorIs(t, err, nats.ErrAuthorization)
				assert.Contains(t, d.logs.String(), "reason="+tc.reason)
				return
			}
			require.NoError(t, err)
			defer nc.Close()
			assert.Contains(t, d.logs.String(), `msg="NATS auth callout admitted a worker" component=nats-callout reason=allowed node=`+tc.node)
			workerCan(t, ctx, nc, tc.node)
			workerCannot(t, ctx, nc, viol, tc.node, tc.other)
		})
	}

	t.Run("the controller's static user bypasses the callout", func(t *testing.T) {
		before := allDecisions()
		nc := d.connectController()
		js, err := jetstream.New(nc)
		require.NoError(t, err)
		_, err = js.Stream(ctx, topology.EventStream)
		require.NoError(t, err)
		assert.Equal(t, before, allDecisions(), "no authorization request for a static user")
	})

	t.Run("requests are sealed, tokens never logged", func(t *testing.T) {
		m, err := spy.NextMsg(5 * time.Second)
		require.NoError(t, err, "the controller saw a request")
		assert.False(t, bytes.HasPrefix(m.Data, []byte("eyJ")), "not a JWT in clear")
		logs := d.logs.String()
		for name, tok := range tokens {
			assert.NotContains(t, string(m.Data), tok, "no token readable in a request (%s)", name)
			assert.NotContains(t, logs, tok, "token %s never logged", name)
		}
	})

	t.Run("no client can inject a request, not even the controller", func(t *testing.T) {
		// So a replayed request can only come from a server; the Service
		// refuses replays anyway (TestReplayedRequest).
		deniedOp(t, spyViol, server.AuthCalloutSubject, func(context.Context) error {
			return spyNC.Publish(server.AuthCalloutSubject, []byte("forged"))
		})
	})
}

// workerCan: node's worker appends its node's events and pulls its node's
// commands.
func workerCan(t *testing.T, ctx context.Context, nc *nats.Conn, node string) {
	t.Helper()
	workerCanThrough(t, ctx, nc, node, "")
}

// workerCanThrough is workerCan with JetStream's API under prefix ("" its
// own).
func workerCanThrough(t *testing.T, ctx context.Context, nc *nats.Conn, node, prefix string) {
	t.Helper()
	// A denied request only times out: fail in seconds, not at the test's end.
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	js, err := natsauth.JetStream(nc, prefix)
	require.NoError(t, err)
	store, err := eventstore.Open(ctx, natsauth.BindOnly(js), eventstore.Config{ReadOnlySnapshots: true})
	require.NoError(t, err, "binds to the event stream")
	agg := events.NodeAggregate(testRef, node)
	_, err = store.Append(ctx, agg, 0, started(node))
	require.NoError(t, err, "appends its node's event on %s", agg.Subject())
	cons, err := js.Consumer(ctx, topology.CommandStream, topology.NodeConsumer(node))
	require.NoError(t, err, "looks its consumer up")
	got := consumertest.Fetch(t, cons, 1, 5*time.Second)
	require.Len(t, got, 1, "pulls its node's command")
	require.NoError(t, got[0].DoubleAck(ctx), "acks it")
}

// TestWorkerTokensInNodeAccounts: with the node-account layout, the
// callout places each worker alone in its node's account, where JetStream's
// API is under $SB.API. through its imports: n1's worker binds, appends,
// pulls and acks there, is refused another node's event subject, and
// JetStream's own API prefix answers nothing of the streams; a worker of a
// node the configuration has no account for is refused, saying so.
func TestWorkerTokensInNodeAccounts(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := newCluster(t, ctx)
	d := newDeploymentWith(t, ctx, 0, []string{"n1"})
	d.service(callout.NewCache(callout.KubeReviewer{TokenReviews: c.callout.AuthenticationV1().TokenReviews()}, 10*time.Second, 0, 128), 0)
	token := func(node string) string {
		path := filepath.Join(t.TempDir(), "token")
		require.NoError(t, os.WriteFile(path, []byte(c.token(callout.DefaultServiceAccount, c.pods["worker-"+node], callout.DefaultAudience)+"\n"), 0o600))
		return path
	}

	nc, viol, err := d.dialWorker("n1", token("n1"))
	require.NoError(t, err)
	defer nc.Close()
	workerCanThrough(t, ctx, nc, "n1", topology.NodeAPIPrefix)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	sctx, scancel := context.WithTimeout(ctx, 3*time.Second)
	_, err = js.Stream(sctx, topology.EventStream)
	scancel()
	require.Error(t, err, "JetStream's own API prefix reaches no stream from n1's account")
	other := events.NodeAggregate(testRef, "n2")
	deniedOp(t, viol, topology.NodeAPIPrefix+"STREAM.INFO."+topology.CommandStream+".x", func(ctx context.Context) error {
		_, err := nc.RequestWithContext(ctx, topology.NodeAPIPrefix+"STREAM.INFO."+topology.CommandStream+".x", nil)
		return err
	})
	deniedOp(t, viol, other.Subject(), func(context.Context) error { return nc.Publish(other.Subject(), []byte("x")) })

	before := decisions(callout.ReasonNoNodeAccount)
	_, _, err = d.dialWorker("n2", token("n2"))
	require.Error(t, err, "n2 has no account in the configuration")
	assert.ErrorIs(t, err, nats.ErrAuthorization)
	assert.Equal(t, before+1, decisions(callout.ReasonNoNodeAccount))
	assert.Contains(t, d.logs.String(), "reason="+callout.ReasonNoNodeAccount)
}

// TestNodeAddedToTheLayoutWithoutRestart: a node added to the node-account
// layout while the callout runs (regenerated with the node, the keys'
// Secret updated under the running callout, NATS reloaded twice: see
// natsauth.TestAddingANodeAccountTakesTwoReloads) has its worker admitted
// into its new account without restarting the callout, which reads the
// mounted node list again when a worker of an unlisted node arrives; the
// node's worker is refused, saying so, until the list names it.
func TestNodeAddedToTheLayoutWithoutRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := newCluster(t, ctx)
	d := newDeploymentWith(t, ctx, 0, []string{"n1"})
	mounted := t.TempDir()
	mount := func(k callout.Keys) {
		data, err := k.SecretData()
		require.NoError(t, err)
		for name, b := range data {
			require.NoError(t, os.WriteFile(filepath.Join(mounted, name), b, 0o600))
		}
	}
	mount(d.keys)
	reviewer := callout.NewCache(callout.KubeReviewer{TokenReviews: c.callout.AuthenticationV1().TokenReviews()}, 10*time.Second, 0, 128)
	svc, err := callout.New(callout.Config{Issuer: d.keys.Issuer, XKey: d.keys.XKey, Account: d.keys.Account, NodeAccounts: d.keys.NodeAccounts,
		ReadNodeAccounts: func() ([]string, error) {
			k, err := callout.ReadKeys(mounted)
			return k.NodeAccounts, err
		},
		Reviewer: reviewer, Namespace: ns, Log: d.log})
	require.NoError(t, err)
	require.NoError(t, svc.Start(d.calloutNC))
	t.Cleanup(svc.Stop)
	path := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(path, []byte(c.token(callout.DefaultServiceAccount, c.pods["worker-n2"], callout.DefaultAudience)+"\n"), 0o600))

	before := decisions(callout.ReasonNoNodeAccount)
	_, _, err = d.dialWorker("n2", path)
	require.ErrorIs(t, err, nats.ErrAuthorization, "n2 has no account yet")
	assert.Equal(t, before+1, decisions(callout.ReasonNoNodeAccount))

	keys := d.keys
	keys.NodeAccounts = []string{"n1", "n2"}
	side, err := keys.Server(0)
	require.NoError(t, err)
	auth, err := natsauth.Generate(natsauth.Config{Callout: side, Account: keys.Account, Nodes: keys.NodeAccounts, NodeAccounts: true,
		Existing: map[string]natsauth.Credential{"": d.auth.Controller.Credential, natsauth.ReaderKey: d.auth.Reader.Credential}})
	require.NoError(t, err)
	d.files.WriteAuth(t, auth.ServerConfig())
	d.files.Reload(t)
	d.files.Reload(t)
	mount(keys)

	nc, viol, err := d.dialWorker("n2", path)
	require.NoError(t, err, "n2's worker is admitted into its new account")
	defer nc.Close()
	workerCanThrough(t, ctx, nc, "n2", topology.NodeAPIPrefix)
	assert.Empty(t, viol.All())
	assert.Contains(t, d.logs.String(), "the nodes' accounts changed")
}

// workerCannot: node's worker is refused other's events and consumer, and
// cannot inject authorization requests.
func workerCannot(t *testing.T, ctx context.Context, nc *nats.Conn, viol *natsauth.Violations, node, other string) {
	t.Helper()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	store, err := eventstore.Open(ctx, natsauth.BindOnly(js), eventstore.Config{ReadOnlySnapshots: true})
	require.NoError(t, err)
	agg := events.NodeAggregate(testRef, other)
	deniedOp(t, viol, agg.Subject(), func(ctx context.Context) error {
		_, err := store.Append(ctx, agg, 0, started(other))
		return err
	})
	next := "$JS.API.CONSUMER.MSG.NEXT." + topology.CommandStream + "." + topology.NodeConsumer(other)
	deniedOp(t, viol, next, func(ctx context.Context) error {
		_, err := nc.RequestWithContext(ctx, next, []byte(`{"batch":1,"expires":200000000}`))
		return err
	})
	info := "$JS.API.CONSUMER.INFO." + topology.CommandStream + "." + topology.NodeConsumer(other)
	deniedOp(t, viol, info, func(ctx context.Context) error {
		_, err := js.Consumer(ctx, topology.CommandStream, topology.NodeConsumer(other))
		return err
	})
	deniedOp(t, viol, server.AuthCalloutSubject, func(context.Context) error {
		return nc.Publish(server.AuthCalloutSubject, []byte("forged"))
	})
}

// deniedOp runs op, which must fail or be refused, and waits for the
// server's permissions violation naming subject.
func deniedOp(t *testing.T, viol *natsauth.Violations, subject string, op func(ctx context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	_ = op(ctx)
	cancel()
	wctx, wcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer wcancel()
	err := viol.Wait(wctx, subject)
	require.ErrorIs(t, err, nats.ErrPermissionViolation, "refused %s", subject)
}

// TestTokenReviewFailureRefuses: when the token cannot be verified (the
// callout's identity may not review, the apiserver is unreachable), a valid
// worker token is refused, counted and logged as an error.
func TestTokenReviewFailureRefuses(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := newCluster(t, ctx)
	d := newDeployment(t, ctx, 0)
	path := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(path, []byte(c.token(callout.DefaultServiceAccount, c.pods["worker-n1"], callout.DefaultAudience)), 0o600))

	// An address nothing listens on: the apiserver is down.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	down := "https://" + l.Addr().String()
	require.NoError(t, l.Close())
	unreachable, err := kubernetes.NewForConfig(&rest.Config{Host: down, TLSClientConfig: rest.TLSClientConfig{CAData: c.env.Config.CAData}})
	require.NoError(t, err)

	for name, cs := range map[string]kubernetes.Interface{
		"no create tokenreviews": c.clientAs(intruderSA),
		"apiserver unreachable":  unreachable,
	} {
		t.Run(name, func(t *testing.T) {
			svc := d.service(callout.KubeReviewer{TokenReviews: cs.AuthenticationV1().TokenReviews()}, 0)
			defer svc.Stop()
			const logged = `level=ERROR msg="NATS auth callout refused a connection" component=nats-callout reason=review_failed`
			before, beforeLogged := decisions(callout.ReasonReviewFailed), strings.Count(d.logs.String(), logged)
			_, _, err := d.dialWorker("n1", path)
			require.ErrorIs(t, err, nats.ErrAuthorization)
			assert.Equal(t, before+1, decisions(callout.ReasonReviewFailed))
			assert.Equal(t, beforeLogged+1, strings.Count(d.logs.String(), logged), "logged as an error")
		})
	}

	// The same token with the callout's real identity: it was the review.
	d.service(callout.KubeReviewer{TokenReviews: c.callout.AuthenticationV1().TokenReviews()}, 0)
	nc, _, err := d.dialWorker("n1", path)
	require.NoError(t, err)
	nc.Close()
}

// TestCalloutDownAndTokenRotation: with the callout down, new connections
// are refused and an established worker keeps working until its user
// expires; the server then closes it, the worker keeps retrying, and once
// the callout is back it reconnects with the token the kubelet rotated
// into its file (the old one is no longer valid).
func TestCalloutDownAndTokenRotation(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := newCluster(t, ctx)
	d := newDeployment(t, ctx, time.Second)
	// No cache: the old token's invalidation must be seen at once.
	reviewer := callout.KubeReviewer{TokenReviews: c.callout.AuthenticationV1().TokenReviews()}
	const ttl = 5 * time.Second
	svc := d.service(reviewer, ttl)

	// The old token is bound to a pod that will be deleted.
	old := c.pod("worker-n1-old", callout.DefaultServiceAccount, "n1")
	oldToken := c.token(callout.DefaultServiceAccount, old, callout.DefaultAudience)
	path := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(path, []byte(oldToken), 0o600))

	// nats.go reports the server's "user authentication expired" and each
	// refused reconnect as asynchronous errors.
	expired := make(chan struct{}, 1)
	refused := make(chan error, 16)
	reconnected := make(chan struct{}, 1)
	nc, _, err := d.dialWorker("n1", path,
		nats.ReconnectWait(100*time.Millisecond), nats.MaxReconnects(-1),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			switch {
			case errors.Is(err, nats.ErrAuthExpired):
				nonBlocking(expired, struct{}{})
			case errors.Is(err, nats.ErrAuthorization):
				nonBlocking(refused, err)
			}
		}),
		nats.ReconnectHandler(func(*nats.Conn) { nonBlocking(reconnected, struct{}{}) }))
	require.NoError(t, err)
	defer nc.Close()
	admitted := time.Now()

	svc.Stop()
	_, _, err = d.dialWorker("n2", "")
	require.ErrorIs(t, err, nats.ErrAuthorization, "callout down: a new connection is refused (server timeout)")
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	store, err := eventstore.Open(ctx, natsauth.BindOnly(js), eventstore.Config{ReadOnlySnapshots: true})
	require.NoError(t, err)
	_, err = store.Append(ctx, events.NodeAggregate(testRef, "n1"), 0, started("n1"))
	require.NoError(t, err, "callout down: the established worker still appends")
	require.Less(t, time.Since(admitted), ttl, "the checks above ran within the user's lifetime (else raise ttl)")

	// The kubelet rotates the token; the old pod goes (force deleted: no
	// kubelet), so the old token is no longer valid.
	require.NoError(t, os.WriteFile(path, []byte(c.token(callout.DefaultServiceAccount, c.pods["worker-n1"], callout.DefaultAudience)), 0o600))
	zero := int64(0)
	require.NoError(t, c.cs.CoreV1().Pods(ns).Delete(ctx, old.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}))
	require.Eventually(t, func() bool {
		_, err := reviewer.Review(ctx, oldToken, callout.DefaultAudience)
		return errors.Is(err, callout.ErrNotAuthenticated)
	}, 30*time.Second, 20*time.Millisecond, "the old token is refused by the apiserver")

	select {
	case <-expired:
	case <-time.After(ttl + 10*time.Second):
		t.Fatal("the server did not close the worker's connection when its user expired")
	}
	for range 2 {
		select {
		case err := <-refused:
			t.Logf("reconnect refused while the callout is down: %v", err)
		case <-time.After(10 * time.Second):
			t.Fatal("the worker stopped retrying while the callout is down")
		}
	}
	// The rotated token is bound to pod worker-n1, the old one to worker-n1-old.
	const rotated = `reason=allowed node=n1 user=system:serviceaccount:longhorn-system:switchback-worker pod=worker-n1 `
	before := strings.Count(d.logs.String(), rotated)
	require.NoError(t, svc.Start(d.calloutNC))
	select {
	case <-reconnected:
	case <-time.After(15 * time.Second):
		t.Fatal("the worker did not reconnect once the callout was back")
	}
	assert.Equal(t, before+1, strings.Count(d.logs.String(), rotated), "readmitted with the rotated token, read from the file again")
	require.NoError(t, nc.Flush())
}

func started(node string) events.Envelope {
	return events.New(events.NodeAggregate(testRef, node), events.SourceWorker+"/"+node, fmt.Sprintf("test-%d", time.Now().UnixNano()), time.Now(),
		events.NodeUpgradeStarted{Node: node, DataEngine: "v2", InstanceManagerImage: "longhornio/longhorn-instance-manager:v1.12.1", Attempt: 1})[0]
}

func decisions(reason string) float64 {
	var m dto.Metric
	if err := metrics.NATSCalloutDecisions.WithLabelValues(reason).Write(&m); err != nil {
		panic(err)
	}
	return m.GetCounter().GetValue()
}

func allDecisions() float64 {
	var sum float64
	for _, r := range []string{callout.ReasonAllowed, callout.ReasonBadRequest, callout.ReasonReplayed, callout.ReasonNoToken,
		callout.ReasonTokenTooLarge, callout.ReasonNotAuthenticated, callout.ReasonWrongServiceAccount, callout.ReasonNoNode,
		callout.ReasonNoExpiry, callout.ReasonReviewFailed, callout.ReasonInternal} {
		sum += decisions(r)
	}
	return sum
}

func nonBlocking[T any](ch chan T, v T) {
	select {
	case ch <- v:
	default:
	}
}

// logSink shows the callout's log live with CALLOUT_LOG=1.
func logSink() io.Writer {
	if os.Getenv("CALLOUT_LOG") != "" {
		return os.Stderr
	}
	return io.Discard
}
