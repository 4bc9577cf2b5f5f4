package sim

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/dataplane"
)

// snapshot renders everything observable through the interface and the
// fault list, to compare clusters.
func snapshot(t testing.TB, s *Sim) string {
	t.Helper()
	nodes, err := s.Nodes(ctx)
	require.NoError(t, err)
	ims, err := s.InstanceManagers(ctx, "")
	require.NoError(t, err)
	vols, err := s.Volumes(ctx)
	require.NoError(t, err)
	return fmt.Sprintf("%v\n%v\n%v\n%v\n%s", nodes, ims, vols, s.Faults(), s.Describe())
}

func TestRandom_Deterministic(t *testing.T) {
	opts := func() RandomOptions {
		return RandomOptions{Faults: true, Config: Config{Clock: NewFakeClock(DefaultStart)}}
	}
	for seed := range int64(20) {
		require.Equal(t, snapshot(t, Random(seed, opts())), snapshot(t, Random(seed, opts())), "seed %d", seed)
	}
	seen := map[string]int64{}
	for seed := range int64(20) {
		got := snapshot(t, Random(seed, opts()))
		prev, dup := seen[got]
		require.False(t, dup, "seeds %d and %d built the same cluster", prev, seed)
		seen[got] = seed
	}
}

func TestRandom_Shape(t *testing.T) {
	var v1, detached, faults int
	for seed := range int64(200) {
		s := Random(seed, RandomOptions{Faults: seed%2 == 0, Config: Config{Clock: NewFakeClock(DefaultStart)}})
		nodes, err := s.Nodes(ctx)
		require.NoError(t, err)
		vols, err := s.Volumes(ctx)
		require.NoError(t, err)
		if !slices.ContainsFunc(s.Faults(), func(f FaultState) bool { return f.Active && f.Kind == FaultNodeDeleted }) {
			require.GreaterOrEqual(t, len(nodes), 2)
		}
		require.LessOrEqual(t, len(nodes), 12)
		require.LessOrEqual(t, len(vols), 40)
		faults += len(s.Faults())
		for _, n := range nodes {
			require.True(t, n.V2)
			require.Contains(t, n.Images, NewIMImage)
			require.Contains(t, []string{OldIMImage, NewIMImage}, currentIM(t, s, n.Name).Image,
				"Longhorn replaced the IMs that ran nothing")
		}
		for _, v := range vols {
			require.LessOrEqual(t, v.NumberOfReplicas, 3)
			require.LessOrEqual(t, v.NumberOfReplicas, len(nodes)+1)
			require.Equal(t, v.AttachedNode, v.TargetNode)
			if v.DataEngine == EngineV1 {
				v1++
			}
			if !v.Attached() {
				detached++
			}
		}
	}
	require.NotZero(t, v1)
	require.NotZero(t, detached)
	require.NotZero(t, faults)
	dflt, err := Random(1, RandomOptions{}).DefaultInstanceManagerImage(ctx)
	require.NoError(t, err)
	require.Equal(t, NewIMImage, dflt)
}

// Walking every node of fault-free random in-place clusters through the
// node steps loses I/O exactly when an attached v2 volume has a single
// replica: the case the VolumesHealthy precheck refuses.
func TestRandom_InPlaceKeepsIOUnlessASingleReplicaIsAttached(t *testing.T) {
	for seed := range int64(60) {
		s := Random(seed, RandomOptions{Config: Config{Profile: dataplane.ProfileInPlace, Clock: NewFakeClock(DefaultStart)}})
		vols, err := s.Volumes(ctx)
		require.NoError(t, err)
		risky := slices.ContainsFunc(vols, func(v dataplane.Volume) bool {
			return v.Attached() && v.DataEngine == dataplane.DataEngineV2 && v.NumberOfReplicas == 1
		})
		nodes, err := s.Nodes(ctx)
		require.NoError(t, err)
		for _, n := range nodes {
			upgradeNode(t, s, n.Name)
		}
		st := s.IOStats()
		require.Equal(t, risky, st.FailedByActions() > 0, "seed %d: %s\n%s", seed, st, s)
		if !risky {
			require.Empty(t, s.Unsafe(""), "seed %d", seed)
		}
	}
}

