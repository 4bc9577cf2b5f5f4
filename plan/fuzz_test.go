package plan

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/test/harness/fuzzinput"
)

var (
	fuzzImages     = []string{oldIM, newIM, "im:v0"}
	fuzzIMStates   = []dataplane.IMState{dataplane.IMRunning, dataplane.IMRunning, dataplane.IMStarting, dataplane.IMStopped, dataplane.IMError}
	fuzzRepStates  = []dataplane.ReplicaState{dataplane.ReplicaRunning, dataplane.ReplicaRunning, dataplane.ReplicaRebuilding, dataplane.ReplicaStopped, dataplane.ReplicaError}
	fuzzRobustness = []dataplane.Robustness{dataplane.RobustnessHealthy, dataplane.RobustnessDegraded, dataplane.RobustnessFaulted, dataplane.RobustnessUnknown, ""}
)

// fuzzCluster builds a small cluster (up to 6 nodes, 8 volumes) with unique
// names, a request and a target image.
func fuzzCluster(data []byte) (Cluster, []string, string) {
	s := fuzzinput.New(data)
	var c Cluster
	c.Platform.Profile = dataplane.Profiles[s.Pick(len(dataplane.Profiles))]
	names := []string{}
	for i := range 1 + s.Pick(6) {
		n := dataplane.Node{
			Name: fmt.Sprintf("n%d", i), Ready: s.Pick(4) != 0, V2: s.Pick(5) != 0,
			AllowScheduling: s.Pick(5) != 0,
		}
		for _, img := range fuzzImages {
			if s.Coin() {
				n.Images = append(n.Images, img)
			}
		}
		for j := range s.Pick(3) {
			capacity := int64(1+s.Pick(8)) << 30
			n.Disks = append(n.Disks, dataplane.Disk{Name: fmt.Sprintf("d%d", j), Block: s.Pick(4) != 0, Schedulable: s.Pick(4) != 0,
				StorageMaximum: capacity, StorageAvailable: capacity - int64(s.Pick(4))<<28, StorageScheduled: int64(s.Pick(8)) << 29,
				OverProvisioningPercentage: []int64{100, 200, 50}[s.Pick(3)], MinimalAvailablePercentage: []int64{25, 0, 10}[s.Pick(3)]})
		}
		n.Zone = []string{"", "z1", "z2"}[s.Pick(3)]
		c.Nodes = append(c.Nodes, n)
		names = append(names, n.Name)
		for j := range s.Pick(3) {
			im := dataplane.InstanceManager{
				Name: fmt.Sprintf("im-%s-%d", n.Name, j), Node: n.Name,
				Image: fuzzImages[s.Pick(len(fuzzImages))], State: fuzzIMStates[s.Pick(len(fuzzIMStates))],
				DataEngine: []string{dataplane.DataEngineV2, dataplane.DataEngineV2, "", "v1"}[s.Pick(4)],
			}
			c.InstanceManagers = append(c.InstanceManagers, im)
		}
	}
	// Nodes a volume may point at, including one the cluster does not have.
	places := append(slices.Clone(names), "ghost", "")
	for i := range s.Pick(9) {
		v := dataplane.Volume{
			Name: fmt.Sprintf("vol-%d", i), DataEngine: dataplane.DataEngineV2,
			NumberOfReplicas: s.Pick(4), Robustness: fuzzRobustness[s.Pick(len(fuzzRobustness))],
		}
		if s.Pick(4) == 0 {
			v.DataEngine = "v1"
		}
		v.ActualSize, v.Size = int64(s.Pick(4))<<28, int64(s.Pick(4))<<29
		v.HardZoneAntiAffinity = s.Pick(3) == 0
		v.AttachedNode = places[s.Pick(len(places))]
		switch s.Pick(3) {
		case 0:
			v.TargetNode = v.AttachedNode
		case 1:
			v.TargetNode = places[s.Pick(len(places))]
		}
		for j := range s.Pick(4) {
			v.Replicas = append(v.Replicas, dataplane.Replica{
				Name: fmt.Sprintf("%s-r%d", v.Name, j), Node: places[s.Pick(len(places))],
				State: fuzzRepStates[s.Pick(len(fuzzRepStates))],
			})
		}
		c.Volumes = append(c.Volumes, v)
	}
	var requested []string
	if s.Coin() {
		for _, n := range append(slices.Clone(names), "ghost") {
			if s.Coin() {
				requested = append(requested, n)
			}
		}
	}
	target := []string{newIM, newIM, oldIM, ""}[s.Pick(4)]
	c.DefaultImage = target
	return c, requested, target
}

