package longhorn_test

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/longhorn"
	"github.com/switchback-dev/switchback/sim"
	"github.com/switchback-dev/switchback/test/harness/testenv"
	"github.com/switchback-dev/switchback/test/harness/webhooktest"
)

// The rules of sim/RULES.md that the simulated manager plays on Longhorn's
// objects, and the adapter's side of those the simulator plays: each with
// the rule on and off.

// TestIMDeletionIsForeground: the adapter deletes an idle old IM in the
// foreground, as Longhorn does; its object stays, deleting and listed so,
// until its pod is gone (the manager plays the garbage collector), and the
// node's next IM starts only then. Deleted in the background (kubectl's
// default, and the adapter's before), the object goes at once and the next
// IM's pod starts beside the lingering one (RuleIMPodLingers).
func TestIMDeletionIsForeground(t *testing.T) {
	for _, tc := range []struct {
		name       string
		foreground bool
		off        []sim.Rule
		overlap    bool
	}{
		{name: "the adapter's delete", foreground: true},
		{name: "a background delete", overlap: true},
		{name: "a background delete, no lingering pod", off: []sim.Rule{sim.RuleIMPodLingers}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Longhorn's node controller waits an hour: the delete is the
			// test's.
			s := sim.New(sim.Config{PodTerminationLatency: 2 * time.Second, NodeReconcileLatency: time.Hour, Disable: tc.off})
			for _, n := range []string{"n1", "n2"} {
				require.NoError(t, s.AddNode(n))
			}
			c := newCluster(t, s)
			ims, err := c.plane.InstanceManagers(c.ctx, "n1")
			require.NoError(t, err)
			require.Len(t, ims, 2, "the old IM, idle, and the default-image one waiting")
			old := ims[0]
			require.Equal(t, sim.OldIMImage, old.Image)
			if tc.foreground {
				require.NoError(t, c.plane.DeleteInstanceManager(c.ctx, old.Name))
				obj := c.object(longhorn.InstanceManagersResource, old.Name)
				assert.NotNil(t, obj.GetDeletionTimestamp())
				assert.Contains(t, obj.GetFinalizers(), longhorn.ForegroundDeletionFinalizer)
				eventually(t, 5*time.Second, "listed deleting", func() bool {
					ims, err := c.plane.InstanceManagers(c.ctx, "n1")
					return err == nil && slices.ContainsFunc(ims, func(im dataplane.InstanceManager) bool { return im.Name == old.Name && im.Deleting })
				})
			} else {
				require.NoError(t, c.dyn.Resource(longhorn.InstanceManagersResource).Namespace(c.ns).Delete(c.ctx, old.Name, metav1.DeleteOptions{}))
			}
			// A new IM refused beside the lingering pod is retried once the
			// pod is gone: on a loaded machine the simulated manager's rounds
			// that play it run late.
			eventually(t, time.Minute, "the old IM gone, the next one running", func() bool {
				ims, err := c.plane.InstanceManagers(c.ctx, "n1")
				return err == nil && len(ims) == 1 && ims[0].Image == sim.NewIMImage && ims[0].State == dataplane.IMRunning
			})
			overlap := slices.ContainsFunc(s.Unsafe(""), func(u sim.Unsafe) bool { return u.Kind == sim.UnsafeIMOverlap })
			assert.Equal(t, tc.overlap, overlap, "an IM pod started beside the lingering one: %v", s.Unsafe(""))
		})
	}
}

