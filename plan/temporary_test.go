package plan

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/test/harness/dataplanetest"
)

const gib = int64(1) << 30

// roomCluster is cluster3 plus node-4, node-1 and node-2 with a 1 TiB disk,
// node-3 a 100 GiB one and node-4 two of 100 GiB.
func roomCluster(vols ...dataplane.Volume) Cluster {
	c := cluster3(vols...)
	c.Nodes = append(c.Nodes, dataplanetest.V2Node("node-4"))
	c.InstanceManagers = append(c.InstanceManagers, dataplanetest.RunningIM("node-4", oldIM))
	c.Nodes[0].Disks = []dataplane.Disk{dataplanetest.BlockDisk("nvme0", 1024*gib)}
	c.Nodes[1].Disks = []dataplane.Disk{dataplanetest.BlockDisk("nvme0", 1024*gib)}
	c.Nodes[2].Disks = []dataplane.Disk{dataplanetest.BlockDisk("nvme0", 100*gib)}
	c.Nodes[3].Disks = []dataplane.Disk{dataplanetest.BlockDisk("nvme0", 100*gib), dataplanetest.BlockDisk("nvme1", 100*gib)}
	return c
}

func withSize(v dataplane.Volume, actual, size int64) dataplane.Volume {
	v.ActualSize, v.Size = actual, size
	return v
}

// Each volume gets one temporary replica, added by the first node of the
// plan holding one of its replicas, on a node holding none, where
// Longhorn's balance puts it (the node left most even, then the disk),
// each taking its room before the next; a volume keeping its count off
// the node gets none.
func TestPlaceTemporaryReplicas(t *testing.T) {
	spare := attached("spare", "node-1", "node-1", "node-2")
	spare.NumberOfReplicas = 1
	c := roomCluster(
		withSize(attached("a", "node-1", "node-1", "node-2"), 20*gib, 40*gib),
		withSize(attached("b", "node-1", "node-1", "node-2"), 20*gib, 40*gib),
		withSize(attached("c", "node-1", "node-1", "node-3"), 5*gib, 10*gib),
		spare,
		detached("d", "node-1", "node-2"),
	)
	p := PlaceTemporaryReplicas(c, Build(c, nil, newIM))
	require.Equal(t, []string{"node-2", "node-3", "node-4", "node-1"}, p.Order())
	byNode := map[string][]TemporaryReplica{}
	for _, n := range p.Nodes {
		byNode[n.Node] = n.TemporaryReplicas
	}
	assert.Equal(t, []TemporaryReplica{
		{Volume: "a", Node: "node-4", Disk: "nvme0", Size: 40 * gib, Bytes: 20 * gib},
		{Volume: "b", Node: "node-4", Disk: "nvme1", Size: 40 * gib, Bytes: 20 * gib},
	}, byNode["node-2"], "a to the node with the most room, on the first of its even disks; b beside it, on the disk a left alone")
	assert.Equal(t, []TemporaryReplica{{Volume: "c", Node: "node-2", Disk: "nvme0", Size: 10 * gib, Bytes: 5 * gib}}, byNode["node-3"],
		"node-2 is done by then and holds no replica of c")
	assert.Empty(t, byNode["node-4"], "node-4 holds no replica")
	assert.Empty(t, byNode["node-1"], "every volume there has its temporary replica already, and spare needs none")
	assert.Equal(t, []DiskRoom{
		{Node: "node-2", Disk: "nvme0", Replicas: 1, Size: 10 * gib, Bytes: 5 * gib, Usable: 1024 * gib},
		{Node: "node-4", Disk: "nvme0", Replicas: 1, Size: 40 * gib, Bytes: 20 * gib, Usable: 100 * gib},
		{Node: "node-4", Disk: "nvme1", Replicas: 1, Size: 40 * gib, Bytes: 20 * gib, Usable: 100 * gib},
	}, p.Room)
	assert.True(t, p.Feasible())
	out := p.String()
	assert.Contains(t, out, "ORDER  NODE    VOLUME  SIZE      COPIES    EXPECTED ON\n"+
		"1      node-2  a       40.0 GiB  20.0 GiB  node-4/nvme0\n"+
		"1      node-2  b       40.0 GiB  20.0 GiB  node-4/nvme1\n"+
		"2      node-3  c       10.0 GiB  5.00 GiB  node-2/nvme0\n")
	assert.Contains(t, out, "NODE    DISK   REPLICAS  SCHEDULED  WRITTEN   USABLE NOW\n"+
		"node-2  nvme0  1         10.0 GiB   5.00 GiB  1.00 TiB\n")

	// No room: the plan is not feasible and says why.
	c.Nodes[2].Disks, c.Nodes[3].Disks = nil, nil
	p = PlaceTemporaryReplicas(c, Build(c, nil, newIM))
	assert.False(t, p.Feasible())
	assert.Contains(t, p.String(), "none: no node outside node-2 can take a temporary replica of volume a (40.0 GiB): node-3 reports no disk; node-4 reports no disk")
}
