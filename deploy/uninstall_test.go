package deploy

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/switchback-dev/switchback/test/harness/testenv"
)

// TestUninstallLeavesLonghornAlone installs deploy/ for real (no
// controller runs on the test apiserver, so nothing starts) beside a
// stand-in Longhorn (its CRDs and a volume in longhorn-system) and a
// finished upgrade, then uninstalls as the docs say (`kubectl delete -k
// deploy/`): Switchback's objects are gone; Longhorn's namespace and volume
// carry no deletionTimestamp; Switchback's CRDs and the finished upgrade's
// object stay.
func TestUninstallLeavesLonghornAlone(t *testing.T) {
	prepareAPIServer(t)
	env := testenv.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	require.NoError(t, testenv.InstallCRDs(ctx, env.Config, repoPath(t, "test", "longhorn-crds")))
	dyn, err := dynamic.NewForConfig(env.Config)
	require.NoError(t, err)
	cs, err := kubernetes.NewForConfig(env.Config)
	require.NoError(t, err)
	volumes := dyn.Resource(schema.GroupVersionResource{Group: "longhorn.io", Version: "v1beta2", Resource: "volumes"}).Namespace(namespace)
	managers := dyn.Resource(schema.GroupVersionResource{Group: "longhorn.io", Version: "v1beta2", Resource: "dataengineupgrademanagers"}).Namespace(namespace)
	_, err = volumes.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "longhorn.io/v1beta2", "kind": "Volume",
		"metadata": map[string]any{"name": "pvc-longhorns-own"},
		"spec":     map[string]any{"numberOfReplicas": int64(3), "dataEngine": "v2"},
	}}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = volumes.Delete(context.Background(), "pvc-longhorns-own", metav1.DeleteOptions{}) })
	kubectl(t, nil, "apply", "-k", repoPath(t, "deploy", "crds"))
	// Before the webhook configuration exists: no webhook server runs here.
	_, err = managers.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "longhorn.io/v1beta2", "kind": "DataEngineUpgradeManager",
		"metadata": map[string]any{"name": "finished-before"},
		"spec":     map[string]any{"dataEngine": "v2"},
	}}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = managers.Delete(context.Background(), "finished-before", metav1.DeleteOptions{}) })

	t.Cleanup(func() {
		_, _, _ = env.Kubectl(context.Background(), nil, "delete", "-k", repoPath(t, "deploy"), "--ignore-not-found")
	})
	out := kubectl(t, nil, "apply", "-k", repoPath(t, "deploy"))
	require.Contains(t, out, "deployment.apps/switchback-controller created")
	out = kubectl(t, nil, "delete", "-k", repoPath(t, "deploy"), "--wait=false")
	t.Log("\n" + out)
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		assert.Contains(t, line, "switchback", "only Switchback's objects are deleted: %s", line)
	}

	ns, err := cs.CoreV1().Namespaces().Get(ctx, namespace, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Nil(t, ns.DeletionTimestamp, "Longhorn's namespace is not being deleted")
	v, err := volumes.Get(ctx, "pvc-longhorns-own", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Nil(t, v.GetDeletionTimestamp(), "Longhorn's volume is not being deleted")
	_, err = cs.AppsV1().Deployments(namespace).Get(ctx, "switchback-controller", metav1.GetOptions{})
	assert.Error(t, err, "the controller is gone")
	for _, crd := range []string{"dataengineupgrademanagers.longhorn.io", "nodedataengineupgrades.longhorn.io"} {
		c, err := dyn.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}).Get(ctx, crd, metav1.GetOptions{})
		require.NoError(t, err, "the CRD %s stays", crd)
		assert.Nil(t, c.GetDeletionTimestamp(), crd)
	}
	m, err := managers.Get(ctx, "finished-before", metav1.GetOptions{})
	require.NoError(t, err, "a past upgrade's object stays")
	assert.Nil(t, m.GetDeletionTimestamp())
}
