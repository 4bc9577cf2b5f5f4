package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/sim"
)

// simFlags describe the simulated cluster of the demo and of `plan
// --data-plane sim`: the same flags give the same cluster.
type simFlags struct {
	nodes, volumes int
	latency        time.Duration
	stuckVolume    bool
	healAfter      time.Duration
	profile        string
}

func (f *simFlags) register(fs *pflag.FlagSet) {
	inSection(fs, flagsSimulated, func() {
		fs.IntVar(&f.nodes, "nodes", 4, "simulated cluster: number of v2 nodes")
		fs.IntVar(&f.volumes, "volumes", 12, "simulated cluster: number of v2 volumes (plus one v1 volume that must stay untouched)")
		fs.DurationVar(&f.latency, "latency", 150*time.Millisecond, "simulated cluster: time a switch-over, an IM start or a rebuild takes")
		fs.BoolVar(&f.stuckVolume, "stuck-volume", false, "simulated cluster: the switch-overs of one attached volume keep failing (the upgrade stalls)")
		fs.DurationVar(&f.healAfter, "heal-after", 0, "with --stuck-volume: fix the volume after this long (0 = never; the demo then ends stalled)")
		fs.StringVar(&f.profile, "longhorn-profile", string(dataplane.ProfileV112),
			"simulated cluster: the Longhorn it behaves like: v1.12 (released; a node holding initiators of attached v2 volumes cannot be upgraded live) or in-place (experimental)")
	})
}

func (f *simFlags) validate() error {
	if f.nodes < 1 || f.nodes > 1000 {
		return fmt.Errorf("--nodes %d: want 1 to 1000", f.nodes)
	}
	if f.volumes < 0 || f.volumes > 20000 {
		return fmt.Errorf("--volumes %d: want 0 to 20000", f.volumes)
	}
	if !dataplane.Profile(f.profile).Valid() {
		return fmt.Errorf("--longhorn-profile %q: want one of %s", f.profile, strings.Join(dataplane.ProfileNames(), ", "))
	}
	return nil
}

// build creates the cluster: nodes node-1…node-N, v2 volumes with 2 or 3
// replicas on consecutive nodes (every sixth one detached), and one v1
// volume attached to node-1.
//
// On the in-place profile the volumes are attached round-robin over every
// node, their engines following them. On v1.12 the workloads run on the
// first quarter of the nodes (at least one), and two volumes in three have
// their engine placed (spec.engineNodeID) on one of the other nodes, as a
// cluster with storage nodes does: those nodes are upgraded live, the
// workloads' nodes once their workloads moved.
func (f *simFlags) build() (*sim.Sim, error) {
	profile := dataplane.Profile(f.profile)
	s := sim.New(sim.Config{Profile: profile, TargetMoveLatency: f.latency, IMStartLatency: 2 * f.latency, RebuildLatency: f.latency})
	name := func(i int) string { return fmt.Sprintf("node-%d", i%f.nodes+1) }
	for i := range f.nodes {
		if err := s.AddNode(name(i)); err != nil {
			return nil, err
		}
	}
	apps := max(1, f.nodes/4)
	storage := f.nodes - apps
	for v := range f.volumes {
		spec := sim.VolumeSpec{Name: fmt.Sprintf("pvc-%03d", v), Engine: sim.EngineV2, AttachedTo: name(v * 7)}
		replicas := min(2+v%2, f.nodes)
		first := v
		if profile == dataplane.ProfileV112 {
			spec.AttachedTo = name(v % apps)
			if storage > 0 {
				if v%3 != 2 {
					spec.EngineOn = name(apps + v%storage)
				}
				first = apps + v%storage
			}
		}
		for r := range replicas {
			spec.ReplicasOn = append(spec.ReplicasOn, name(first+r))
		}
		if v%6 == 5 {
			spec.AttachedTo, spec.EngineOn = "", ""
		}
		if err := s.AddVolumeSpec(spec); err != nil {
			return nil, err
		}
	}
	if f.nodes >= 2 {
		if err := s.AddVolume("pvc-v1-legacy", sim.EngineV1, []string{name(0), name(1)}, name(0)); err != nil {
			return nil, err
		}
	}
	// Each attached volume is some workload's: a pod on its node.
	if err := s.AddPods(); err != nil {
		return nil, err
	}
	return s, nil
}
