package integration_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/switchback-dev/switchback/api/v1beta2"
	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/sim"
	"github.com/switchback-dev/switchback/webhook"
)

// otherNS is a namespace the controller does not manage: a manager there is
// refused, and one created behind the webhook's back does not count.
const otherNS = "team-b"

// switchableCluster is the webhook's dataplane.Reader: a simulated cluster
// each subtest replaces with the one it needs, while the server and its
// registration stay up.
type switchableCluster struct{ cur atomic.Pointer[sim.Sim] }

func (c *switchableCluster) set(s *sim.Sim) { c.cur.Store(s) }

func (c *switchableCluster) Platform(ctx context.Context) (dataplane.Platform, error) {
	return c.cur.Load().Platform(ctx)
}

func (c *switchableCluster) Workloads(ctx context.Context, node string) (dataplane.Workloads, error) {
	return c.cur.Load().Workloads(ctx, node)
}

func (c *switchableCluster) Snapshots(ctx context.Context, volume string) ([]dataplane.Snapshot, error) {
	return c.cur.Load().Snapshots(ctx, volume)
}

func (c *switchableCluster) Nodes(ctx context.Context) ([]dataplane.Node, error) {
	return c.cur.Load().Nodes(ctx)
}

func (c *switchableCluster) Node(ctx context.Context, name string) (dataplane.Node, error) {
	return c.cur.Load().Node(ctx, name)
}

func (c *switchableCluster) DefaultInstanceManagerImage(ctx context.Context) (string, error) {
	return c.cur.Load().DefaultInstanceManagerImage(ctx)
}

func (c *switchableCluster) InstanceManagers(ctx context.Context, node string) ([]dataplane.InstanceManager, error) {
	return c.cur.Load().InstanceManagers(ctx, node)
}

func (c *switchableCluster) Volumes(ctx context.Context) ([]dataplane.Volume, error) {
	return c.cur.Load().Volumes(ctx)
}

func (c *switchableCluster) Volume(ctx context.Context, name string) (dataplane.Volume, error) {
	return c.cur.Load().Volume(ctx, name)
}

func (c *switchableCluster) VolumesOn(ctx context.Context, node string) ([]dataplane.Volume, error) {
	return c.cur.Load().VolumesOn(ctx, node)
}

func (c *switchableCluster) TargetCounts(ctx context.Context) (map[string]int, error) {
	return c.cur.Load().TargetCounts(ctx)
}

func (c *switchableCluster) LonghornUpgrader(ctx context.Context) (dataplane.LonghornUpgrader, error) {
	return c.cur.Load().LonghornUpgrader(ctx)
}

func (c *switchableCluster) RebuildSettings(ctx context.Context) (dataplane.RebuildSettings, error) {
	return c.cur.Load().RebuildSettings(ctx)
}

func (c *switchableCluster) Disks(ctx context.Context) (map[string][]dataplane.Disk, error) {
	return c.cur.Load().Disks(ctx)
}

// newCluster is a simulated cluster of the given nodes (Ready, v2, IM on
// sim.OldIMImage unless said otherwise; target sim.NewIMImage).
func newCluster(t *testing.T, nodes ...sim.NodeSpec) *sim.Sim {
	t.Helper()
	s := sim.New(sim.Config{Profile: dataplane.ProfileInPlace})
	for _, n := range nodes {
		require.NoError(t, s.AddNodeSpec(n))
	}
	return s
}

func threeNodes(t *testing.T) *sim.Sim {
	return newCluster(t, sim.NodeSpec{Name: "n1"}, sim.NodeSpec{Name: "n2"}, sim.NodeSpec{Name: "n3"})
}

// managerYAML is what a user would kubectl apply.
func managerYAML(ns, name, engine string, nodes ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: longhorn.io/v1beta2\nkind: DataEngineUpgradeManager\nmetadata:\n  name: %s\n  namespace: %s\nspec:\n  dataEngine: %s\n", name, ns, engine)
	if len(nodes) > 0 {
		b.WriteString("  nodes:\n")
		for _, n := range nodes {
			fmt.Fprintf(&b, "  - %s\n", n)
		}
	}
	return b.String()
}

