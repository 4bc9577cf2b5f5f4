package longhorn_test

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/aggregate/manager"
	"github.com/switchback-dev/switchback/api/v1beta2"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/longhorn"
	"github.com/switchback-dev/switchback/sim"
	"github.com/switchback-dev/switchback/test/harness/enginetest"
)

// An add-first upgrade of three storage nodes through the adapter: the
// controller raises each volume's spec.numberOfReplicas (auto-balance
// off), Longhorn (simulated) builds the temporary replica, the redundancy
// invariant holds at every change, and at the end every volume has its
// count, its auto-balance and exactly its own Replica objects back.
func TestAddFirstThroughTheAdapter(t *testing.T) {
	cfg := latencies
	// Longhorn's default wait (600 s) outlasts a node here: no replica
	// is built elsewhere for one failed by a later node.
	cfg.FullRedundancy, cfg.ReplicaReplenishWait = true, time.Hour
	s := sim.New(cfg)
	for _, n := range []string{"c1", "n1", "n2", "n3"} {
		require.NoError(t, s.AddNode(n))
	}
	for _, v := range []sim.VolumeSpec{
		{Name: "vol-1", ReplicasOn: []string{"n1", "n2"}, AttachedTo: "c1", EngineOn: "n1", ReplicaAutoBalance: "best-effort"},
		{Name: "vol-2", ReplicasOn: []string{"n2", "n3"}, AttachedTo: "c1", EngineOn: "n2"},
		{Name: "vol-3", ReplicasOn: []string{"n1", "n3"}, AttachedTo: "c1", EngineOn: "n3"},
	} {
		require.NoError(t, s.AddVolumeSpec(v))
	}
	c := newCluster(t, s)
	was := recordBefore(t, c)
	replicasOf := func() map[string][]string {
		out := map[string][]string{}
		for _, u := range c.list(longhorn.ReplicasResource) {
			var r longhorn.Replica
			require.NoError(t, longhorn.FromUnstructured(&u, &r))
			out[r.Spec.VolumeName] = append(out[r.Spec.VolumeName], r.Name)
		}
		for _, names := range out {
			slices.Sort(names)
		}
		return out
	}
	own := replicasOf()
	e := enginetest.Start(t, c.plane, enginetest.Options{})
	m := ref("add-first")
	e.RequestSpec(m, v1beta2.DataEngineUpgradeManagerSpec{DataEngine: v1beta2.DataEngineTypeV2, Nodes: []string{"n1", "n2", "n3"},
		ReplicaPolicy: v1beta2.ReplicaPolicyAddFirst})
	completed(t, e, m)
	io := s.IOStats()
	assert.Zero(t, io.Failed, "%s", io)
	assert.Empty(t, io.Breaches, "no volume ever served from fewer nodes than it was built with")
	c.waitInStep("after the upgrade")
	was.restored(t, c)

	raised := 0
	for _, ev := range e.History(m) {
		if d, ok := ev.Data.(events.ReplicaCountRaised); ok && d.FirstNode == "" {
			raised++
		}
	}
	assert.Equal(t, 3, raised, "one temporary replica per volume and upgrade")
	assert.Equal(t, own, replicasOf(), "exactly the volumes' own replicas back")
	for _, u := range c.list(longhorn.VolumesResource) {
		var v longhorn.Volume
		require.NoError(t, longhorn.FromUnstructured(&u, &v))
		assert.Equal(t, 2, v.Spec.NumberOfReplicas, v.Name)
		want := "ignored"
		if v.Name == "vol-1" {
			want = "best-effort"
		}
		assert.Equal(t, want, v.Spec.ReplicaAutoBalance, v.Name)
	}
}

// Under add-first, a cluster whose one spare node has a disk too small
// for a temporary replica, as its Longhorn node's status.diskStatus says,
// is refused by the precheck TemporaryReplicasFit through the adapter,
// naming the volume and the disk, before anything is touched.
func TestAddFirstRefusedWithoutRoomThroughTheAdapter(t *testing.T) {
	const gib = int64(1) << 30
	s := sim.New(latencies)
	for _, n := range []sim.NodeSpec{{Name: "n1"}, {Name: "n2"}, {Name: "n3", Storage: 2 * gib}} {
		require.NoError(t, s.AddNodeSpec(n))
	}
	require.NoError(t, s.AddVolumeSpec(sim.VolumeSpec{Name: "vol-1", ReplicasOn: []string{"n1", "n2"}, AttachedTo: "n1", Allocated: gib, Size: 10 * gib}))
	c := newCluster(t, s)
	e := enginetest.Start(t, c.plane, enginetest.Options{})
	m := ref("no-room")
	e.RequestSpec(m, v1beta2.DataEngineUpgradeManagerSpec{DataEngine: v1beta2.DataEngineTypeV2, Nodes: []string{"n1", "n2"},
		ReplicaPolicy: v1beta2.ReplicaPolicyAddFirst})
	st := e.WaitManager(m, time.Minute, "a terminal state", terminal)
	require.Equal(t, events.ManagerError, st.State)
	i := slices.IndexFunc(st.Prechecks, func(p manager.PrecheckResult) bool { return p.Check == "TemporaryReplicasFit" })
	require.GreaterOrEqual(t, i, 0)
	assert.Equal(t, "NoRoomForTemporaryReplica", st.Prechecks[i].Reason)
	assert.Contains(t, st.Prechecks[i].Message, "temporary replica of volume vol-1 (10.0 GiB): n3: disk disk-1 would have 10737418240 bytes scheduled, over its 100% over-provisioning limit (2147483648 bytes)")
	assert.Empty(t, st.Nodes, "no node was touched")
}
