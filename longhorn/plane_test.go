package longhorn_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/longhorn"
	"github.com/switchback-dev/switchback/sim"
)

// variedCluster holds every state the mapping must carry: a NotReady node
// (its replicas in error), a node without the v2 engine, a degraded and a
// rebuilding volume, a replica failed on a node that does not schedule, an
// IM being replaced (its volumes' engine and initiator lost with it), a
// target left on another node than its initiator, a switch-over under way
// (two engines), a volume without a frontend, detached and v1 volumes.
func variedCluster(t *testing.T) *sim.Sim {
	t.Helper()
	s := sim.New(sim.Config{RebuildLatency: time.Hour, IMStartLatency: time.Hour, TargetMoveLatency: 2 * time.Hour,
		ReplicaReplenishWait: -1, LonghornVersion: "v1.12.1"})
	for _, n := range []string{"n1", "n2", "n3", "n4"} {
		require.NoError(t, s.AddNode(n))
	}
	require.NoError(t, s.AddNodeSpec(sim.NodeSpec{Name: "n5", NoV2: true}))
	require.NoError(t, s.AddVolume("healthy", sim.EngineV2, []string{"n1", "n2", "n3"}, "n1"))
	require.NoError(t, s.AddVolumeSpec(sim.VolumeSpec{Name: "degraded", ReplicasOn: []string{"n1", "n2"}, NumberOfReplicas: 3, AttachedTo: "n2"}))
	require.NoError(t, s.AddVolume("failed-one", sim.EngineV2, []string{"n1", "n2", "n3"}, "n3"))
	require.NoError(t, s.AddVolumeSpec(sim.VolumeSpec{Name: "away", ReplicasOn: []string{"n2", "n3"}, AttachedTo: "n2", EngineOn: "n3"}))
	require.NoError(t, s.AddVolumeSpec(sim.VolumeSpec{Name: "switching", ReplicasOn: []string{"n2", "n3"}, AttachedTo: "n3"}))
	require.NoError(t, s.AddVolumeSpec(sim.VolumeSpec{Name: "no-frontend", ReplicasOn: []string{"n2", "n3"}, AttachedTo: "n3", Frontend: sim.NoFrontend}))
	require.NoError(t, s.AddVolume("detached", sim.EngineV2, []string{"n2", "n3"}, ""))
	require.NoError(t, s.AddVolume("legacy", sim.EngineV1, []string{"n1", "n5"}, "n1"))
	require.NoError(t, s.AddVolume("on-n4", sim.EngineV2, []string{"n3", "n4"}, "n3"))
	ctx := context.Background()
	// Failed on a node that does not schedule, a replica stays stopped.
	require.NoError(t, s.SetReplicaScheduling(ctx, "n2", false))
	require.NoError(t, s.FailReplica(ctx, "failed-one", "failed-one-r-2"))
	require.NoError(t, s.SetEngineNode(ctx, "switching", "n2"))
	require.NoError(t, s.InjectNodeNotReady("n4"))
	ims, err := s.InstanceManagers(ctx, "n1")
	require.NoError(t, err)
	require.NoError(t, s.CutInstanceManager(ims[0].Name)) // n1: the new IM starting
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
	byName := map[string]dataplane.Volume{}
	for _, v := range vols {
		byName[v.Name] = v
		for _, r := range v.Replicas {
			states[v.Name+"/"+r.Node] = r.State
		}
	}
	// The states the cluster was built to show, read through Longhorn's words.
	assert.Equal(t, dataplane.ReplicaStopped, states["failed-one/n2"])
	assert.Equal(t, dataplane.ReplicaError, states["on-n4/n4"], "NotReady node")
	assert.Equal(t, dataplane.ReplicaError, states["healthy/n1"], "IM deleted")
	assert.Equal(t, dataplane.ReplicaRunning, states["detached/n2"], "healthy copy at rest")
	assert.Equal(t, "n3", byName["away"].TargetNode)
	assert.True(t, byName["away"].TargetReady)
	assert.Equal(t, dataplane.SwitchoverPreparing, byName["switching"].Switchover)
	assert.Equal(t, "n2", byName["switching"].EngineNode)
	assert.False(t, byName["switching"].TargetReady, "a second engine is being prepared")
	assert.False(t, byName["healthy"].TargetReady, "its engine died with n1's IM")
	assert.Empty(t, byName["no-frontend"].Frontend)
	assert.Len(t, c.list(longhorn.EnginesResource), len(vols)+1, "one engine per volume, two for the switch-over")
	n5, err := c.plane.Node(c.ctx, "n5")
	require.NoError(t, err)
	assert.False(t, n5.V2, "no v2 IM, no v2 engine")
	n4, err := c.plane.Node(c.ctx, "n4")
	require.NoError(t, err)
	assert.False(t, n4.Ready)
	n2, err := c.plane.Node(c.ctx, "n2")
	require.NoError(t, err)
	assert.False(t, n2.AllowScheduling)
	ims, err := c.plane.InstanceManagers(c.ctx, "n3")
	require.NoError(t, err)
	require.NotEmpty(t, ims)
	assert.True(t, ims[0].Busy(), "n3's IM runs engines, initiators and replicas: %+v", ims[0])
	p, err := c.plane.Platform(c.ctx)
	require.NoError(t, err)
	assert.Equal(t, dataplane.ProfileV112, p.Profile)
	assert.Equal(t, "v1.12.1", p.LonghornVersion, "the current-longhorn-version setting")

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

	// Then the simulator moves on: the adapter follows.
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
	err = c.plane.SetEngineNode(ctx, "ghost", "n2")
	assert.ErrorIs(t, err, dataplane.ErrNotFound)
	assert.ErrorContains(t, err, `"ghost"`, "errors name the object")
	assert.ErrorIs(t, c.plane.SetEngineNode(ctx, "healthy", "nowhere"), dataplane.ErrNotFound)
	assert.ErrorIs(t, c.plane.FailReplica(ctx, "healthy", "ghost"), dataplane.ErrNotFound)
	assert.NoError(t, c.plane.DeleteInstanceManager(ctx, "ghost"), "deleting what is gone succeeds")
	assert.NoError(t, c.plane.DeleteSnapshot(ctx, "healthy", "ghost"))
	assert.ErrorIs(t, c.plane.SetReplicaScheduling(ctx, "ghost", false), dataplane.ErrNotFound)

	// v1 objects are refused, whatever the caller asks.
	assert.ErrorIs(t, c.plane.SetEngineNode(ctx, "legacy", "n2"), dataplane.ErrRefused)
	assert.ErrorIs(t, c.plane.FailReplica(ctx, "legacy", "legacy-r-1"), dataplane.ErrRefused)
	assert.ErrorIs(t, c.plane.CreateSnapshot(ctx, "legacy", "snap"), dataplane.ErrRefused)
	// A replica of another volume.
	assert.ErrorIs(t, c.plane.FailReplica(ctx, "degraded", "healthy-r-2"), dataplane.ErrRefused)
	// An IM that runs instances is never deleted; this Longhorn replaces IMs
	// itself, so their image is not the adapter's to set.
	ims, err := c.plane.InstanceManagers(ctx, "n3")
	require.NoError(t, err)
	err = c.plane.DeleteInstanceManager(ctx, ims[0].Name)
	assert.ErrorIs(t, err, dataplane.ErrRefused)
	assert.ErrorContains(t, err, "engine frontend(s)")
	assert.ErrorIs(t, c.plane.SetInstanceManagerImage(ctx, ims[0].Name, sim.NewIMImage), dataplane.ErrRefused)

	// Repeating an action writes nothing the second time.
	generation := func() int64 { return c.object(longhorn.VolumesResource, "on-n4").GetGeneration() }
	require.NoError(t, c.plane.SetEngineNode(ctx, "on-n4", "n2"))
	gen := generation()
	require.NoError(t, c.plane.SetEngineNode(ctx, "on-n4", "n2"))
	assert.Equal(t, gen, generation())
	v, err := c.plane.Volume(ctx, "on-n4")
	require.NoError(t, err)
	assert.Equal(t, "n2", v.EngineNode, "the cache shows the action's own write at once")
	eventually(t, 5*time.Second, "Longhorn starts the switch-over", func() bool {
		v, _ := c.plane.Volume(ctx, "on-n4")
		return v.Switchover == dataplane.SwitchoverPreparing
	})

	require.NoError(t, c.plane.CreateSnapshot(ctx, "healthy", "pre-upgrade"))
	require.NoError(t, c.plane.CreateSnapshot(ctx, "healthy", "pre-upgrade"))
	require.NoError(t, c.plane.CreateSnapshot(ctx, "away", "pre-upgrade"), "same snapshot name, another volume")
	assert.Len(t, c.list(longhorn.SnapshotsResource), 2)
	eventually(t, 5*time.Second, "snapshot taken", func() bool {
		snaps, _ := s.SnapshotNames("healthy")
		return len(snaps) == 1 && snaps[0] == "pre-upgrade"
	})
	require.NoError(t, c.plane.DeleteSnapshot(ctx, "healthy", "pre-upgrade"))
	require.NoError(t, c.plane.DeleteSnapshot(ctx, "healthy", "pre-upgrade"))
	eventually(t, 5*time.Second, "snapshot removed", func() bool {
		snaps, _ := s.SnapshotNames("healthy")
		return len(snaps) == 0
	})
	_, err = c.dyn.Resource(longhorn.SnapshotsResource).Namespace(c.ns).Get(ctx, longhorn.SnapshotObjectName("away", "pre-upgrade"), metav1.GetOptions{})
	assert.NoError(t, err, "the other volume's snapshot stays")

	// n2 does not schedule (variedCluster): a replica failed there is not
	// reused. Failed, it runs on until its engine removed it; then stopped.
	assert.ErrorIs(t, c.plane.StopReplica(ctx, "away", "away-r-1"), dataplane.ErrRefused, "a replica not failed is not stopped")
	require.NoError(t, c.plane.FailReplica(ctx, "away", "away-r-1"))
	r := decode[longhorn.Replica](c, longhorn.ReplicasResource, "away-r-1")
	assert.Equal(t, longhorn.StateRunning, r.Spec.DesireState, "failing does not stop it")
	require.NotEmpty(t, r.Spec.FailedAt)
	assert.Equal(t, r.Spec.FailedAt, r.Spec.LastFailedAt)
	first := r.Spec.FailedAt
	v, err = c.plane.Volume(ctx, "away")
	require.NoError(t, err)
	assert.Equal(t, dataplane.ReplicaStopped, v.Replicas[0].State, "the cache shows the failure at once")
	assert.True(t, v.Replicas[0].Failed)
	require.NoError(t, c.plane.FailReplica(ctx, "away", "away-r-1"))
	assert.Equal(t, first, decode[longhorn.Replica](c, longhorn.ReplicasResource, "away-r-1").Spec.FailedAt, "the first stamp is kept")
	eventually(t, 5*time.Second, "replica out of its engine, still running", func() bool {
		e := decode[longhorn.Engine](c, longhorn.EnginesResource, "away-e-n3")
		_, in := e.Spec.ReplicaAddressMap["away-r-1"]
		v, _ := c.plane.Volume(ctx, "away")
		return !in && !v.Replicas[0].InEngine && v.Replicas[0].Running
	})
	require.NoError(t, c.plane.StopReplica(ctx, "away", "away-r-1"))
	require.NoError(t, c.plane.StopReplica(ctx, "away", "away-r-1"), "stopping again is a no-op")
	assert.Equal(t, longhorn.StateStopped, decode[longhorn.Replica](c, longhorn.ReplicasResource, "away-r-1").Spec.DesireState)
	eventually(t, 5*time.Second, "stopped in the simulator", func() bool {
		sv, _ := s.Volume(ctx, "away")
		return !sv.Replicas[0].Running
	})

	require.NoError(t, c.plane.SetReplicaScheduling(ctx, "n3", false))
	n, err := c.plane.Node(ctx, "n3")
	require.NoError(t, err)
	assert.False(t, n.AllowScheduling)
	eventually(t, 5*time.Second, "scheduling mirrored", func() bool {
		sn, _ := s.Node(ctx, "n3")
		return !sn.AllowScheduling
	})
	c.waitInStep("after the actions")
}