// TestSnapshotsSurviveSwitchovers: a switch-over's new engine, its snapshot
// list still empty, deletes the volume's Snapshot objects, and Longhorn
// then deletes the snapshots (RuleSnapshotCRSync); refused at admission
// while the target moves (as the guard refuses it, webhook/guard.go), the
// snapshot is kept.
func TestSnapshotsSurviveSwitchovers(t *testing.T) {
	for _, tc := range []struct {
		name  string
		off   []sim.Rule
		guard bool
		lost  bool
	}{
		{name: "nothing refuses the deletion", lost: true},
		{name: "the shipped guard refuses the deletion while the target moves", guard: true},
		{name: "no snapshot sync of the new engine", off: []sim.Rule{sim.RuleSnapshotCRSync}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := sim.New(sim.Config{TargetMoveLatency: 2 * time.Second, Disable: tc.off})
			for _, n := range []string{"c1", "n1", "n2"} {
				require.NoError(t, s.AddNode(n))
			}
			require.NoError(t, s.AddVolumeSpec(sim.VolumeSpec{Name: "vol-0", ReplicasOn: []string{"n1", "n2"}, AttachedTo: "c1", EngineOn: "n1"}))
			c := newCluster(t, s)
			snaps := c.dyn.Resource(longhorn.SnapshotsResource).Namespace(c.ns)
			_, err := snaps.Create(c.ctx, &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": longhorn.GroupVersion.String(), "kind": longhorn.KindSnapshot, "metadata": map[string]any{"name": "user-snap"},
				"spec": map[string]any{"volume": "vol-0", "createSnapshot": true},
			}}, metav1.CreateOptions{})
			require.NoError(t, err)
			eventually(t, 5*time.Second, "the user's snapshot taken", func() bool {
				names, _ := s.SnapshotNames("vol-0")
				return slices.Contains(names, "user-snap") && slices.Contains(c.object(longhorn.SnapshotsResource, "user-snap").GetFinalizers(), "longhorn.io")
			})
			if tc.guard {
				webhooktest.ServeGuard(t, testenv.Get(t).Config, c.ns, c.plane)
			}
			require.NoError(t, c.plane.SetEngineNode(c.ctx, "vol-0", "n2"))
			eventually(t, 20*time.Second, "the target on n2", func() bool {
				v, err := c.plane.Volume(c.ctx, "vol-0")
				return err == nil && v.TargetNode == "n2" && v.TargetReady
			})
			c.mgr.Kick()
			c.waitInStep("after the switch-over")
			names, err := s.SnapshotNames("vol-0")
			require.NoError(t, err)
			assert.Equal(t, !tc.lost, slices.Contains(names, "user-snap"), "the snapshot in the volume's replicas: %v", names)
			_, err = snaps.Get(c.ctx, "user-snap", metav1.GetOptions{})
			assert.Equal(t, !tc.lost, err == nil, "its Snapshot object")
		})
	}
}

// TestV1120TargetIP: Longhorn v1.12.0 points the initiator at its engine's
// pod IP, v1.12.1 at its storage IP (RuleV1120TargetIP); with a storage
// network the two differ, and the adapter sees the switch-over done on
// either.
func TestV1120TargetIP(t *testing.T) {
	for _, tc := range []struct {
		version string
		off     []sim.Rule
		podIP   bool
	}{
		{version: "v1.12.0", podIP: true},
		{version: "v1.12.1"},
		{version: "v1.12.0", off: []sim.Rule{sim.RuleV1120TargetIP}},
	} {
		t.Run(tc.version, func(t *testing.T) {
			s := sim.New(sim.Config{LonghornVersion: tc.version, StorageNetwork: true, TargetMoveLatency: time.Second, Disable: tc.off})
			for _, n := range []string{"c1", "n1", "n2"} {
				require.NoError(t, s.AddNode(n))
			}
			require.NoError(t, s.AddVolumeSpec(sim.VolumeSpec{Name: "vol-0", ReplicasOn: []string{"n1", "n2"}, AttachedTo: "c1", EngineOn: "n1"}))
			c := newCluster(t, s)
			engine := decode[longhorn.Engine](c, longhorn.EnginesResource, "vol-0-e-n1")
			ef := decode[longhorn.EngineFrontend](c, longhorn.EngineFrontendsResource, "vol-0-ef-0")
			require.NotEqual(t, engine.Status.IP, engine.Status.StorageIP, "a storage network")
			want := engine.Status.StorageIP
			if tc.podIP {
				want = engine.Status.IP
			}
			assert.Equal(t, want, ef.Status.TargetIP)
			require.NoError(t, c.plane.SetEngineNode(c.ctx, "vol-0", "n2"))
			eventually(t, 20*time.Second, "the switch-over seen done", func() bool {
				v, err := c.plane.Volume(c.ctx, "vol-0")
				return err == nil && v.TargetNode == "n2" && v.TargetReady
			})
		})
	}
}
