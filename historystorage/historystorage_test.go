package historystorage_test

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

func TestMain(m *testing.M) { testenv.Main(m) }

// TestHistoryOffLonghorn: on the real apiserver, the NATS servers' claims
// (selected as deploy/nats labels them) are found with their classes: a
// Longhorn class is refused, naming the claim, the class and its data
// engine, unless allowed; a claim naming no class gets the default one; a
// class that is not Longhorn's passes; other claims are not looked at.
func TestHistoryOffLonghorn(t *testing.T) {
	env := testenv.Get(t)
	cs, err := kubernetes.NewForConfig(env.Config)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	class := func(name, provisioner string, params map[string]string, isDefault bool) {
		c := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: provisioner, Parameters: params}
		if isDefault {
			c.Annotations = map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}
		}
		_, err := cs.StorageV1().StorageClasses().Create(ctx, c, metav1.CreateOptions{})
		require.NoError(t, err)
		t.Cleanup(func() { _ = cs.StorageV1().StorageClasses().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	}
	class("hs-longhorn-v2", historystorage.LonghornProvisioner, map[string]string{"dataEngine": "v2"}, false)
	class("hs-longhorn", historystorage.LonghornProvisioner, nil, true)
	class("hs-local", "rancher.io/local-path", nil, false)

	claim := func(ns, name string, class *string, labels map[string]string) {
		_, err := cs.CoreV1().PersistentVolumeClaims(ns).Create(ctx, &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: class, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	nats := map[string]string{"app.kubernetes.io/name": "switchback-nats"}
	namespace := func(name string) string {
		_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		require.NoError(t, err)
		return name
	}
	str := func(s string) *string { return &s }

	onLonghorn := namespace("hs-on-longhorn")
	claim(onLonghorn, "data-switchback-nats-0", str("hs-longhorn-v2"), nats)
	claim(onLonghorn, "data-switchback-nats-1", nil, nats) // the default class, Longhorn's
	claim(onLonghorn, "someone-elses", str("hs-longhorn-v2"), map[string]string{"app": "other"})
	vols, err := historystorage.Find(ctx, cs, onLonghorn, historystorage.DefaultSelector)
	require.NoError(t, err)
	assert.Equal(t, []historystorage.Volume{
		{Claim: "data-switchback-nats-0", StorageClass: "hs-longhorn-v2", Provisioner: historystorage.LonghornProvisioner, DataEngine: "v2"},
		{Claim: "data-switchback-nats-1", StorageClass: "hs-longhorn", Provisioner: historystorage.LonghornProvisioner, DataEngine: "v1"},
	}, vols, "only the history's claims, each with its class (the default one when it names none)")
	err = historystorage.Check(vols, false)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "data-switchback-nats-0 (StorageClass hs-longhorn-v2, Longhorn v2)")
	assert.Contains(t, err.Error(), "data-switchback-nats-1 (StorageClass hs-longhorn, Longhorn v1)")
	assert.Contains(t, err.Error(), "--allow-history-on-longhorn")
	assert.NoError(t, historystorage.Check(vols, true), "the operator's explicit choice")

	offLonghorn := namespace("hs-off-longhorn")
	claim(offLonghorn, "data-switchback-nats-0", str("hs-local"), nats)
	vols, err = historystorage.Find(ctx, cs, offLonghorn, historystorage.DefaultSelector)
	require.NoError(t, err)
	require.Len(t, vols, 1)
	assert.NoError(t, historystorage.Check(vols, false), "local storage passes")

	none, err := historystorage.Find(ctx, cs, namespace("hs-external-nats"), historystorage.DefaultSelector)
	require.NoError(t, err)
	assert.Empty(t, none, "no bundled NATS (an external one): nothing to check")
	assert.NoError(t, historystorage.Check(none, false))
}