// The engine node never changes while the initiator switches paths: the
// adapter refuses it on the object as read, whatever the caller decided.
func TestSetEngineNodeIsRefusedWhileSwitchingPaths(t *testing.T) {
	s := sim.New(sim.Config{})
	require.NoError(t, s.AddNode("n1"))
	require.NoError(t, s.AddNode("n2"))
	c := newCluster(t, s)
	// A volume the simulated manager does not own: its status is the test's.
	u, err := longhorn.ToUnstructured(&longhorn.Volume{
		ObjectMeta: metav1.ObjectMeta{Name: "manual", Namespace: c.ns},
		Spec:       longhorn.VolumeSpec{NodeID: "n1", DataEngine: dataplane.DataEngineV2, NumberOfReplicas: 1},
	}, longhorn.KindVolume)
	require.NoError(t, err)
	ri := c.dyn.Resource(longhorn.VolumesResource).Namespace(c.ns)
	created, err := ri.Create(c.ctx, u, metav1.CreateOptions{})
	require.NoError(t, err)
	status := map[string]any{"state": "attached", "currentNodeID": "n1", "currentEngineNodeID": "n1", "switchoverState": "switching-over"}
	require.NoError(t, unstructured.SetNestedField(created.Object, status, "status"))
	_, err = ri.UpdateStatus(c.ctx, created, metav1.UpdateOptions{})
	require.NoError(t, err)

	// Its EngineFrontend reports the initiator's switching phase.
	ef, err := longhorn.ToUnstructured(&longhorn.EngineFrontend{
		ObjectMeta: metav1.ObjectMeta{Name: "manual-ef-0", Namespace: c.ns},
		Spec:       longhorn.EngineFrontendSpec{VolumeName: "manual", NodeID: "n1", DataEngine: dataplane.DataEngineV2, Active: true},
	}, longhorn.KindEngineFrontend)
	require.NoError(t, err)
	efs := c.dyn.Resource(longhorn.EngineFrontendsResource).Namespace(c.ns)
	_, err = efs.Create(c.ctx, ef, metav1.CreateOptions{})
	require.NoError(t, err)
	setPhase := func(phase string) {
		t.Helper()
		obj, err := efs.Get(c.ctx, "manual-ef-0", metav1.GetOptions{})
		require.NoError(t, err)
		require.NoError(t, unstructured.SetNestedField(obj.Object, map[string]any{"currentState": "running", "switchoverPhase": phase}, "status"))
		_, err = efs.UpdateStatus(c.ctx, obj, metav1.UpdateOptions{})
		require.NoError(t, err)
		eventually(t, 5*time.Second, "the phase in the cache", func() bool {
			v, err := c.plane.Volume(c.ctx, "manual")
			return err == nil && v.PathsSwitching == (phase != "")
		})
	}
	setPhase("switching")

	err = c.plane.SetEngineNode(c.ctx, "manual", "n2")
	require.Error(t, err)
	assert.ErrorContains(t, err, "switching paths")
	assert.NotErrorIs(t, err, dataplane.ErrRefused, "it passes once Longhorn finished")
	assert.Empty(t, decode[longhorn.Volume](c, longhorn.VolumesResource, "manual").Spec.EngineNodeID)

	// Before the initiator's first phase (its call failing and retried, the
	// old path whole) the engine node may change: a cancel withdraws it.
	setPhase("")
	require.NoError(t, c.plane.SetEngineNode(c.ctx, "manual", "n2"))
	assert.Equal(t, "n2", decode[longhorn.Volume](c, longhorn.VolumesResource, "manual").Spec.EngineNodeID)
}
