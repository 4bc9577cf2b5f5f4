package longhorn_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/longhorn"
	"github.com/switchback-dev/switchback/sim"
)

// variedCluster holds every state the mapping must carry: a NotReady node
// (its replicas in error), a node without the v2 engine, a degraded and a
// rebuilding volume, a replica failed on purpose, an IM being replaced, a
// target left switched over, detached and v1 volumes.
func variedCluster(t *testing.T) *sim.Sim {
	t.Helper()
	s := sim.New(sim.Config{RebuildLatency: time.Hour, IMStartLatency: time.Hour, ReplicaReplenishWait: -1})
	for _, n := range []string{"n1", "n2", "n3", "n4"} {
		require.NoError(t, s.AddNode(n))
	}
	require.NoError(t, s.AddNodeSpec(sim.NodeSpec{Name: "n5", NoV2: true}))
	require.NoError(t, s.AddVolume("healthy", sim.EngineV2, []string{"n1", "n2", "n3"}, "n1"))
	require.NoError(t, s.AddVolumeSpec(sim.VolumeSpec{Name: "degraded", ReplicasOn: []string{"n1", "n2"}, NumberOfReplicas: 3, AttachedTo: "n2"}))
	require.NoError(t, s.AddVolume("failed-one", sim.EngineV2, []string{"n1", "n2", "n3"}, "n3"))
	require.NoError(t, s.AddVolumeSpec(sim.VolumeSpec{Name: "away", ReplicasOn: []string{"n2", "n3"}, AttachedTo: "n2", TargetOn: "n3"}))
	require.NoError(t, s.AddVolume("detached", sim.EngineV2, []string{"n2", "n3"}, ""))
	require.NoError(t, s.AddVolume("legacy", sim.EngineV1, []string{"n1", "n5"}, "n1"))
	require.NoError(t, s.AddVolume("on-n4", sim.EngineV2, []string{"n3", "n4"}, "n3"))
	ctx := context.Background()
	// Failed on a flagged node, a replica stays stopped (Longhorn would not
	// restart it in the IM about to be replaced).
	require.NoError(t, s.SetNodeUpgradeRequested(ctx, "n2", true))
	require.NoError(t, s.FailReplica(ctx, "failed-one", "failed-one-r-2"))
	require.NoError(t, s.InjectNodeNotReady("n4"))
	ims, err := s.InstanceManagers(ctx, "n1")
	require.NoError(t, err)
	require.NoError(t, s.DeleteInstanceManager(ctx, ims[0].Name)) // n1: old stopped, new starting
	return s
}

// TestAdapterReadsWhatTheSimulatorHolds: every read of the adapter, over
// the objects the simulated manager writes, equals the simulator's own.
func TestAdapterReadsWhatTheSimulatorHolds(t *testing.T) {
	s := variedCluster(t)
	c := newCluster(t, s) // waits for the views to be equal

	vols, err := c.plane.Volumes(c.ctx)
	require.NoError(t, err)
	states := map[string]dataplane.ReplicaState{}
	for _, v := range vols {
		for _, r := range v.Replicas {
			states[v.Name+"/"+r.Node] = r.State
		}
	}
	// The states the cluster was built to show, read through Longhorn's words.
	assert.Equal(t, dataplane.ReplicaStopped, states["failed-one/n2"])
	assert.Equal(t, dataplane.ReplicaError, states["on-n4/n4"], "NotReady node")
	assert.Equal(t, dataplane.ReplicaError, states["healthy/n1"], "IM deleted")
	assert.Equal(t, dataplane.ReplicaRunning, states["detached/n2"], "healthy copy at rest")
	n5, err := c.plane.Node(c.ctx, "n5")
	require.NoError(t, err)
	assert.False(t, n5.V2, "no v2 IM, no v2 engine")
	n4, err := c.plane.Node(c.ctx, "n4")
	require.NoError(t, err)
	assert.False(t, n4.Ready)

	n2, err := c.plane.Node(c.ctx, "n2")
	require.NoError(t, err)
	assert.True(t, n2.UpgradeRequested)
	for _, node := range []string{"n1", "n2", "n3", "n4", "n5"} {
		want, err := s.VolumesOn(c.ctx, node)
		require.NoError(t, err)
		got, err := c.plane.VolumesOn(c.ctx, node)
		require.NoError(t, err)
		assert.Equal(t, volumeNames(want), volumeNames(got), "VolumesOn(%s): attached, target or replica there", node)
	}
	wantCounts, err := s.TargetCounts(c.ctx)
	require.NoError(t, err)
	require.NotEmpty(t, wantCounts)
	gotCounts, err := c.plane.TargetCounts(c.ctx)
	require.NoError(t, err)
	assert.Equal(t, wantCounts, gotCounts, "targets per node, from the host index")
	assert.Equal(t, dataplane.CountTargets(vols), gotCounts, "the index follows the rule of dataplane.Volume.TargetHost")

	// Then the simulator moves on (the IM on n1 starts, rebuilds finish):
	// the adapter follows.
	require.NoError(t, s.HealNodeNotReady("n4"))
	c.mgr.Kick()
	c.waitInStep("after healing n4")
}

