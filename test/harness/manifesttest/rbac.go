package manifesttest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/switchback-dev/switchback/test/harness/testenv"
)

// ApplyRBAC creates the objects of deploy/rbac's files for namespace ns:
// namespaced objects and subjects move to it, cluster-scoped objects get
// its name as a suffix so that tests do not share them (deleted when the
// test ends).
func ApplyRBAC(t *testing.T, ctx context.Context, dyn dynamic.Interface, ns string, files ...string) {
	t.Helper()
	root, err := testenv.RepoRoot()
	require.NoError(t, err)
	rbac := func(r string) schema.GroupVersionResource {
		return schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: r}
	}
	resources := map[string]schema.GroupVersionResource{
		"Role": rbac("roles"), "RoleBinding": rbac("rolebindings"),
		"ClusterRole": rbac("clusterroles"), "ClusterRoleBinding": rbac("clusterrolebindings"),
	}
	clusterName := func(name string) string { return name + "-" + ns }
	for _, f := range files {
		raw, err := os.ReadFile(filepath.Join(root, "deploy", "rbac", f))
		require.NoError(t, err)
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
		for {
			var u unstructured.Unstructured
			if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
				break
			} else {
				require.NoError(t, err, f)
			}
			if u.Object == nil {
				continue
			}
			gvr, ok := resources[u.GetKind()]
			require.True(t, ok, "%s: unexpected kind %s", f, u.GetKind())
			clusterScoped := u.GetNamespace() == ""
			if clusterScoped {
				u.SetName(clusterName(u.GetName()))
			} else {
				u.SetNamespace(ns)
			}
			if subjects, found, _ := unstructured.NestedSlice(u.Object, "subjects"); found {
				for _, s := range subjects {
					s.(map[string]any)["namespace"] = ns
				}
				require.NoError(t, unstructured.SetNestedSlice(u.Object, subjects, "subjects"))
			}
			if u.GetKind() == "ClusterRoleBinding" {
				name, _, _ := unstructured.NestedString(u.Object, "roleRef", "name")
				require.NoError(t, unstructured.SetNestedField(u.Object, clusterName(name), "roleRef", "name"))
			}
			ri := dyn.Resource(gvr)
			if clusterScoped {
				_, err = ri.Create(ctx, &u, metav1.CreateOptions{})
				t.Cleanup(func() { _ = ri.Delete(context.Background(), u.GetName(), metav1.DeleteOptions{}) })
			} else {
				_, err = ri.Namespace(ns).Create(ctx, &u, metav1.CreateOptions{})
			}
			require.NoError(t, err, "%s: %s %s", f, u.GetKind(), u.GetName())
		}
	}
}

// ConfigAs is the test apiserver's admin configuration impersonating the
// ServiceAccount sa of namespace ns.
func ConfigAs(t *testing.T, ns, sa string) *rest.Config {
	t.Helper()
	cfg := rest.CopyConfig(testenv.Get(t).Config)
	cfg.WarningHandler = rest.NoWarnings{}
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":" + sa}
	return cfg
}
