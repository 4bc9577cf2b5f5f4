package commands_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/internal/enginetest"
	"github.com/switchback-dev/switchback/sim"
)

// upgradeTime runs one whole upgrade of a zero-latency simulated cluster of
// nodes × 20 volumes and returns its duration and the number of node steps.
// With the data plane answering instantly, the time is the controller's own:
// events appended, commands issued and consumed, aggregates loaded, plans made.
func upgradeTime(b *testing.B, nodes int) (time.Duration, int) {
	cluster := sim.Random(int64(nodes), sim.RandomOptions{Nodes: nodes, VolumesPerNode: 20, OnlyV2: true})
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
	defer e.Stop()
	m := ref(fmt.Sprintf("bench-%d", nodes))
	start := time.Now()
	e.Request(m)
	st := e.WaitManager(m, 30*time.Minute, "a terminal state", terminal)
	elapsed := time.Since(start)
	if st.State != events.ManagerCompleted {
		b.Fatalf("upgrade of %d nodes ended %s: %s", nodes, st.State, st.Message)
	}
	return elapsed, nodes * len(events.NodeSteps)
}

// BenchmarkStepOverhead: controller overhead per node step with a
// zero-latency simulator, at 100 and 500 nodes × 20 volumes. Goal: < 5 ms
// per step, and a 500/100 total-time ratio near 5 (linear scaling).
func BenchmarkStepOverhead(b *testing.B) {
	for b.Loop() {
		t100, s100 := upgradeTime(b, 100)
		t500, s500 := upgradeTime(b, 500)
		b.ReportMetric(float64(t100.Microseconds())/1000/float64(s100), "ms/step@100")
		b.ReportMetric(float64(t500.Microseconds())/1000/float64(s500), "ms/step@500")
		b.ReportMetric(t500.Seconds()/t100.Seconds(), "ratio500/100")
	}
}
