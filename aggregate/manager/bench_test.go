package manager

import (
	"testing"

	"github.com/switchback-dev/switchback/events"
)

// BenchmarkFoldUpgrade measures folding a complete 3-node upgrade history.
func BenchmarkFoldUpgrade(b *testing.B) {
	h := newHarness(b)
	h.do(cmdRequest)
	h.do(RecordPrechecks{ID: "pre", Results: allPassed, InstanceManagerImage: image, Order: plan3})
	h.do(ScheduleNext{ID: "next"})
	for _, n := range plan3 {
		h.do(RecordNodeOutcome{ID: "out-" + n, Node: n, State: events.NodeCompleted})
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := Fold(State{}, h.history...); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(h.history))/b.Elapsed().Seconds(), "events/s")
}