func TestBuilder_RejectsImpossibleClusters(t *testing.T) {
	s, _ := cluster3(t, Config{}, VolumeSpec{Name: "vol-1", ReplicasOn: three})
	require.NoError(t, s.AddNodeSpec(NodeSpec{Name: "node-v1", NoV2: true}))
	for _, spec := range []VolumeSpec{
		{Name: "vol-1", ReplicasOn: three},
		{Name: "", ReplicasOn: three},
		{Name: "x", Engine: "v3", ReplicasOn: three},
		{Name: "x", ReplicasOn: []string{"node-1", "node-1"}},
		{Name: "x", ReplicasOn: []string{"node-v1"}},
		{Name: "x", ReplicasOn: three, NumberOfReplicas: 2},
		{Name: "x", Engine: EngineV1, ReplicasOn: three, AttachedTo: "node-1", EngineOn: "node-2"},
		{Name: "x", ReplicasOn: three, Frontend: "scsi"},
	} {
		require.ErrorIs(t, s.AddVolumeSpec(spec), ErrInvalid, "%+v", spec)
	}
	require.ErrorIs(t, s.AddVolume("x", EngineV2, []string{"node-9"}, ""), dataplane.ErrNotFound)
	require.ErrorIs(t, s.AddNode("node-1"), ErrInvalid)
	ims, err := s.InstanceManagers(ctx, "node-v1")
	require.NoError(t, err)
	require.Empty(t, ims)
}

var (
	bigSim   *Sim
	bigNames []string
)

// big builds the benchmarks' 1000 nodes × 20 volumes once.
func big(b *testing.B) (*Sim, []string) {
	b.Helper()
	if bigSim == nil {
		bigSim = Random(1, RandomOptions{Nodes: 1000, VolumesPerNode: 20, Config: Config{Clock: NewFakeClock(DefaultStart)}})
		vols, err := bigSim.Volumes(ctx)
		require.NoError(b, err)
		for _, v := range vols {
			bigNames = append(bigNames, v.Name)
		}
	}
	return bigSim, bigNames
}

func BenchmarkVolumeRead(b *testing.B) {
	s, names := big(b)
	i := 0
	for b.Loop() {
		if _, err := s.Volume(ctx, names[i%len(names)]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

func BenchmarkNodeRead(b *testing.B) {
	s, _ := big(b)
	for b.Loop() {
		if _, err := s.Node(ctx, "node-0500"); err != nil {
			b.Fatal(err)
		}
		if _, err := s.InstanceManagers(ctx, "node-0500"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSwitchOverCycle is one volume's share of a node step on the big
// cluster: move the target away, restart nothing, move it back, settle. Its
// cost must not depend on the cluster's size.
func BenchmarkSwitchOverCycle(b *testing.B) {
	for _, nodes := range []int{100, 1000} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			s := Random(1, RandomOptions{Nodes: nodes, VolumesPerNode: 20, OnlyV2: true, AllAttached: true,
				Config: Config{Clock: NewFakeClock(DefaultStart)}})
			vols, err := s.Volumes(ctx)
			require.NoError(b, err)
			v := vols[0]
			nodes, err := s.Nodes(ctx)
			require.NoError(b, err)
			other := nodes[0].Name
			if other == v.AttachedNode {
				other = nodes[1].Name
			}
			for b.Loop() {
				if err := s.SetEngineNode(ctx, v.Name, other); err != nil {
					b.Fatal(err)
				}
				s.Settle()
				if err := s.SetEngineNode(ctx, v.Name, ""); err != nil {
					b.Fatal(err)
				}
				s.Settle()
			}
		})
	}
}

// Reads do not grow with the cluster: a Volume read allocates the same on a
// 3-node and a 1000 × 20 cluster.
func TestReads_CostDoesNotGrowWithTheCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a 1000 × 20 cluster")
	}
	small := Random(1, RandomOptions{Nodes: 3, Volumes: 3, OnlyV2: true, Config: Config{Clock: NewFakeClock(DefaultStart)}})
	large := Random(1, RandomOptions{Nodes: 1000, VolumesPerNode: 20, OnlyV2: true, Config: Config{Clock: NewFakeClock(DefaultStart)}})
	allocs := func(s *Sim, name string) float64 {
		v, err := s.Volume(ctx, name)
		require.NoError(t, err)
		return testing.AllocsPerRun(100, func() { _, _ = s.Volume(ctx, v.Name) })
	}
	require.Equal(t, allocs(small, "vol-1"), allocs(large, "vol-00001"))
}