// FuzzPlan checks, on random small clusters, that planning never panics,
// never picks the upgrading node or a NotReady node as a temporary target,
// does not modify its snapshot, and is deterministic (including under a
// reordering of the snapshot).
func FuzzPlan(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{2, 1, 1, 1, 0, 1, 1, 2, 0, 0, 0, 0, 1, 0, 1, 1, 1, 1, 2, 0, 0, 0, 3})
	f.Add([]byte("switchback: a live upgrade of the v2 data engine, node by node"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, requested, target := fuzzCluster(data)
		before := cloneCluster(c)

		p := Build(c, requested, target)
		require.Equal(t, before, c, "Build modified its snapshot")
		require.Equal(t, p, Build(c, requested, target), "Build is not deterministic")
		require.Equal(t, TargetNodes(c, requested), p.Order())
		_ = p.String()

		notLiveSeen := false
		for _, np := range p.Nodes {
			for _, s := range np.Switchovers {
				vol := findVolume(t, c, s.Volume)
				require.Equal(t, dataplane.DataEngineV2, vol.DataEngine, "v1 volume %s in the plan", s.Volume)
				if !s.OK {
					require.Empty(t, s.TemporaryTarget)
					continue
				}
				requireCandidate(t, c, s.TemporaryTarget, np.Node)
			}
			// A node that cannot be upgraded live comes after every one
			// that can: it waits for its user.
			if np.Live && !np.Unknown {
				require.False(t, notLiveSeen, "%s can be upgraded live but comes after a node that cannot", np.Node)
			}
			notLiveSeen = notLiveSeen || !np.Live
		}

		reversed := cloneCluster(c)
		slices.Reverse(reversed.Nodes)
		slices.Reverse(reversed.InstanceManagers)
		slices.Reverse(reversed.Volumes)
		for i := range reversed.Volumes {
			slices.Reverse(reversed.Volumes[i].Replicas)
		}
		require.Equal(t, p, Build(reversed, requested, target), "Build depends on the snapshot's order")
		requireTemporaryReplicas(t, c, p)
		for _, limit := range []int{2, 4} {
			wp := BuildWaves(c, requested, target, limit)
			require.Equal(t, before, c, "BuildWaves modified its snapshot")
			require.Equal(t, wp, BuildWaves(c, requested, target, limit), "BuildWaves is not deterministic")
			requireWaves(t, c, p, wp, limit)
			requireTemporaryReplicas(t, c, wp)
		}

		// A worker chooses from counts (ReadPlacement), not from every
		// volume: both must give the same answer and the same reason.
		counted := Cluster{Nodes: c.Nodes, InstanceManagers: c.InstanceManagers, TargetCounts: dataplane.CountTargets(c.Volumes)}
		for _, vol := range c.Volumes {
			for _, up := range append(c.V2Nodes(), "ghost") {
				node, reason, ok := ChooseTemporaryTarget(c, vol, up, target)
				cNode, cReason, cOK := ChooseTemporaryTarget(counted, vol, up, target)
				require.Equal(t, []any{node, reason, ok}, []any{cNode, cReason, cOK}, "choice from target counts differs")
				require.NotEmpty(t, reason)
				if !ok {
					require.Empty(t, node)
					continue
				}
				requireCandidate(t, c, node, up)
			}
		}
	})
}

// requireCandidate asserts that node may host a target while upgrading is
// upgraded: it exists, is not upgrading, and is a Ready v2 node.
func requireCandidate(t *testing.T, c Cluster, node, upgrading string) {
	t.Helper()
	require.NotEqual(t, upgrading, node, "the upgrading node was chosen as temporary target")
	n, ok := c.Node(node)
	require.True(t, ok, "unknown node %s chosen", node)
	require.True(t, n.Ready, "NotReady node %s chosen", node)
	require.True(t, n.V2, "non-v2 node %s chosen", node)
}