func volumeNames(vols []dataplane.Volume) []string {
	var out []string
	for _, v := range vols {
		out = append(out, v.Name)
	}
	return out
}

func TestActionsMapErrorsAndAreIdempotent(t *testing.T) {
	s := variedCluster(t)
	c := newCluster(t, s)
	ctx := c.ctx

	_, err := c.plane.Node(ctx, "ghost")
	assert.ErrorIs(t, err, dataplane.ErrNotFound)
	_, err = c.plane.Volume(ctx, "ghost")
	assert.ErrorIs(t, err, dataplane.ErrNotFound)
	_, err = c.plane.InstanceManagers(ctx, "ghost")
	assert.ErrorIs(t, err, dataplane.ErrNotFound)
	err = c.plane.SetTargetNode(ctx, "ghost", "n2")
	assert.ErrorIs(t, err, dataplane.ErrNotFound)
	assert.ErrorContains(t, err, `"ghost"`, "errors name the object")
	assert.ErrorIs(t, c.plane.SetTargetNode(ctx, "healthy", "nowhere"), dataplane.ErrNotFound)
	assert.ErrorIs(t, c.plane.FailReplica(ctx, "healthy", "ghost"), dataplane.ErrNotFound)
	assert.NoError(t, c.plane.DeleteReplica(ctx, "healthy", "ghost"), "deleting what is gone succeeds")
	assert.NoError(t, c.plane.DeleteInstanceManager(ctx, "ghost"))
	assert.ErrorIs(t, c.plane.SetNodeUpgradeRequested(ctx, "ghost", true), dataplane.ErrNotFound)

	// v1 objects are refused, whatever the caller asks.
	assert.ErrorIs(t, c.plane.SetTargetNode(ctx, "legacy", "n2"), dataplane.ErrRefused)
	assert.ErrorIs(t, c.plane.SetVolumeImage(ctx, "legacy", sim.NewIMImage), dataplane.ErrRefused)
	assert.ErrorIs(t, c.plane.FailReplica(ctx, "legacy", "legacy-r-1"), dataplane.ErrRefused)
	assert.ErrorIs(t, c.plane.DeleteReplica(ctx, "legacy", "legacy-r-1"), dataplane.ErrRefused)
	assert.ErrorIs(t, c.plane.CreateSnapshot(ctx, "legacy", "snap"), dataplane.ErrRefused)
	// An attached volume's image follows its IM.
	err = c.plane.SetVolumeImage(ctx, "healthy", sim.NewIMImage)
	assert.ErrorIs(t, err, dataplane.ErrRefused)
	assert.ErrorContains(t, err, "attached")
	// A replica of another volume.
	assert.ErrorIs(t, c.plane.FailReplica(ctx, "degraded", "healthy-r-2"), dataplane.ErrRefused)

	// Repeating an action writes nothing the second time.
	generation := func() int64 { return c.object(longhorn.VolumesResource, "on-n4").GetGeneration() }
	require.NoError(t, c.plane.SetTargetNode(ctx, "on-n4", "n2"))
	gen := generation()
	require.NoError(t, c.plane.SetTargetNode(ctx, "on-n4", "n2"))
	assert.Equal(t, gen, generation())
	v, err := c.plane.Volume(ctx, "on-n4")
	require.NoError(t, err)
	assert.Equal(t, "n2", v.DesiredTargetNode, "the cache shows the action's own write at once")

	require.NoError(t, c.plane.CreateSnapshot(ctx, "healthy", "pre-upgrade"))
	require.NoError(t, c.plane.CreateSnapshot(ctx, "healthy", "pre-upgrade"))
	require.NoError(t, c.plane.CreateSnapshot(ctx, "away", "pre-upgrade"), "same snapshot name, another volume")
	assert.Len(t, c.list(longhorn.SnapshotsResource), 2)
	eventually(t, 5*time.Second, "snapshot taken", func() bool {
		snaps, _ := s.Snapshots("healthy")
		return len(snaps) == 1 && snaps[0] == "pre-upgrade"
	})

	// n2 is flagged (variedCluster): a replica failed there stays stopped.
	require.NoError(t, c.plane.FailReplica(ctx, "healthy", "healthy-r-2"))
	r := decode[longhorn.Replica](c, longhorn.ReplicasResource, "healthy-r-2")
	assert.Equal(t, longhorn.StateStopped, r.Spec.DesireState)
	require.NotEmpty(t, r.Spec.FailedAt)
	first := r.Spec.FailedAt
	v, err = c.plane.Volume(ctx, "healthy")
	require.NoError(t, err)
	assert.Equal(t, dataplane.ReplicaStopped, v.Replicas[1].State, "the cache shows the failure at once")
	require.NoError(t, c.plane.FailReplica(ctx, "healthy", "healthy-r-2"))
	assert.Equal(t, first, decode[longhorn.Replica](c, longhorn.ReplicasResource, "healthy-r-2").Spec.FailedAt, "the first stamp is kept")
	eventually(t, 5*time.Second, "replica out of its engine, stopped in the simulator", func() bool {
		e := decode[longhorn.Engine](c, longhorn.EnginesResource, "healthy-e-0")
		_, in := e.Spec.ReplicaAddressMap["healthy-r-2"]
		sv, _ := s.Volume(ctx, "healthy")
		return !in && sv.Replicas[1].State == dataplane.ReplicaStopped
	})
	require.NoError(t, c.plane.DeleteReplica(ctx, "healthy", "healthy-r-2"))
	require.NoError(t, c.plane.DeleteReplica(ctx, "healthy", "healthy-r-2"))
	v, err = c.plane.Volume(ctx, "healthy")
	require.NoError(t, err)
	for _, rep := range v.Replicas {
		assert.NotEqual(t, "healthy-r-2", rep.Name, "the cache shows the deletion at once")
	}

	require.NoError(t, c.plane.SetNodeUpgradeRequested(ctx, "n3", true))
	n, err := c.plane.Node(ctx, "n3")
	require.NoError(t, err)
	assert.True(t, n.UpgradeRequested)
	eventually(t, 5*time.Second, "flag mirrored", func() bool {
		sn, _ := s.Node(ctx, "n3")
		return sn.UpgradeRequested
	})
	c.waitInStep("after the actions")
	_, err = c.dyn.Resource(longhorn.SnapshotsResource).Namespace(c.ns).Get(ctx, longhorn.SnapshotObjectName("away", "pre-upgrade"), metav1.GetOptions{})
	assert.NoError(t, err)
}
