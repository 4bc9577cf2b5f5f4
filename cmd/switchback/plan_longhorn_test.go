package main

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/switchback-dev/switchback/longhorn/longhornsim"
	"github.com/switchback-dev/switchback/sim"
	"github.com/switchback-dev/switchback/test/harness/testenv"
)

// `switchback plan --data-plane longhorn` reads a cluster's Longhorn through
// the adapter (read only): the detected Longhorn, the prechecks, the order
// with the nodes that can be upgraded live first, and why the others cannot.
func TestPlanReadsARealClustersLonghorn(t *testing.T) {
	env := testenv.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	root, err := testenv.RepoRoot()
	require.NoError(t, err)
	require.NoError(t, testenv.InstallCRDs(ctx, env.Config, filepath.Join(root, "test", "longhorn-crds")))
	cfg := rest.CopyConfig(env.Config)
	cfg.WarningHandler = rest.NoWarnings{}
	dyn, err := dynamic.NewForConfig(cfg)
	require.NoError(t, err)
	const ns = "lh-plan"
	nsObj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}}}
	_, err = dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}).Create(ctx, nsObj, metav1.CreateOptions{})
	require.NoError(t, err)

	s := sim.New(sim.Config{LonghornVersion: "v1.12.1"})
	for _, n := range []string{"n1", "n2", "n3"} {
		require.NoError(t, s.AddNode(n))
	}
	require.NoError(t, s.AddVolumeSpec(sim.VolumeSpec{Name: "app", ReplicasOn: []string{"n1", "n2", "n3"}, AttachedTo: "n1", EngineOn: "n2"}))
	require.NoError(t, s.AddVolumeSpec(sim.VolumeSpec{Name: "two", ReplicasOn: []string{"n2", "n3"}, AttachedTo: "n1", EngineOn: "n3"}))
	mgr, err := longhornsim.Start(ctx, dyn, s, longhornsim.Options{Namespace: ns})
	require.NoError(t, err)
	defer mgr.Close()

	code, out, errOut := runCmd(t, time.Minute, "plan", "--data-plane", "longhorn", "--kubeconfig", env.Kubeconfig, "--longhorn-namespace", ns)
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
	for _, want := range []string{
		"Longhorn: v1.12 (Longhorn v1.12.1)",
		"enginefrontends.longhorn.io served",
		"ok   VolumesHealthy",
		"LIVE ON THIS LONGHORN",
		"no (initiators, see below)",
		"n1: node n1 holds the initiators of attached v2 volumes app, two",
		"Served from a single healthy replica while the node is upgraded:\n  n2: two\n  n3: two",
	} {
		assert.Contains(t, out, want)
	}
	actions, _ := s.ActionLog()
	assert.Empty(t, actions, "read only")

	code, _, errOut = runCmd(t, time.Minute, "plan", "--data-plane", "longhorn", "--kubeconfig", env.Kubeconfig, "--context", "nowhere")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, `context "nowhere"`)
	code, _, errOut = runCmd(t, time.Minute, "plan", "--data-plane", "longhorn", "--kubeconfig", env.Kubeconfig, "--longhorn-namespace", "nothing-here")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, fmt.Sprintf("setting %q", "default-instance-manager-image"), "an empty namespace: no Longhorn settings")
}
