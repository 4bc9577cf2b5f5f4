package main

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/switchback-dev/switchback/api/v1beta2"
	"github.com/switchback-dev/switchback/kubeclient"
	"github.com/switchback-dev/switchback/test/harness/testenv"
)

// TestUninstallWaitsForTheUpgradesInFlight: with a manager in flight,
// `uninstall` refuses and names it (a finished one does not count); with
// --cancel it deletes it and returns once the controller (played here:
// none runs on the test apiserver) has let it go, leaving the finished
// manager in place.
func TestUninstallWaitsForTheUpgradesInFlight(t *testing.T) {
	env := testenv.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cs, err := kubernetes.NewForConfig(env.Config)
	require.NoError(t, err)
	kc, err := kubeclient.New(env.Config)
	require.NoError(t, err)
	const ns = "uninstall-test"
	_, err = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	managers := kc.Managers(ns)
	create := func(name string, state v1beta2.UpgradeState) {
		m, err := managers.Create(ctx, &v1beta2.DataEngineUpgradeManager{
			ObjectMeta: metav1.ObjectMeta{Name: name, Finalizers: []string{v1beta2.CancelFinalizer}},
			Spec:       v1beta2.DataEngineUpgradeManagerSpec{DataEngine: v1beta2.DataEngineTypeV2},
		})
		require.NoError(t, err)
		m.Status.State = state
		_, err = managers.UpdateStatus(ctx, m)
		require.NoError(t, err)
	}
	create("in-flight", v1beta2.UpgradeStateUpgrading)
	create("finished", v1beta2.UpgradeStateCompleted)
	args := []string{"uninstall", "--kubeconfig", env.Kubeconfig, "--namespace", ns}

	code, _, stderr := runCmd(t, 30*time.Second, args...)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "upgrades in flight in uninstall-test: in-flight.")
	assert.NotContains(t, stderr, "finished")

	// The controller's part: once the manager is being deleted, the cancel
	// reaches its safe point and the finalizer goes.
	released := make(chan error, 1)
	go func() {
		for ctx.Err() == nil {
			m, err := managers.Get(ctx, "in-flight")
			if err == nil && m.DeletionTimestamp != nil {
				m.Finalizers = slices.DeleteFunc(m.Finalizers, func(f string) bool { return f == v1beta2.CancelFinalizer })
				_, err = managers.Update(ctx, m)
				released <- err
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		released <- ctx.Err()
	}()
	code, stdout, stderr := runCmd(t, time.Minute, append(args, "--cancel", "--timeout", "45s")...)
	require.Equal(t, 0, code, "%s\n%s", stdout, stderr)
	require.NoError(t, <-released)
	assert.Contains(t, stdout, "deleted manager uninstall-test/in-flight")
	assert.Contains(t, stdout, "every cancel reached its safe point")
	assert.Contains(t, stdout, "kubectl delete -k deploy/")
	_, err = managers.Get(ctx, "in-flight")
	assert.True(t, apierrors.IsNotFound(err))
	_, err = managers.Get(ctx, "finished")
	assert.NoError(t, err, "a finished upgrade's object stays")

	code, stdout, _ = runCmd(t, 30*time.Second, args...)
	assert.Equal(t, 0, code)
	assert.Contains(t, stdout, "no upgrade in flight")

	// kubectl's short namespace flag, and a context the kubeconfig lacks.
	code, stdout, _ = runCmd(t, 30*time.Second, "uninstall", "--kubeconfig", env.Kubeconfig, "-n", ns)
	assert.Equal(t, 0, code)
	assert.Contains(t, stdout, "no upgrade in flight in "+ns)
	code, _, stderr = runCmd(t, 30*time.Second, "uninstall", "--kubeconfig", env.Kubeconfig, "-n", ns, "--context", "nowhere")
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "nowhere")
}
