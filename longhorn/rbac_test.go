package longhorn_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/internal/enginetest"
	"github.com/switchback-dev/switchback/longhorn"
	"github.com/switchback-dev/switchback/plan"
	"github.com/switchback-dev/switchback/testenv"
)

// TestDeployedRBACSuffices runs the adapter as the service accounts of
// deploy/rbac, bound in the test's namespace: both identities detect
// Longhorn and sync every cache; a whole upgrade runs as the worker (every
// write of the node steps); the controller reads the snapshot the
// prechecks run on, Longhorn's own upgrader included, and writes the
// records of targets away; its other writes are refused.
func TestDeployedRBACSuffices(t *testing.T) {
	s, storage := storageLayout(t, latencies)
	c := newCluster(t, s)
	was := recordBefore(t, c)
	applyRBAC(t, c, "controller.yaml", "worker.yaml")

	worker := c.planeAs(t, "switchback-worker")
	controller := c.planeAs(t, "switchback-controller")

	e := enginetest.Start(t, worker, enginetest.Options{})
	m := ref("rbac")
	e.RequestSpec(m, storageSpec(storage))
	completed(t, e, m)
	was.restored(t, c)

	err := controller.SetReplicaScheduling(c.ctx, "n1", false)
	require.Error(t, err, "the controller never changes Longhorn")
	assert.True(t, apierrors.IsForbidden(err), "%v", err)
	assert.Contains(t, err.Error(), `nodes.longhorn.io "n1": set spec.allowScheduling=false`, "the error names the object and the action")

	// The one write of the controller: the record of a target away.
	vols, err := controller.Volumes(c.ctx)
	require.NoError(t, err)
	require.NotEmpty(t, vols)
	away := &dataplane.TargetAway{Node: "n1", EngineNodeBefore: "n1", Temporary: "n2"}
	require.NoError(t, controller.RecordTargetAway(c.ctx, vols[0].Name, away), "the controller records a target away")
	v, err := controller.Volume(c.ctx, vols[0].Name)
	require.NoError(t, err)
	assert.Equal(t, away, v.Away, "and reads it back")
	require.NoError(t, controller.RecordTargetAway(c.ctx, vols[0].Name, nil), "and removes it")

	// The prechecks' snapshot, as the controller (and its webhook) reads it.
	_, err = controller.LonghornUpgrader(c.ctx)
	require.NoError(t, err, "the controller reads Longhorn's own upgrader")
	_, err = plan.Read(c.ctx, controller)
	require.NoError(t, err, "the controller reads the whole snapshot of the prechecks")

	// On the in-place profile the controller also lists the upgrader's
	// objects, live. This apiserver does not serve their CRDs, but
	// authorization comes before the resource is looked up: the controller's
	// list is let through (and answered NotFound: no object), the worker's
	// is Forbidden, and the error names the resource and the namespace.
	inPlaceAs := func(sa string) *longhorn.Plane {
		dyn, err := dynamic.NewForConfig(c.configAs(sa))
		require.NoError(t, err)
		p, err := longhorn.New(c.ctx, dyn, longhorn.Options{Namespace: c.ns, Log: testLog(), SyncTimeout: 30 * time.Second,
			Platform: dataplane.Platform{Profile: dataplane.ProfileInPlace}})
		require.NoError(t, err, "the adapter as %s", sa)
		return p
	}
	_, err = inPlaceAs("switchback-controller").LonghornUpgrader(c.ctx)
	require.NoError(t, err, "the controller lists Longhorn's own upgrader's objects")
	_, err = inPlaceAs("switchback-worker").LonghornUpgrader(c.ctx)
	require.Error(t, err, "the worker never reads them")
	assert.True(t, apierrors.IsForbidden(err), "wrapped: %v", err)
	assert.ErrorContains(t, err, "longhorn: list instancemanagerupgradecontrols.longhorn.io in "+c.ns)
}

// configAs is the apiserver's config impersonating the service account sa
// of the test's namespace.
func (c *cluster) configAs(sa string) *rest.Config {
	cfg := rest.CopyConfig(testenv.Get(c.t).Config)
	cfg.WarningHandler = rest.NoWarnings{}
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + c.ns + ":" + sa}
	return cfg
}

// planeAs builds the adapter as production does (detection, then caches),
// impersonating the service account sa of the test's namespace. RBAC
// bindings take effect asynchronously, so a refusal is retried until a
// deadline; the last error fails the test.
func (c *cluster) planeAs(t *testing.T, sa string) *longhorn.Plane {
	t.Helper()
	cfg := c.configAs(sa)
	var err error
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		var p *longhorn.Plane
		p, err = longhorn.NewForConfig(c.ctx, cfg, longhorn.Options{Namespace: c.ns, Log: testLog(), SyncTimeout: 30 * time.Second})
		if err == nil {
			return p
		}
	}
	require.NoError(t, err, "the adapter as %s", sa)
	return nil
}

// applyRBAC creates the objects of deploy/rbac's files for the test's
// namespace: namespaced objects and subjects move to it, cluster-scoped
// objects get its name as a suffix so that tests do not share them.
func applyRBAC(t *testing.T, c *cluster, files ...string) {
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
	clusterName := func(name string) string { return name + "-" + c.ns }
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
				u.SetNamespace(c.ns)
			}
			if subjects, found, _ := unstructured.NestedSlice(u.Object, "subjects"); found {
				for _, s := range subjects {
					s.(map[string]any)["namespace"] = c.ns
				}
				require.NoError(t, unstructured.SetNestedSlice(u.Object, subjects, "subjects"))
			}
			if u.GetKind() == "ClusterRoleBinding" {
				name, _, _ := unstructured.NestedString(u.Object, "roleRef", "name")
				require.NoError(t, unstructured.SetNestedField(u.Object, clusterName(name), "roleRef", "name"))
			}
			ri := c.dyn.Resource(gvr)
			if clusterScoped {
				_, err = ri.Create(c.ctx, &u, metav1.CreateOptions{})
				t.Cleanup(func() { _ = ri.Delete(c.ctx, u.GetName(), metav1.DeleteOptions{}) })
			} else {
				_, err = ri.Namespace(c.ns).Create(c.ctx, &u, metav1.CreateOptions{})
			}
			require.NoError(t, err, "%s: %s %s", f, u.GetKind(), u.GetName())
		}
	}
}
