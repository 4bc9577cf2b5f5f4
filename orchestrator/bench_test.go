package orchestrator_test

import (
	"fmt"
	"os"
	"runtime/pprof"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/internal/enginetest"
	"github.com/switchback-dev/switchback/sim"
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
	e := enginetest.Start(b, cluster, enginetest.Options{PollInterval: time.Millisecond})
	// Shut the server down now, not when the benchmark ends: a larger size
	// run next must not carry this one's server, connections and heap.
	defer func() {
		e.Stop()
		e.Server.Shutdown()
	}()
	m := ref(fmt.Sprintf("bench-%d", nodes))
	// The end is seen on the manager's subject rather than by polling its
	// state: a poll would add its own load to what is measured.
	ended := make(chan struct{}, 1)
	sub, err := e.NC.Subscribe(events.ManagerAggregate(m).Subject(), func(msg *nats.Msg) {
		switch events.Type(msg.Header.Get(events.HeaderPrefix + "type")) {
		case events.TypeUpgradeCompleted, events.TypeUpgradeFailed, events.TypeUpgradeCancelled:
			select {
			case ended <- struct{}{}:
			default:
			}
		}
	})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := e.NC.Flush(); err != nil {
		b.Fatal(err)
	}
	stopProfile := profileUpgrade(b, nodes)
	start, cpuStart := time.Now(), processCPU()
	e.Request(m)
	select {
	case <-ended:
	case <-time.After(30 * time.Minute):
		b.Fatalf("upgrade of %d nodes did not end", nodes)
	}
	elapsed, cpu = time.Since(start), processCPU()-cpuStart
	stopProfile()
	// Our subscription may see the event before the stream stored it.
	st := e.WaitManager(m, time.Minute, "a terminal state", terminal)
	if st.State != events.ManagerCompleted {
		b.Fatalf("upgrade of %d nodes ended %s: %s", nodes, st.State, st.Message)
	}
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

// processCPU is the CPU time this process used so far (user + system): the
// controller, workers, simulator and embedded NATS server all run in it.
// Unlike wall time it hardly moves when other processes load the machine.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkStepOverhead: controller overhead per node step with a
// zero-latency simulator, at 100, 500 and 1000 nodes × 20 volumes. Goal:
// < 5 ms per step, and total-time ratios near the node ratios (5 and 10:
// linear scaling). cpu-ms/step is the process's CPU time per step (every
// component runs in it), which is what scaling is about and what a loaded
// machine disturbs least. STEP_NODES (e.g. "500") runs one size only, for
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
