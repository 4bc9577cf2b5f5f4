package orchestrator_test

import (
	"fmt"
	"os"
	"runtime/pprof"
	"strconv"
	"testing"
	"time"

	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/sim"
	"github.com/switchback-dev/switchback/test/harness/enginetest"
)

// upgradeTime runs one whole upgrade of a zero-latency simulated cluster of
// nodes × 20 volumes and returns its duration and the number of node steps.
// With the data plane answering instantly, the time is the controller's own:
// events appended, commands issued and consumed, aggregates loaded, plans made.
func upgradeTime(b *testing.B, nodes int) (elapsed, cpu time.Duration, steps int) {
	cluster := sim.Random(int64(nodes), sim.RandomOptions{Nodes: nodes, VolumesPerNode: 20, OnlyV2: true, Config: sim.Config{Profile: dataplane.ProfileInPlace}})
	vols, err := cluster.Volumes(b.Context())
	if err != nil {
		b.Fatal(err)
	}
	for _, v := range vols {
		if v.Attached() && len(v.Replicas) < 2 {
			if err := cluster.DetachVolume(v.Name); err != nil {
				b.Fatal(err)
			}
		}
	}
	e := enginetest.Start(b, cluster, enginetest.Options{Defaults: true})
	// Shut the server down now, not when the benchmark ends: a larger size
	// run next must not carry this one's server, connections and heap.
	defer func() {
		e.Stop()
		e.Server.Shutdown()
	}()
	up := e.Time(ref(fmt.Sprintf("bench-%d", nodes)))
	stopProfile := profileUpgrade(b, nodes)
	up.Start()
	elapsed, cpu = up.Wait(30 * time.Minute)
	stopProfile()
	return elapsed, cpu, nodes * len(events.NodeSteps)
}

// profileUpgrade writes a CPU profile of the upgrade alone (not the set-up:
// building the cluster, starting a worker per node) to
// $STEP_CPUPROFILE.<nodes> when STEP_CPUPROFILE is set; go test's
// -cpuprofile would mix both.
func profileUpgrade(b *testing.B, nodes int) (stop func()) {
	path := os.Getenv("STEP_CPUPROFILE")
	if path == "" {
		return func() {}
	}
	f, err := os.Create(fmt.Sprintf("%s.%d", path, nodes))
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			b.Error(err)
		}
	}
}

// BenchmarkStepOverhead: controller overhead per node step with a
// zero-latency simulator, at 100, 500 and 1000 nodes × 20 volumes. Goal:
// < 5 ms per step, and total-time ratios near the node ratios (5 and 10:
// linear scaling). cpu-ms/step is the process's CPU time per step (every
// component runs in it), which is what scaling is about and what a loaded
// machine disturbs least. The controller and workers run with the product's
// defaults (enginetest.Options.Defaults). STEP_NODES (e.g. "500") runs one size only, for
// profiling.
func BenchmarkStepOverhead(b *testing.B) {
	sizes := []int{100, 500, 1000}
	if v, err := strconv.Atoi(os.Getenv("STEP_NODES")); err == nil && v > 0 {
		sizes = []int{v}
	}
	for b.Loop() {
		wall := make(map[int]time.Duration, len(sizes))
		cpu := make(map[int]time.Duration, len(sizes))
		for _, n := range sizes {
			w, c, steps := upgradeTime(b, n)
			wall[n], cpu[n] = w, c
			b.ReportMetric(float64(w.Microseconds())/1000/float64(steps), fmt.Sprintf("ms/step@%d", n))
			b.ReportMetric(float64(c.Microseconds())/1000/float64(steps), fmt.Sprintf("cpu-ms/step@%d", n))
		}
		base := sizes[0]
		for _, n := range sizes[1:] {
			b.ReportMetric(wall[n].Seconds()/wall[base].Seconds(), fmt.Sprintf("ratio%d/%d", n, base))
			b.ReportMetric(cpu[n].Seconds()/cpu[base].Seconds(), fmt.Sprintf("cpu-ratio%d/%d", n, base))
		}
	}
}
