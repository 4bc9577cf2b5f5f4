package nodeaccounts_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/switchback-dev/switchback/natsauth"
	"github.com/switchback-dev/switchback/natsauth/callout"
	"github.com/switchback-dev/switchback/nodeaccounts"
	"github.com/switchback-dev/switchback/test/harness/manifesttest"
	"github.com/switchback-dev/switchback/test/harness/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

const ns = "nodeaccounts"

// TestSyncerFollowsTheNodes on the real apiserver, as the controller's
// ServiceAccount bound by deploy/rbac: from the generator's
// Secret (no node account), the leader's Syncer writes the configuration
// the layout renders for the cluster's Nodes, again when a Node joins or
// leaves and when an operator applies the generator's Secret over it, and
// every replica's Nodes reads the list back; nothing is written while
// nothing changes.
func TestSyncerFollowsTheNodes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cs, err := kubernetes.NewForConfig(testenv.Get(t).Config)
	require.NoError(t, err)
	_, err = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	node := func(name string) {
		_, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	node("n1")
	node("n2")
	manifesttest.ApplyRBAC(t, ctx, dynamic.NewForConfigOrDie(testenv.Get(t).Config), ns, "controller.yaml")
	asController, err := kubernetes.NewForConfig(manifesttest.ConfigAs(t, ns, "switchback-controller"))
	require.NoError(t, err)

	keys, err := callout.GenerateKeys()
	require.NoError(t, err)
	side, err := keys.Server(0)
	require.NoError(t, err)
	generated, err := natsauth.Generate(natsauth.Config{Account: natsauth.DefaultAccount, NodeAccounts: true, Callout: side})
	require.NoError(t, err)
	layout, err := generated.Layout()
	require.NoError(t, err)
	applyGenerated := func() {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: natsauth.ServerSecretName, Namespace: ns},
			Data: map[string][]byte{natsauth.ServerSecretKey: []byte(generated.ServerConfig())}}
		if _, err := cs.CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{}); err == nil {
			return
		}
		cur, err := cs.CoreV1().Secrets(ns).Get(ctx, natsauth.ServerSecretName, metav1.GetOptions{})
		require.NoError(t, err)
		cur.Data = s.Data
		_, err = cs.CoreV1().Secrets(ns).Update(ctx, cur, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
	applyGenerated()

	start := func() *nodeaccounts.Syncer {
		s, err := nodeaccounts.New(nodeaccounts.Config{Client: asController, Namespace: ns, Layout: layout})
		require.NoError(t, err)
		require.NoError(t, s.Start(ctx))
		return s
	}
	leader, follower := start(), start()
	done := make(chan error, 1)
	go func() { done <- leader.Run(ctx) }()

	rendered := func(nodes ...string) bool {
		sec, err := cs.CoreV1().Secrets(ns).Get(ctx, natsauth.ServerSecretName, metav1.GetOptions{})
		require.NoError(t, err)
		want, err := layout.Render(nodes)
		require.NoError(t, err)
		got, _ := follower.Nodes()
		return string(sec.Data[natsauth.ServerSecretKey]) == want.ServerConfig() && slices.Equal(got, nodes)
	}
	waitFor := func(what string, nodes ...string) {
		t.Helper()
		require.Eventually(t, func() bool { return rendered(nodes...) }, 30*time.Second, 20*time.Millisecond, what)
	}
	waitFor("the accounts of n1 and n2", "n1", "n2")
	sec, err := cs.CoreV1().Secrets(ns).Get(ctx, natsauth.ServerSecretName, metav1.GetOptions{})
	require.NoError(t, err)
	require.NoError(t, leader.Sync(ctx))
	again, err := cs.CoreV1().Secrets(ns).Get(ctx, natsauth.ServerSecretName, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, sec.ResourceVersion, again.ResourceVersion, "nothing written while nothing changes")

	node("n3")
	waitFor("n3 joins", "n1", "n2", "n3")
	require.NoError(t, cs.CoreV1().Nodes().Delete(ctx, "n1", metav1.DeleteOptions{}))
	waitFor("n1 leaves", "n2", "n3")
	applyGenerated()
	waitFor("the generator's Secret applied over it", "n2", "n3")

	cancel()
	assert.NoError(t, <-done)
}
