package longhorn_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/switchback-dev/switchback/longhorn"
	"github.com/switchback-dev/switchback/test/harness/manifesttest"
	"github.com/switchback-dev/switchback/test/harness/testenv"
)

// scoped is a test cluster under deploy/rbac's worker identity and policy.
type scoped struct {
	c    *cluster
	kube kubernetes.Interface
}

// underWorkerPolicy binds the worker's RBAC in the test's namespace, creates
// its service account, applies the policies for that namespace (cluster-scoped
// names get the namespace as a suffix), and returns once the apiserver
// enforces the node scope. The policies load asynchronously, so a probe (a
// dry-run patch of Longhorn node n1, with a token bound to no node) is
// repeated until the policy refuses it. The image policy refuses only what
// the node scope admits, so the apiserver reports no denial of it on such a
// probe: a test of it waits for it itself.
func underWorkerPolicy(t *testing.T, c *cluster) *scoped {
	t.Helper()
	manifesttest.ApplyRBAC(t, c.ctx, c.dyn, c.ns, "worker.yaml")
	kube, err := kubernetes.NewForConfig(testenv.Get(t).Config)
	require.NoError(t, err)
	s := &scoped{c: c, kube: kube}

	for _, sa := range manifests(t, "serviceaccounts.yaml", "") {
		if sa.GetName() == "switchback-worker" {
			sa.SetNamespace(c.ns)
			_, err := c.dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}).Namespace(c.ns).Create(c.ctx, sa, metav1.CreateOptions{})
			require.NoError(t, err)
		}
	}

	policies := schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicies"}
	bindings := schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicybindings"}
	objs := manifests(t, "worker-admission-policy.yaml", c.ns)
	kinds := map[string]int{}
	for _, u := range objs {
		kinds[u.GetKind()]++
	}
	require.Equal(t, kinds["ValidatingAdmissionPolicy"], kinds["ValidatingAdmissionPolicyBinding"], "each policy with its binding")
	require.Equal(t, len(objs), 2*kinds["ValidatingAdmissionPolicy"], "policies and their bindings only")
	for _, u := range objs {
		gvr := policies
		if u.GetKind() == "ValidatingAdmissionPolicyBinding" {
			gvr = bindings
			name, _, _ := unstructured.NestedString(u.Object, "spec", "policyName")
			require.NoError(t, unstructured.SetNestedField(u.Object, name+"-"+c.ns, "spec", "policyName"))
		}
		u.SetName(u.GetName() + "-" + c.ns)
		_, err := c.dyn.Resource(gvr).Create(c.ctx, u, metav1.CreateOptions{})
		require.NoError(t, err, "%s %s", u.GetKind(), u.GetName())
		t.Cleanup(func() { _ = c.dyn.Resource(gvr).Delete(context.Background(), u.GetName(), metav1.DeleteOptions{}) })
	}

	probe := s.dynamic(t, s.token(t, nil))
	var last error
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		_, last = probe.Resource(longhorn.NodesResource).Namespace(c.ns).Patch(c.ctx, "n1", types.MergePatchType,
			[]byte(`{"spec":{"allowScheduling":true}}`), metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
		if apierrors.IsForbidden(last) && strings.Contains(last.Error(), "bound to no pod on a node") {
			return s
		}
		require.True(t, time.Now().Before(deadline), "the policy is not enforced within 30s; last answer to the probe: %v", last)
	}
}

// manifests decodes a file of deploy/rbac; a non-empty user replaces the
// worker's user name, which must occur in it once per policy.
func manifests(t *testing.T, file, namespace string) []*unstructured.Unstructured {
	t.Helper()
	root, err := testenv.RepoRoot()
	require.NoError(t, err)
	raw, err := os.ReadFile(filepath.Join(root, "deploy", "rbac", file))
	require.NoError(t, err)
	if namespace != "" {
		require.Equal(t, bytes.Count(raw, []byte("\nkind: ValidatingAdmissionPolicy\n")), bytes.Count(raw, []byte(workerUserPattern)),
			"%s matches the worker's user once per policy", file)
		raw = bytes.ReplaceAll(raw, []byte(workerUserPattern), []byte(workerUserIn(namespace)))
	}
	var out []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			return out
		} else {
			require.NoError(t, err, file)
		}
		if u.Object != nil {
			out = append(out, u)
		}
	}
}

// token requests a token of the worker service account bound to obj (nil:
// unbound).
func (s *scoped) token(t *testing.T, obj *authnv1.BoundObjectReference) string {
	t.Helper()
	tr, err := s.kube.CoreV1().ServiceAccounts(s.c.ns).CreateToken(s.c.ctx, "switchback-worker",
		&authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{BoundObjectRef: obj}}, metav1.CreateOptions{})
	require.NoError(t, err, "token bound to %+v", obj)
	return tr.Status.Token
}

// podToken is the token of a worker pod on node (the pod only has to
// exist: no kubelet runs it).
func (s *scoped) podToken(t *testing.T, node string) string {
	t.Helper()
	_, err := s.kube.CoreV1().Nodes().Get(s.c.ctx, node, metav1.GetOptions{})
	require.NoError(t, err, "the Kubernetes Node %s exists: the token names only a node that does", node)
	pod, err := s.kube.CoreV1().Pods(s.c.ns).Create(s.c.ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "switchback-worker-" + node},
		Spec: corev1.PodSpec{NodeName: node, ServiceAccountName: "switchback-worker",
			Containers: []corev1.Container{{Name: "worker", Image: "switchback-dev/switchback"}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	return s.token(t, &authnv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID})
}

// secretToken is a worker token bound to a Secret: valid, but of no node.
func (s *scoped) secretToken(t *testing.T) string {
	t.Helper()
	sec, err := s.kube.CoreV1().Secrets(s.c.ns).Create(s.c.ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "worker-token-holder"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	return s.token(t, &authnv1.BoundObjectReference{Kind: "Secret", APIVersion: "v1", Name: sec.Name, UID: sec.UID})
}

// tokenConfig is the apiserver's config authenticating with token alone.
func tokenConfig(t *testing.T, token string) *rest.Config {
	t.Helper()
	admin := testenv.Get(t).Config
	return &rest.Config{Host: admin.Host, TLSClientConfig: rest.TLSClientConfig{CAData: admin.CAData},
		BearerToken: token, QPS: admin.QPS, Burst: admin.Burst, WarningHandler: rest.NoWarnings{}}
}

func (s *scoped) dynamic(t *testing.T, token string) dynamic.Interface {
	t.Helper()
	dyn, err := dynamic.NewForConfig(tokenConfig(t, token))
	require.NoError(t, err)
	return dyn
}

// plane is the adapter as a worker runs it, with token, on the profile the
// test's own adapter has. RBAC bindings take effect asynchronously: a
// refusal is retried until a deadline, and the last error fails the test.
func (s *scoped) plane(t *testing.T, token string, log *slog.Logger) *longhorn.Plane {
	t.Helper()
	platform, err := s.c.plane.Platform(s.c.ctx)
	require.NoError(t, err)
	dyn := s.dynamic(t, token)
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		var p *longhorn.Plane
		p, err = longhorn.New(s.c.ctx, dyn, longhorn.Options{Namespace: s.c.ns, Log: log, SyncTimeout: 30 * time.Second, Platform: platform})
		if err == nil {
			return p
		}
	}
	require.NoError(t, err, "the adapter with a worker's token")
	return nil
}

// worker is one identity of the table: the adapter and a raw client.
type worker struct {
	plane *longhorn.Plane
	dyn   dynamic.Interface
}
