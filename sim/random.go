package sim

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// RandomOptions shapes a generated cluster. The zero value gives 2–12 nodes
// and 0–40 volumes, a v1/v2 mix, attached and detached, and no fault.
type RandomOptions struct {
	// Nodes is the node count; 0 picks 2–12.
	Nodes int
	// Volumes is the volume count; 0 picks 0–40 (or uses VolumesPerNode).
	Volumes int
	// VolumesPerNode, when positive, sets Volumes to Nodes × VolumesPerNode
	// (the benchmarks' 1000 × 20).
	VolumesPerNode int
	// OnlyV2 leaves out v1 volumes.
	OnlyV2 bool
	// AllAttached leaves out detached volumes.
	AllAttached bool
	// Faults arms 1–3 random faults, most of them triggered mid-upgrade.
	Faults bool
	// Config is the base configuration (clock, latencies, extra faults).
	Config Config
}

// Random builds a random cluster, identical for identical seed and options.
// Every node is Ready, runs v2 with its IM on Config.IMImage (OldIMImage by
// default) and has the default IM image pulled; volumes have 1–3 running
// replicas (never more than nodes) on random distinct nodes, and attached
// ones have their target on their attached node.
func Random(seed int64, opts RandomOptions) *Sim {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x5377_6974_6368_6261))
	s := New(opts.Config)
	nodes := opts.Nodes
	if nodes <= 0 {
		nodes = 2 + rng.IntN(11)
	}
	vols := opts.Volumes
	switch {
	case opts.VolumesPerNode > 0:
		vols = nodes * opts.VolumesPerNode
	case vols <= 0:
		vols = rng.IntN(41)
	}
	nodeNames := make([]string, nodes)
	for i := range nodes {
		nodeNames[i] = fmt.Sprintf("node-%0*d", digits(nodes), i+1)
		mustBuild(s.AddNode(nodeNames[i]))
	}
	volNames := make([]string, vols)
	for i := range vols {
		volNames[i] = fmt.Sprintf("vol-%0*d", digits(vols), i+1)
		spec := VolumeSpec{Name: volNames[i], Engine: EngineV2}
		if !opts.OnlyV2 && rng.IntN(5) == 0 {
			spec.Engine = EngineV1
		}
		spec.ReplicasOn = sample(rng, nodeNames, min(1+rng.IntN(3), nodes))
		if opts.AllAttached || rng.IntN(10) < 7 {
			spec.AttachedTo = nodeNames[rng.IntN(nodes)]
		}
		mustBuild(s.AddVolumeSpec(spec))
	}
	if opts.Faults {
		for range 1 + rng.IntN(3) {
			mustBuild(s.Arm(randomFault(rng, nodeNames, volNames)))
		}
	}
	return s
}

// randomFault picks a fault; node faults mostly fire mid-upgrade, where they
// hurt, and some heal by themselves so that stuck upgrades can resume.
func randomFault(rng *rand.Rand, nodes, vols []string) Fault {
	kinds := FaultKinds
	if len(vols) == 0 {
		kinds = kinds[:3] // node faults only
	}
	f := Fault{Kind: kinds[rng.IntN(len(kinds))]}
	if f.Kind.OnNode() {
		f.Object = nodes[rng.IntN(len(nodes))]
		f.When = []Trigger{TriggerNow, TriggerSchedulingDisabled, TriggerIMDeleted, TriggerIMDeleted}[rng.IntN(4)]
	} else {
		f.Object = vols[rng.IntN(len(vols))]
	}
	if f.Kind == FaultSlowRebuild {
		f.Latency = time.Duration(1+rng.IntN(30)) * time.Second
	}
	if rng.IntN(2) == 0 {
		f.HealAfter = time.Duration(1+rng.IntN(60)) * time.Second
	}
	return f
}

// sample picks k distinct names in a random order. Rejection sampling keeps
// it O(k) on large clusters, where k ≤ 3 is tiny next to len(names).
func sample(rng *rand.Rand, names []string, k int) []string {
	picked := make([]string, 0, k)
	seen := make(map[int]bool, k)
	for len(picked) < k {
		i := rng.IntN(len(names))
		if !seen[i] {
			seen[i] = true
			picked = append(picked, names[i])
		}
	}
	return picked
}

func digits(n int) int { return len(fmt.Sprint(n)) }

// mustBuild panics on a builder error: the generator only describes valid
// clusters, so an error is a bug in it.
func mustBuild(err error) {
	if err != nil {
		panic(fmt.Sprintf("sim.Random: %v", err))
	}
}
