package callout_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/eventstore"
	"github.com/switchback-dev/switchback/natsauth"
	"github.com/switchback-dev/switchback/natsauth/callout"
	"github.com/switchback-dev/switchback/natsembed"
	"github.com/switchback-dev/switchback/natsembed/natstest"
	"github.com/switchback-dev/switchback/nodequeue"
	"github.com/switchback-dev/switchback/test/harness/syncbuf"
	"github.com/switchback-dev/switchback/test/harness/testenv"
)

// cluster is the Kubernetes side: nodes n1 and n2, the worker's pods on
// them, an intruder's pod on n1, and the callout's identity allowed to
// create TokenReviews (and nothing else).
type cluster struct {
	t    *testing.T
	ctx  context.Context
	env  *testenv.Env
	cs   kubernetes.Interface // admin: sets the scene, mints tokens
	pods map[string]*corev1.Pod
	// callout is the callout's client, authenticated by its own
	// ServiceAccount token.
	callout kubernetes.Interface
}

func newCluster(t *testing.T, ctx context.Context) *cluster {
	t.Helper()
	env := testenv.Get(t)
	cs, err := kubernetes.NewForConfig(env.Config)
	require.NoError(t, err)
	c := &cluster{t: t, ctx: ctx, env: env, cs: cs, pods: map[string]*corev1.Pod{}}
	// Objects are shared by the package's tests (namespaces cannot be
	// deleted without a namespace controller): created once, reused.
	ensure(t, func() error {
		_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		return err
	})
	for _, n := range []string{"n1", "n2"} {
		ensure(t, func() error {
			_, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{})
			return err
		})
	}
	for _, sa := range []string{callout.DefaultServiceAccount, intruderSA, calloutSA} {
		ensure(t, func() error {
			_, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{})
			return err
		})
	}
	for name, p := range map[string]struct{ sa, node string }{
		"worker-n1":   {callout.DefaultServiceAccount, "n1"},
		"worker-n2":   {callout.DefaultServiceAccount, "n2"},
		"intruder-n1": {intruderSA, "n1"},
	} {
		c.pods[name] = c.pod(name, p.sa, p.node)
	}
	// The rule the controller's ClusterRole needs for the callout.
	ensure(t, func() error {
		_, err := cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: "switchback-nats-callout"},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{"create"}}},
		}, metav1.CreateOptions{})
		return err
	})
	ensure(t, func() error {
		_, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "switchback-nats-callout"},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "switchback-nats-callout"},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: calloutSA, Namespace: ns}},
		}, metav1.CreateOptions{})
		return err
	})
	c.callout = c.clientAs(calloutSA)
	// RBAC takes effect asynchronously: wait until the callout may review.
	require.Eventually(t, func() bool {
		_, err := c.callout.AuthenticationV1().TokenReviews().Create(ctx, &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: "x"}}, metav1.CreateOptions{})
		return err == nil
	}, 30*time.Second, 20*time.Millisecond, "the callout may create tokenreviews")
	return c
}

// ensure runs create, accepting that an earlier test created the object.
func ensure(t *testing.T, create func() error) {
	t.Helper()
	if err := create(); !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
}

// pod creates (or gets) a pod of sa bound to node. No kubelet runs: the
// pod only has to exist for tokens to be bound to it.
func (c *cluster) pod(name, sa, node string) *corev1.Pod {
	c.t.Helper()
	pods := c.cs.CoreV1().Pods(ns)
	ensure(c.t, func() error {
		_, err := pods.Create(c.ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PodSpec{ServiceAccountName: sa, NodeName: node,
				Containers: []corev1.Container{{Name: "worker", Image: "switchback-dev/switchback"}}},
		}, metav1.CreateOptions{})
		return err
	})
	p, err := pods.Get(c.ctx, name, metav1.GetOptions{})
	require.NoError(c.t, err)
	return p
}

// token mints a token of sa with the TokenRequest API, as the kubelet does
// for a projected volume: for audience, bound to pod when one is given.
func (c *cluster) token(sa string, pod *corev1.Pod, audience string) string {
	c.t.Helper()
	exp := int64(3600)
	tr := &authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{ExpirationSeconds: &exp}}
	if audience != "" {
		tr.Spec.Audiences = []string{audience}
	}
	if pod != nil {
		tr.Spec.BoundObjectRef = &authnv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}
	}
	out, err := c.cs.CoreV1().ServiceAccounts(ns).CreateToken(c.ctx, sa, tr, metav1.CreateOptions{})
	require.NoError(c.t, err, "token of %s", sa)
	return out.Status.Token
}

// clientAs is a client authenticated by a token of sa (for the apiserver's
// own audience), as a pod of sa would be.
func (c *cluster) clientAs(sa string) kubernetes.Interface {
	c.t.Helper()
	cfg := &rest.Config{Host: c.env.Config.Host, BearerToken: c.token(sa, nil, ""),
		TLSClientConfig: rest.TLSClientConfig{CAData: c.env.Config.CAData}}
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(c.t, err)
	return cs
}

