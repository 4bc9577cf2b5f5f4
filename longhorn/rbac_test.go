package longhorn_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/longhorn"
	"github.com/switchback-dev/switchback/plan"
	"github.com/switchback-dev/switchback/test/harness/enginetest"
	"github.com/switchback-dev/switchback/test/harness/manifesttest"
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
	manifesttest.ApplyRBAC(t, c.ctx, c.dyn, c.ns, "controller.yaml", "worker.yaml")

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
func (c *cluster) configAs(sa string) *rest.Config { return manifesttest.ConfigAs(c.t, c.ns, sa) }

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
