package main

import (
	"flag"
	"fmt"
	"time"

	"github.com/switchback-dev/switchback/sim"
)

// simFlags describe the simulated cluster of the demo and of `plan
// --data-plane sim`: the same flags give the same cluster.
type simFlags struct {
	nodes, volumes int
	latency        time.Duration
	stuckVolume    bool
	healAfter      time.Duration
}

func (f *simFlags) register(fs *flag.FlagSet) {
	fs.IntVar(&f.nodes, "nodes", 4, "simulated cluster: number of v2 nodes")
	fs.IntVar(&f.volumes, "volumes", 12, "simulated cluster: number of v2 volumes (plus one v1 volume that must stay untouched)")
	fs.DurationVar(&f.latency, "latency", 150*time.Millisecond, "simulated cluster: time a target move, an IM start or a rebuild takes")
	fs.BoolVar(&f.stuckVolume, "stuck-volume", false, "simulated cluster: the first node's first attached volume cannot move its target (the upgrade stalls)")
	fs.DurationVar(&f.healAfter, "heal-after", 0, "with --stuck-volume: fix the volume after this long (0 = never; the demo then ends stalled)")
}

func (f *simFlags) validate() error {
	if f.nodes < 1 || f.nodes > 1000 {
		return fmt.Errorf("--nodes %d: want 1 to 1000", f.nodes)
	}
	if f.volumes < 0 || f.volumes > 20000 {
		return fmt.Errorf("--volumes %d: want 0 to 20000", f.volumes)
	}
	return nil
}

// build creates the cluster: nodes node-1…node-N, v2 volumes with 2 or 3
// replicas on consecutive nodes, attached round-robin (every sixth one
// detached), and one v1 volume.
func (f *simFlags) build() (*sim.Sim, error) {
	s := sim.New(sim.Config{TargetMoveLatency: f.latency, IMStartLatency: 2 * f.latency, RebuildLatency: f.latency})
	name := func(i int) string { return fmt.Sprintf("node-%d", i%f.nodes+1) }
	for i := range f.nodes {
		if err := s.AddNode(name(i)); err != nil {
			return nil, err
		}
	}
	for v := range f.volumes {
		replicas := min(2+v%2, f.nodes)
		var on []string
		for r := range replicas {
			on = append(on, name(v+r))
		}
		attached := name(v * 7)
		if v%6 == 5 {
			attached = ""
		}
		if err := s.AddVolume(fmt.Sprintf("pvc-%03d", v), sim.EngineV2, on, attached); err != nil {
			return nil, err
		}
	}
	if f.nodes >= 2 {
		if err := s.AddVolume("pvc-v1-legacy", sim.EngineV1, []string{name(0), name(1)}, name(0)); err != nil {
			return nil, err
		}
	}
	return s, nil
}