// deployment is the NATS side: an embedded server in callout mode, the
// controller's static user (which created the streams and consumers) and
// the callout service's connection.
type deployment struct {
	t          *testing.T
	ctx        context.Context
	srv        *natsembed.Server
	files      *natstest.FileServers
	keys       callout.Keys
	auth       *natsauth.Authorization
	controller natsauth.User
	queue      *nodequeue.Queue
	calloutNC  *nats.Conn
	logs       *syncbuf.Buffer
	log        *slog.Logger
}

func newDeployment(t *testing.T, ctx context.Context, timeout time.Duration) *deployment {
	t.Helper()
	return newDeploymentWith(t, ctx, timeout, nil)
}

// newDeploymentWith is newDeployment in the node-account layout for the
// nodes nodeAccounts (nil: the default install's shape).
func newDeploymentWith(t *testing.T, ctx context.Context, timeout time.Duration, nodeAccounts []string) *deployment {
	t.Helper()
	keys, err := callout.GenerateKeys()
	require.NoError(t, err)
	// The default install's shape: Switchback's own account, named by the
	// keys.
	keys.Account, keys.NodeAccounts = natsauth.DefaultAccount, nodeAccounts
	side, err := keys.Server(timeout)
	require.NoError(t, err)
	auth, err := natsauth.Generate(natsauth.Config{Callout: side, Account: keys.Account, Nodes: nodeAccounts, NodeAccounts: nodeAccounts != nil})
	require.NoError(t, err)
	svc := side.Service
	d := &deployment{t: t, ctx: ctx, keys: keys, auth: auth, logs: &syncbuf.Buffer{}, controller: auth.Controller}
	d.log = slog.New(slog.NewTextHandler(io.MultiWriter(d.logs, logSink()), &slog.HandlerOptions{Level: slog.LevelDebug}))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("callout log:\n%s", d.logs.String())
		}
	})

	// A server reading its configuration from files, as deployed ones do,
	// so that a test can change the layout and reload it.
	d.files = natstest.StartFromFiles(t, 1, auth.ServerConfig())
	d.srv = d.files.Servers[0]

	// The controller creates the streams and the node consumers, and queues
	// a command for each node.
	nc := d.connectController()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	_, err = eventstore.Open(ctx, js, eventstore.Config{})
	require.NoError(t, err)
	d.queue, err = nodequeue.Open(ctx, js, nodequeue.Config{})
	require.NoError(t, err)
	require.NoError(t, d.queue.EnsureNodeConsumers(ctx, "n1", "n2"))
	for _, n := range []string{"n1", "n2"} {
		_, err := d.queue.Publish(ctx, nodequeue.Command{ID: "cmd-" + n, Kind: nodequeue.Advance, Manager: testRef, Node: n, Attempt: 1,
			Step: events.NodePending, DataEngine: "v2", InstanceManagerImage: "longhornio/longhorn-instance-manager:v1.12.1", IssuedAt: time.Now()})
		require.NoError(t, err)
	}

	d.calloutNC, err = d.srv.Connect(nats.Nkey(svc.NKey, keys.Service.Sign), nats.Name("switchback-nats-callout"))
	require.NoError(t, err, "the callout's static user connects")
	return d
}

// connectController connects the controller's static user.
func (d *deployment) connectController(extra ...nats.Option) *nats.Conn {
	d.t.Helper()
	opts, err := d.controller.ConnectOptions()
	require.NoError(d.t, err)
	nc, err := d.srv.Connect(append(opts, extra...)...)
	require.NoError(d.t, err, "the controller's static user connects")
	return nc
}

// service starts a callout Service verifying tokens with reviewer; it
// stops at the end of the test (before the server).
func (d *deployment) service(reviewer callout.TokenReviewer, maxTTL time.Duration) *callout.Service {
	d.t.Helper()
	svc, err := callout.New(callout.Config{Issuer: d.keys.Issuer, XKey: d.keys.XKey, Account: d.keys.Account, NodeAccounts: d.keys.NodeAccounts,
		Reviewer: reviewer, Namespace: ns, MaxTTL: maxTTL, Log: d.log})
	require.NoError(d.t, err)
	require.NoError(d.t, svc.Start(d.calloutNC))
	d.t.Cleanup(svc.Stop)
	return svc
}

// dialWorker connects as node's worker with the token in the file path
// ("" presents no token at all).
func (d *deployment) dialWorker(node, path string, extra ...nats.Option) (*nats.Conn, *natsauth.Violations, error) {
	v := &natsauth.Violations{}
	opts := natsauth.WorkerOptions(node)
	if path != "" {
		opts = callout.WorkerOptions(node, path, d.log)
	}
	// extra last: a test's own error handler replaces v's.
	nc, err := d.srv.Connect(append(append(opts, v.Option(), nats.Name("switchback-worker-"+node)), extra...)...)
	return nc, v, err
}
