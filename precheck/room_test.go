package precheck

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/plan"
	"github.com/switchback-dev/switchback/test/harness/dataplanetest"
)

const gib = int64(1) << 30

// sized is vol with actual and spec.size bytes.
func sized(v dataplane.Volume, actual, size int64) dataplane.Volume {
	v.ActualSize, v.Size = actual, size
	return v
}

const roomRemedy = "; free space or add a disk or node Longhorn can schedule on, or create the manager with spec.replicaPolicy rebuild"

func TestCheckTemporaryReplicasFit(t *testing.T) {
	tests := []struct {
		name   string
		nodes  int
		disks  map[string]dataplane.Disk // by node; every node has a 1 TiB disk otherwise
		edit   func(*plan.Cluster)
		vols   []dataplane.Volume
		policy string
		want   Result
	}{
		{name: "rebuild adds none", nodes: 2, vols: []dataplane.Volume{vol("a", "node-1", "node-1", "node-2")}, policy: events.ReplicaPolicyRebuild,
			want: Result{TemporaryReplicasFit, true, ReasonChecksPassed, "spec.replicaPolicy is rebuild: no temporary replica is added"}},
		{name: "a node without a replica has room", nodes: 3, vols: []dataplane.Volume{sized(vol("a", "node-1", "node-1", "node-2"), 10*gib, 20*gib)},
			want: Result{TemporaryReplicasFit, true, ReasonChecksPassed, "the 1 temporary replica(s) of replicaPolicy add-first fit on nodes that hold no replica of their volume"}},
		{name: "every other node holds a replica", nodes: 2, vols: []dataplane.Volume{vol("a", "node-1", "node-1", "node-2")},
			want: Result{TemporaryReplicasFit, false, ReasonNoRoomForTemporaryReplica,
				"no node outside node-2 can take a temporary replica of volume a: every other node holds a replica of it" + roomRemedy}},
		{name: "too little left once written", nodes: 3, disks: map[string]dataplane.Disk{"node-3": dataplanetest.BlockDisk("nvme0", 12*gib)},
			vols: []dataplane.Volume{sized(vol("a", "node-1", "node-1", "node-2"), 10*gib, 10*gib)},
			want: Result{TemporaryReplicasFit, false, ReasonNoRoomForTemporaryReplica,
				"no node outside node-2 can take a temporary replica of volume a (10.0 GiB): node-3: disk nvme0 would keep 2147483648 bytes available, not more than its 25% minimum (3221225472 bytes)" + roomRemedy}},
		{name: "over the over-provisioning limit", nodes: 3, disks: map[string]dataplane.Disk{"node-3": dataplanetest.BlockDisk("nvme0", 100*gib)},
			vols: []dataplane.Volume{sized(vol("a", "node-1", "node-1", "node-2"), gib, 200*gib)},
			want: Result{TemporaryReplicasFit, false, ReasonNoRoomForTemporaryReplica,
				"no node outside node-2 can take a temporary replica of volume a (200 GiB): node-3: disk nvme0 would have 214748364800 bytes scheduled, over its 100% over-provisioning limit (107374182400 bytes)" + roomRemedy}},
		{name: "each placement takes its room before the next", nodes: 3, disks: map[string]dataplane.Disk{"node-3": dataplanetest.BlockDisk("nvme0", 100*gib)},
			vols: []dataplane.Volume{
				sized(vol("a", "node-1", "node-1", "node-2"), 30*gib, 30*gib), sized(vol("b", "node-1", "node-1", "node-2"), 30*gib, 30*gib),
				sized(vol("c", "node-2", "node-2", "node-1"), 30*gib, 30*gib)},
			want: Result{TemporaryReplicasFit, false, ReasonNoRoomForTemporaryReplica,
				"no node outside node-2 can take a temporary replica of volume c (30.0 GiB): node-3: disk nvme0 would keep 10737418240 bytes available, not more than its 25% minimum (26843545600 bytes)" + roomRemedy}},
		{name: "a disk that takes no v2 replica", nodes: 3, disks: map[string]dataplane.Disk{"node-3": {Name: "fs", Schedulable: true, StorageMaximum: 100 * gib, StorageAvailable: 100 * gib}},
			vols: []dataplane.Volume{vol("a", "node-1", "node-1", "node-2")},
			want: Result{TemporaryReplicasFit, false, ReasonNoRoomForTemporaryReplica,
				"no node outside node-2 can take a temporary replica of volume a: node-3: disk fs takes no v2 replica" + roomRemedy}},
		{name: "the node selector", nodes: 3, vols: []dataplane.Volume{func() dataplane.Volume {
			v := vol("a", "node-1", "node-1", "node-2")
			v.NodeSelector = []string{"fast"}
			return v
		}()},
			want: Result{TemporaryReplicasFit, false, ReasonNoRoomForTemporaryReplica,
				"no node outside node-2 can take a temporary replica of volume a: node-3 lacks the node selector's tags fast" + roomRemedy}},
		{name: "hard zone anti-affinity", nodes: 3, edit: func(c *plan.Cluster) {
			c.Nodes[0].Zone, c.Nodes[1].Zone, c.Nodes[2].Zone = "z1", "z2", "z1"
			c.Volumes[0].HardZoneAntiAffinity = true
		}, vols: []dataplane.Volume{vol("a", "node-1", "node-1", "node-2")},
			want: Result{TemporaryReplicasFit, false, ReasonNoRoomForTemporaryReplica,
				"no node outside node-2 can take a temporary replica of volume a: replica zone anti-affinity is hard and every zone with room holds a replica" + roomRemedy}},
		{name: "soft zone anti-affinity shares a zone", nodes: 3, edit: func(c *plan.Cluster) {
			c.Nodes[0].Zone, c.Nodes[1].Zone, c.Nodes[2].Zone = "z1", "z2", "z1"
		}, vols: []dataplane.Volume{vol("a", "node-1", "node-1", "node-2")},
			want: Result{TemporaryReplicasFit, true, ReasonChecksPassed, "the 1 temporary replica(s) of replicaPolicy add-first fit on nodes that hold no replica of their volume"}},
		{name: "a node that does not schedule", nodes: 3, edit: func(c *plan.Cluster) { c.Nodes[2].AllowScheduling = false },
			vols: []dataplane.Volume{vol("a", "node-1", "node-1", "node-2")},
			want: Result{TemporaryReplicasFit, false, ReasonNoRoomForTemporaryReplica,
				"no node outside node-2 can take a temporary replica of volume a: node-3 does not schedule replicas" + roomRemedy}},
		{name: "a volume keeping its count off the node needs none", nodes: 2, vols: []dataplane.Volume{func() dataplane.Volume {
			v := vol("a", "node-1", "node-1", "node-2")
			v.NumberOfReplicas = 1
			return v
		}()},
			want: Result{TemporaryReplicasFit, true, ReasonChecksPassed, "no volume needs a temporary replica: each keeps its numberOfReplicas on nodes other than the one upgraded"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := cluster(tt.nodes, tt.vols...)
			for i := range c.Nodes {
				d, ok := tt.disks[c.Nodes[i].Name]
				if !ok {
					d = dataplanetest.BlockDisk("nvme0", 1024*gib)
				}
				c.Nodes[i].Disks = []dataplane.Disk{d}
			}
			if tt.edit != nil {
				tt.edit(&c)
			}
			in := input(c)
			in.ReplicaPolicy = tt.policy
			if in.ReplicaPolicy == "" {
				in.ReplicaPolicy = events.ReplicaPolicyAddFirst
			}
			assert.Equal(t, tt.want, CheckTemporaryReplicasFit(in))
		})
	}
}
