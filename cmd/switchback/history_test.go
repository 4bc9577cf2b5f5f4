package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/switchback-dev/switchback/historystorage"
	"github.com/switchback-dev/switchback/test/harness/testenv"
)

// TestControllerRefusesHistoryOnLonghorn: the controller does not start
// while the NATS servers' volumes (deploy/nats's claims) are Longhorn's,
// saying which and what to do; --allow-history-on-longhorn lets it go on
// (here to NATS, which is not there), as does --history-volumes "".
func TestControllerRefusesHistoryOnLonghorn(t *testing.T) {
	env := testenv.Get(t)
	cs, err := kubernetes.NewForConfig(env.Config)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const ns = "history-on-longhorn"
	_, err = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = cs.StorageV1().StorageClasses().Create(ctx, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "cmd-longhorn"},
		Provisioner: historystorage.LonghornProvisioner, Parameters: map[string]string{"dataEngine": "v2"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = cs.StorageV1().StorageClasses().Delete(context.Background(), "cmd-longhorn", metav1.DeleteOptions{})
	})
	class := "cmd-longhorn"
	_, err = cs.CoreV1().PersistentVolumeClaims(ns).Create(ctx, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data-switchback-nats-0", Labels: map[string]string{"app.kubernetes.io/name": "switchback-nats"}},
		Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &class, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	base := []string{"controller", "--kubeconfig", env.Kubeconfig, "--namespace", ns, "--nats-url", "nats://127.0.0.1:1",
		"--health-addr", "", "--webhook-addr", ""}
	code, _, stderr := runCmd(t, 30*time.Second, base...)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "the upgrade's history is on Longhorn volumes: data-switchback-nats-0 (StorageClass cmd-longhorn, Longhorn v2)")
	for _, extra := range [][]string{{"--allow-history-on-longhorn"}, {"--history-volumes", ""}} {
		code, _, stderr = runCmd(t, 30*time.Second, append(base, extra...)...)
		assert.NotEqual(t, 0, code, "no NATS to run with")
		assert.NotContains(t, stderr, "history is on Longhorn", "%v lets the controller go on", extra)
	}
}