func findVolume(t *testing.T, c Cluster, name string) dataplane.Volume {
	t.Helper()
	for _, v := range c.Volumes {
		if v.Name == name {
			return v
		}
	}
	t.Fatalf("plan names volume %s, which the cluster does not have", name)
	return dataplane.Volume{}
}

// requireTemporaryReplicas asserts what PlaceTemporaryReplicas promises on
// c: it is pure and deterministic, gives each volume one temporary replica
// at most, never on a node of the wave being upgraded or on one holding a replica
// of the volume or not scheduling, and never more on a disk than it fits,
// all placements counted together.
func requireTemporaryReplicas(t *testing.T, c Cluster, p Plan) {
	t.Helper()
	before := cloneCluster(c)
	tp := PlaceTemporaryReplicas(c, p)
	require.Equal(t, before, c, "PlaceTemporaryReplicas modified its snapshot")
	require.Equal(t, tp, PlaceTemporaryReplicas(c, p), "PlaceTemporaryReplicas is not deterministic")
	_ = tp.String()
	seen := map[string]bool{}
	taken := map[[2]string]dataplane.Disk{}
	for _, np := range tp.Nodes {
		for _, tr := range np.TemporaryReplicas {
			require.False(t, seen[tr.Volume], "volume %s got two temporary replicas", tr.Volume)
			seen[tr.Volume] = true
			if !tr.Placed() {
				require.NotEmpty(t, tr.Reason)
				continue
			}
			vol := findVolume(t, c, tr.Volume)
			requireCandidate(t, c, tr.Node, np.Node)
			for _, o := range tp.Nodes {
				require.False(t, o.Wave == np.Wave && o.Node == tr.Node, "temporary replica of %s on %s, in its wave", tr.Volume, tr.Node)
			}
			n, _ := c.Node(tr.Node)
			require.True(t, n.AllowScheduling, "node %s does not schedule", tr.Node)
			for _, r := range vol.Replicas {
				require.NotEqual(t, r.Node, tr.Node, "volume %s's temporary replica shares a node with %s", vol.Name, r.Name)
			}
			k := [2]string{tr.Node, tr.Disk}
			d, ok := taken[k]
			if !ok {
				i := slices.IndexFunc(n.Disks, func(d dataplane.Disk) bool { return d.Name == tr.Disk })
				require.GreaterOrEqual(t, i, 0, "unknown disk %s on %s", tr.Disk, tr.Node)
				d = n.Disks[i]
			}
			fits, why := d.Fits(tr.Size, tr.Bytes)
			require.True(t, fits, "disk %s/%s overfilled: %s", tr.Node, tr.Disk, why)
			require.True(t, d.Block && d.Schedulable)
			taken[k] = d.Take(tr.Size, tr.Bytes)
		}
	}
}

// requireWaves asserts what BuildWaves promises: the nodes of the one-at-a-
// time plan p, each once; waves of at most limit nodes; no two nodes of a
// wave in one attached volume's footprint; no temporary target in its
// wave; each wave led by the first node of today's order not yet planned.
func requireWaves(t *testing.T, c Cluster, p, wp Plan, limit int) {
	t.Helper()
	require.ElementsMatch(t, p.Order(), wp.Order())
	var flat []string
	left := p.Order()
	for i, w := range wp.Waves {
		require.NotEmpty(t, w.Nodes)
		require.LessOrEqual(t, len(w.Nodes), limit)
		require.Equal(t, left[0], w.Nodes[0], "wave %d is not led by the first node left in today's order", i+1)
		for _, n := range w.Nodes {
			left = slices.DeleteFunc(left, func(o string) bool { return o == n })
		}
		flat = append(flat, w.Nodes...)
		for _, v := range c.Volumes {
			fp := Footprint(v)
			var in []string
			for _, n := range w.Nodes {
				if slices.Contains(fp, n) {
					in = append(in, n)
				}
			}
			require.LessOrEqual(t, len(in), 1, "wave %d holds %v, both in volume %s's footprint %v", i+1, in, v.Name, fp)
		}
	}
	require.Equal(t, flat, wp.Order())
	for _, np := range wp.Nodes {
		for _, s := range np.Switchovers {
			if s.OK {
				require.NotContains(t, wp.Waves[np.Wave-1].Nodes, s.TemporaryTarget, "temporary target of %s in its own wave", s.Volume)
			}
		}
	}
}
