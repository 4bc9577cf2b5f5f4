package perf_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/sim"
	"github.com/switchback-dev/switchback/test/harness/benchenv"
	"github.com/switchback-dev/switchback/test/harness/enginetest"
)

// ring is the cluster the whole-upgrade benchmarks upgrade: nodes nodes on
// Longhorn's in-place profile, each the attached node (and so the target
// node) of perNode v2 volumes with two replicas, on the next two nodes
// around the ring. Every node thus hosts the targets of perNode volumes and
// the replicas of 2 × perNode others; no volume has a replica where its
// target runs, so a node's rebuilds never hold its own switch-overs (the
// simulator, like Longhorn, reverts a switch-over while a replica of the
// volume rebuilds). A failed replica waits for its own node
// (ReplicaReplenishWait < 0), as Longhorn's replica-replenishment-wait-
// interval (600 s by default) makes it wait through a node's upgrade.
type ring struct {
	nodes, perNode int
	// move, imStart and rebuild are the simulator's latencies.
	move, imStart, rebuild time.Duration
}

func (r ring) build(tb testing.TB) *sim.Sim {
	tb.Helper()
	s := sim.New(sim.Config{Profile: dataplane.ProfileInPlace, TargetMoveLatency: r.move, IMStartLatency: r.imStart,
		RebuildLatency: r.rebuild, ReplicaReplenishWait: -1})
	name := func(i int) string { return fmt.Sprintf("node-%03d", i%r.nodes) }
	for i := range r.nodes {
		if err := s.AddNode(name(i)); err != nil {
			tb.Fatal(err)
		}
	}
	for i := range r.nodes {
		for k := range r.perNode {
			err := s.AddVolumeSpec(sim.VolumeSpec{Name: fmt.Sprintf("pvc-%03d-%03d", i, k), Engine: sim.EngineV2,
				AttachedTo: name(i), ReplicasOn: []string{name(i + 1), name(i + 2)}})
			if err != nil {
				tb.Fatal(err)
			}
		}
	}
	return s
}

// floor is the data plane's share of the ring's upgrade, computed from its
// configuration alone: the sum of the configured latencies along the
// critical path of the plan. Nodes are upgraded one at a time, so it is the
// sum over the nodes of each node's critical path. On a node with volumes
// (every node of the ring) that is: the switch-over of the targets it hosts
// (one move: the volumes move in parallel), the start of its instance
// manager on the new image, then the longer of the switch-back (one move)
// and the rebuild of the replicas it held (one rebuild, in parallel), which
// both begin once the instance manager runs and replica scheduling is
// restored. Failing replicas, snapshots and the rest take no simulated time.
// A node without volumes has only its instance manager to restart.
func (r ring) floor() time.Duration {
	perNode := r.imStart
	if r.perNode > 0 {
		perNode = r.move + r.imStart + max(r.move, r.rebuild)
	}
	return time.Duration(r.nodes) * perNode
}

// upgrade runs one whole upgrade of r with every component on the product's
// own settings and returns its wall and process CPU time.
func (r ring) upgrade(b *testing.B, name string) (wall, cpu time.Duration) {
	b.Helper()
	if r.nodes < 3 {
		b.Fatalf("a ring of %d nodes: want 3 or more (two replicas on other nodes)", r.nodes)
	}
	e := enginetest.Start(b, r.build(b), enginetest.Options{Defaults: true})
	// This size's server, connections and heap must not weigh on the next.
	defer func() {
		e.Stop()
		e.Server.Shutdown()
	}()
	up := e.Time(events.ManagerRef{Namespace: "bench", Name: name, UID: name})
	up.Start()
	return up.Wait(30 * time.Minute)
}

// BenchmarkUpgradeEfficiency: the wall time of a whole upgrade against
// the data plane's floor (ring.floor: the configured latencies along the
// plan's critical path), at 20 and 100 volumes per node, every component on
// the product's own settings (poll, resync and stall timers). The latencies
// are in the proportions of a real cluster: a target move 1 unit, an
// instance manager start 10, a rebuild 5 (EFFICIENCY_UNIT_MS, default 100:
// 1.6 s of floor per node). EFFICIENCY_NODES (default 6) sizes the ring.
// efficiency = floor ÷ wall time, goal ≥ 0.95; overhead-ms/node is what the
// upgrade took beyond the floor, per node.
func BenchmarkUpgradeEfficiency(b *testing.B) {
	unit := time.Duration(benchenv.Int(b, "EFFICIENCY_UNIT_MS", 100)) * time.Millisecond
	nodes := benchenv.Int(b, "EFFICIENCY_NODES", 6)
	for _, perNode := range []int{20, 100} {
		b.Run(fmt.Sprintf("vols=%d", perNode), func(b *testing.B) {
			r := ring{nodes: nodes, perNode: perNode, move: unit, imStart: 10 * unit, rebuild: 5 * unit}
			for b.Loop() {
				wall, _ := r.upgrade(b, fmt.Sprintf("efficiency-%d", perNode))
				b.ReportMetric(r.floor().Seconds()/wall.Seconds(), "efficiency")
				b.ReportMetric(r.floor().Seconds(), "floor-s")
				b.ReportMetric(wall.Seconds(), "wall-s")
				b.ReportMetric(ms(wall-r.floor())/float64(nodes), "overhead-ms/node")
			}
		})
	}
}

// BenchmarkPerVolumeCost: what a volume costs the upgrade at 20 and at
// 100 attached volumes per node, with a data plane answering at once (every
// latency zero), so that the time is Switchback's own; every component on
// the product's own settings. ms/volume@N is the upgrade's wall time over
// its volumes, cpu-ms/volume@N the process's CPU time (every component runs
// in it) over them. ratio100/20 (wall) and cpu-ratio100/20: goal ≤ 1.2, a
// node with 100 volumes costs no more per volume than one with 20.
// PERVOLUME_NODES (default 10) sizes the ring.
func BenchmarkPerVolumeCost(b *testing.B) {
	nodes := benchenv.Int(b, "PERVOLUME_NODES", 10)
	for b.Loop() {
		wall, cpu := map[int]float64{}, map[int]float64{}
		for _, perNode := range []int{20, 100} {
			r := ring{nodes: nodes, perNode: perNode}
			w, c := r.upgrade(b, fmt.Sprintf("per-volume-%d", perNode))
			volumes := float64(nodes * perNode)
			wall[perNode], cpu[perNode] = ms(w)/volumes, ms(c)/volumes
			b.ReportMetric(wall[perNode], fmt.Sprintf("ms/volume@%d", perNode))
			b.ReportMetric(cpu[perNode], fmt.Sprintf("cpu-ms/volume@%d", perNode))
		}
		b.ReportMetric(wall[100]/wall[20], "ratio100/20")
		b.ReportMetric(cpu[100]/cpu[20], "cpu-ratio100/20")
	}
}
