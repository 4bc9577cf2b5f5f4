package sim

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/dataplane"
)

// A new replica lands only on a disk it fits on (RuleReplicaSpace): the
// next node in turn, too small once the replica's data is written, is
// passed over for one with room; with the rule off it takes it. Each
// node's disk is reported (Disks) with every replica on it scheduled.
func TestRule_ReplicaSpace(t *testing.T) {
	const gib = int64(1) << 30
	for _, tc := range []struct {
		name    string
		disable []Rule
		want    string
	}{
		{name: "on", want: "node-4"},
		{name: "off", disable: []Rule{RuleReplicaSpace}, want: "node-3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := newSim(t, Config{Disable: tc.disable})
			for _, n := range []NodeSpec{{Name: "node-1"}, {Name: "node-2"}, {Name: "node-3", Storage: 12 * gib}, {Name: "node-4", Storage: 100 * gib}} {
				require.NoError(t, s.AddNodeSpec(n))
			}
			require.NoError(t, s.AddVolumeSpec(VolumeSpec{Name: "vol-1", ReplicasOn: []string{"node-1", "node-2"}, AttachedTo: "node-1", Allocated: 10 * gib, Size: 20 * gib}))
			require.NoError(t, s.SetReplicaCount(ctx, "vol-1", dataplane.ReplicaSpec{NumberOfReplicas: 3, ReplicaAutoBalance: dataplane.AutoBalanceDisabled}))
			v := vol(t, s, "vol-1")
			require.Len(t, v.Replicas, 3)
			assert.Equal(t, tc.want, v.Replicas[2].Node)
		})
	}
	s, _ := newSim(t, Config{})
	require.NoError(t, s.AddNodeSpec(NodeSpec{Name: "node-1", Storage: 100 * gib}))
	require.NoError(t, s.AddNode("node-2"))
	require.NoError(t, s.AddVolumeSpec(VolumeSpec{Name: "vol-1", ReplicasOn: []string{"node-1", "node-2"}, AttachedTo: "node-1", Allocated: 10 * gib, Size: 20 * gib}))
	require.NoError(t, s.AddVolumeSpec(VolumeSpec{Name: "vol-2", ReplicasOn: []string{"node-1"}, Allocated: gib}))
	disks, err := s.Disks(ctx)
	require.NoError(t, err)
	assert.Equal(t, []dataplane.Disk{{Name: DiskName, Block: true, Schedulable: true,
		StorageMaximum: 100 * gib, StorageAvailable: 89 * gib, StorageScheduled: 21 * gib,
		OverProvisioningPercentage: 100, MinimalAvailablePercentage: 25}}, disks["node-1"])
	assert.Empty(t, nodeOf(t, s, "node-1").Disks, "Nodes reads no disk")
}