func TestWebhookOnTheAPIServer(t *testing.T) {
	f := startWebhook(t)
	denied := `admission webhook "` + webhook.WebhookName + `" denied the request: `

	t.Run("unknown nodes are refused, naming them", func(t *testing.T) {
		t.Cleanup(func() { f.deleteManagers(t) })
		f.cluster.set(threeNodes(t))
		_, stderr, err := f.apply(managerYAML(installNS, "with-ghosts", "v2", "n1", "ghost-b", "ghost-a"))
		require.Error(t, err)
		t.Logf("what the user sees:\n%s", stderr)
		assert.Contains(t, stderr, denied+`DataEngineUpgradeManager "longhorn-system/with-ghosts" refused: `+
			"spec.nodes: NodesKnown (UnknownNodes): spec.nodes names unknown nodes: ghost-a, ghost-b; the upgrade does not start")
		_, err = f.kc.Managers(installNS).Get(f.ctx, "with-ghosts")
		assert.True(t, apierrors.IsNotFound(err), "refused manager must not exist: %v", err)
	})

	t.Run("a manager outside the managed namespace is refused", func(t *testing.T) {
		t.Cleanup(func() { f.deleteManagers(t) })
		f.cluster.set(threeNodes(t))
		_, stderr, err := f.apply(managerYAML(otherNS, "elsewhere", "v2"))
		require.Error(t, err)
		assert.Contains(t, stderr, denied+`DataEngineUpgradeManager "team-b/elsewhere" refused: metadata.namespace: `+
			`Switchback manages upgrades in namespace "longhorn-system" only (its controller takes in no other): create it there`)
	})

	t.Run("a manager created elsewhere behind the webhook's back does not count", func(t *testing.T) {
		t.Cleanup(func() { f.deleteManagers(t) })
		f.cluster.set(threeNodes(t))
		stray := f.behindTheWebhook(t, otherNS, "stray")
		stray.Status.State = v1beta2.UpgradeStateUpgrading
		_, err := f.kc.Managers(otherNS).UpdateStatus(f.ctx, stray)
		require.NoError(t, err)

		stdout, stderr, err := f.apply(managerYAML(installNS, "managed", "v2"))
		require.NoError(t, err, stderr)
		assert.Contains(t, stdout, "dataengineupgrademanager.longhorn.io/managed created")
	})

	t.Run("a second active upgrade is refused", func(t *testing.T) {
		t.Cleanup(func() { f.deleteManagers(t) })
		f.cluster.set(threeNodes(t))
		first, err := f.kc.Managers(installNS).Create(f.ctx, &v1beta2.DataEngineUpgradeManager{
			ObjectMeta: metav1.ObjectMeta{Name: "first"},
			Spec:       v1beta2.DataEngineUpgradeManagerSpec{DataEngine: v1beta2.DataEngineTypeV2},
		})
		require.NoError(t, err, "the first upgrade is alone: admitted")
		first.Status.State = v1beta2.UpgradeStateUpgrading
		first, err = f.kc.Managers(installNS).UpdateStatus(f.ctx, first)
		require.NoError(t, err)
		f.waitSeen(t, "first", v1beta2.UpgradeStateUpgrading)

		_, stderr, err := f.apply(managerYAML(installNS, "second", "v2"))
		require.Error(t, err)
		assert.Contains(t, stderr, denied+`DataEngineUpgradeManager "longhorn-system/second" refused: `+
			"SingleActiveUpgrade (AnotherUpgradeActive): another upgrade is active: longhorn-system/first")

		// Once the first one is over, the second is admitted.
		first.Status.State = v1beta2.UpgradeStateCompleted
		_, err = f.kc.Managers(installNS).UpdateStatus(f.ctx, first)
		require.NoError(t, err)
		f.waitSeen(t, "first", v1beta2.UpgradeStateCompleted)
		stdout, stderr, err := f.apply(managerYAML(installNS, "second", "v2"))
		require.NoError(t, err, stderr)
		assert.Contains(t, stdout, "dataengineupgrademanager.longhorn.io/second created")
	})

	// Reviews are answered from informer caches: a flood of them (here 200
	// concurrent dry-run creates, each reviewed) costs the controller's
	// client nothing, so its rate limit stays for status writes.
	t.Run("a flood of reviews makes no apiserver request from the controller", func(t *testing.T) {
		f.cluster.set(threeNodes(t))
		cfg := rest.CopyConfig(f.env.Config)
		cfg.QPS, cfg.Burst = 1000, 1000
		dyn, err := dynamic.NewForConfig(cfg)
		require.NoError(t, err)
		managers := dyn.Resource(v1beta2.SchemeGroupVersion.WithResource(v1beta2.DataEngineUpgradeManagerResource)).Namespace(installNS)
		before := f.calls.Load()
		var wg sync.WaitGroup
		var admitted atomic.Int64
		for i := range 200 {
			wg.Go(func() {
				obj := &unstructured.Unstructured{Object: map[string]any{
					"apiVersion": "longhorn.io/v1beta2", "kind": "DataEngineUpgradeManager",
					"metadata": map[string]any{"name": fmt.Sprintf("flood-%d", i), "namespace": installNS},
					"spec":     map[string]any{"dataEngine": "v2"},
				}}
				if _, err := managers.Create(f.ctx, obj, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err == nil {
					admitted.Add(1)
				}
			})
		}
		wg.Wait()
		assert.Equal(t, int64(200), admitted.Load(), "every review answered and admitted")
		assert.Equal(t, before, f.calls.Load(), "requests the controller's client made during the flood")
	})

	t.Run("a single-node cluster is refused", func(t *testing.T) {
		t.Cleanup(func() { f.deleteManagers(t) })
		f.cluster.set(newCluster(t, sim.NodeSpec{Name: "solo"}))
		_, stderr, err := f.apply(managerYAML(installNS, "alone", "v2"))
		require.Error(t, err)
		assert.Contains(t, stderr, denied)
		assert.Contains(t, stderr, "spec.nodes: AtLeastTwoNodes (TooFewNodes): 1 node(s) run the v2 data engine (solo); at least 2 are needed")
	})

	t.Run("version drift is refused", func(t *testing.T) {
		t.Cleanup(func() { f.deleteManagers(t) })
		// n1 already on the target, n3 left behind on an older image by an
		// earlier subset upgrade, n2 requested now on yet another image.
		const older = "longhornio/longhorn-instance-manager:v1.7.0"
		f.cluster.set(newCluster(t,
			sim.NodeSpec{Name: "n1", IMImage: sim.NewIMImage},
			sim.NodeSpec{Name: "n2"},
			sim.NodeSpec{Name: "n3", IMImage: older}))
		_, stderr, err := f.apply(managerYAML(installNS, "drifting", "v2", "n2"))
		require.Error(t, err)
		assert.Contains(t, stderr, denied)
		assert.Contains(t, stderr, "spec.nodes: NoVersionDrift (VersionDrift): nodes to upgrade run n2="+sim.OldIMImage+
			" while the nodes outside this upgrade run "+older+" (n3); finish the earlier upgrade first")
	})

	t.Run("several problems are reported at once", func(t *testing.T) {
		t.Cleanup(func() { f.deleteManagers(t) })
		f.cluster.set(newCluster(t, sim.NodeSpec{Name: "solo"}))
		_, stderr, err := f.apply(managerYAML(installNS, "everything-wrong", "v2", "solo", "ghost"))
		require.Error(t, err)
		t.Logf("what the user sees:\n%s", stderr)
		assert.Contains(t, stderr, `refused, 2 admission checks failed:`)
		assert.Contains(t, stderr, "\n- spec.nodes: NodesKnown (UnknownNodes): spec.nodes names unknown nodes: ghost;")
		assert.Contains(t, stderr, "\n- spec.nodes: AtLeastTwoNodes (TooFewNodes): ")
	})

	t.Run("data engine v1 is refused by the schema before the webhook", func(t *testing.T) {
		t.Cleanup(func() { f.deleteManagers(t) })
		f.cluster.set(threeNodes(t))
		_, stderr, err := f.apply(managerYAML(installNS, "v1-engine", "v1"))
		require.Error(t, err)
		assert.Contains(t, stderr, `spec.dataEngine: Unsupported value: "v1"`)
	})

	t.Run("a valid manager is created", func(t *testing.T) {
		t.Cleanup(func() { f.deleteManagers(t) })
		f.cluster.set(threeNodes(t))
		stdout, stderr, err := f.apply(managerYAML(installNS, "valid", "v2", "n1", "n2"))
		require.NoError(t, err, stderr)
		assert.Contains(t, stdout, "dataengineupgrademanager.longhorn.io/valid created")
		m, err := f.kc.Managers(installNS).Get(f.ctx, "valid")
		require.NoError(t, err)
		assert.Equal(t, []string{"n1", "n2"}, m.Spec.Nodes)

		// Updates are not sent to the webhook: the spec stays immutable by
		// CEL, and a status write does not depend on the webhook.
		m.Status.State = v1beta2.UpgradeStateUpgrading
		_, err = f.kc.Managers(installNS).UpdateStatus(f.ctx, m)
		require.NoError(t, err)
		_, stderr, err = f.apply(managerYAML(installNS, "valid", "v2", "n1", "n3"))
		require.Error(t, err)
		assert.Contains(t, stderr, "spec.nodes is immutable")
		assert.NotContains(t, stderr, webhook.WebhookName)
	})
}
