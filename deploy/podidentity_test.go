package deploy

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/switchback-dev/switchback/test/harness/testenv"
)

// TestPodIdentityPolicy runs the shipped switchback-pod-identity policy on
// the apiserver: a pod that borrows a Switchback ServiceAccount or
// component label is refused, whoever creates it, with a message naming
// what it lacks; the pods Kubernetes' workload controllers create for
// Switchback's own workloads are admitted; other pods are untouched.
func TestPodIdentityPolicy(t *testing.T) {
	prepareAPIServer(t)
	env := testenv.Get(t)
	m := render(t, repoPath(t, "deploy"))
	for _, kind := range []string{"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"} {
		b, err := yaml.Marshal(m.object(t, kind, "switchback-pod-identity").Object)
		require.NoError(t, err)
		kubectl(t, b, "apply", "-f", "-")
	}
	t.Cleanup(func() {
		kubectl(t, nil, "delete", "validatingadmissionpolicybinding,validatingadmissionpolicy", "switchback-pod-identity", "--ignore-not-found")
	})
	as := func(user string) kubernetes.Interface {
		cfg := rest.CopyConfig(env.Config)
		if user != "" {
			// system:masters: RBAC lets every user create pods, so that
			// only the policy decides.
			cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated", "system:masters"}}
		}
		cs, err := kubernetes.NewForConfig(cfg)
		require.NoError(t, err)
		return cs
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, sa := range []string{"switchback-worker", "switchback-controller"} {
		_, err := as("").CoreV1().ServiceAccounts(namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{})
		if !apierrors.IsAlreadyExists(err) {
			require.NoError(t, err)
		}
	}
	owner := func(kind, name string) []metav1.OwnerReference {
		yes := true
		return []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: name, UID: "0b5e1f1e-0000-4000-8000-000000000001", Controller: &yes}}
	}
	podOf := func(name, component, sa string, owners []metav1.OwnerReference) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, OwnerReferences: owners},
			Spec: corev1.PodSpec{ServiceAccountName: sa, Containers: []corev1.Container{{Name: "c", Image: "example.invalid/c"}}}}
		if component != "" {
			p.Labels = map[string]string{"app.kubernetes.io/name": component}
		}
		return p
	}
	const (
		dsController = "system:serviceaccount:kube-system:daemon-set-controller"
		rsController = "system:serviceaccount:kube-system:replicaset-controller"
		ssController = "system:serviceaccount:kube-system:statefulset-controller"
		admin        = "" // the test's system:masters user
	)
	cases := []struct {
		name    string
		user    string
		pod     *corev1.Pod
		refused string // a part of the refusal, "" when admitted
	}{
		{"a worker pod of the DaemonSet, by its controller", dsController,
			podOf("w-ok", "switchback-worker", "switchback-worker", owner("DaemonSet", "switchback-worker")), ""},
		{"a worker pod of the DaemonSet, by the controller manager's own user", "system:kube-controller-manager",
			podOf("w-kcm", "switchback-worker", "switchback-worker", owner("DaemonSet", "switchback-worker")), ""},
		{"a controller pod of its ReplicaSet", rsController,
			podOf("c-ok", "switchback-controller", "switchback-controller", owner("ReplicaSet", "switchback-controller-6d4b9c7f8")), ""},
		{"a NATS pod of its StatefulSet", ssController,
			podOf("n-ok", "switchback-nats", "", owner("StatefulSet", "switchback-nats")), ""},
		{"any other pod", admin, podOf("other", "", "", nil), ""},
		{"the worker's ServiceAccount borrowed", admin, podOf("w-sa", "", "switchback-worker", nil), `with ServiceAccount "switchback-worker"`},
		{"the controller's ServiceAccount borrowed", admin, podOf("c-sa", "", "switchback-controller", nil), `with ServiceAccount "switchback-controller"`},
		{"the worker's label borrowed", admin, podOf("w-label", "switchback-worker", "", nil), `label app.kubernetes.io/name "switchback-worker"`},
		{"a worker pod created by hand", admin,
			podOf("w-hand", "switchback-worker", "switchback-worker", owner("DaemonSet", "switchback-worker")), "created by"},
		{"a worker pod of another DaemonSet", dsController,
			podOf("w-other", "switchback-worker", "switchback-worker", owner("DaemonSet", "switchback-worker-2")), "not by DaemonSet switchback-worker-2"},
		{"a worker pod owned by nothing", dsController,
			podOf("w-none", "switchback-worker", "switchback-worker", nil), "not by none"},
		{"a worker pod made by the ReplicaSet controller", rsController,
			podOf("w-rs", "switchback-worker", "switchback-worker", owner("DaemonSet", "switchback-worker")), "daemon-set-controller only"},
		{"the NATS label borrowed", admin, podOf("n-label", "switchback-nats", "", nil), "StatefulSet switchback-nats"},
	}
	// The policy takes effect a moment after it is created: wait until it
	// refuses the first borrowed identity.
	require.Eventually(t, func() bool {
		_, err := as(admin).CoreV1().Pods(namespace).Create(ctx, podOf("probe", "", "switchback-worker", nil), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return apierrors.IsForbidden(err) || apierrors.IsInvalid(err)
	}, 30*time.Second, 100*time.Millisecond, "the policy is in force")
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := as(tc.user).CoreV1().Pods(namespace).Create(ctx, tc.pod, metav1.CreateOptions{})
			if tc.refused == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.True(t, apierrors.IsForbidden(err) || apierrors.IsInvalid(err), "%v", err)
			assert.Contains(t, err.Error(), "switchback-pod-identity")
			assert.Contains(t, err.Error(), tc.refused)
		})
	}
	// A pod admitted without an identity does not gain one later.
	p, err := as(admin).CoreV1().Pods(namespace).Get(ctx, "other", metav1.GetOptions{})
	require.NoError(t, err)
	p.Labels = map[string]string{"app.kubernetes.io/name": "switchback-worker"}
	_, err = as(admin).CoreV1().Pods(namespace).Update(ctx, p, metav1.UpdateOptions{})
	require.Error(t, err, "the worker's label put on a running pod")
	assert.Contains(t, err.Error(), "switchback-pod-identity")
}
