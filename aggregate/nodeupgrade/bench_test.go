package nodeupgrade

import (
	"testing"
	"time"

	"github.com/switchback-dev/switchback/events"
)

// BenchmarkEvolve measures Evolve on the one kind of history that grows
// without bound for a node: a step that stalls and resumes again and again.
func BenchmarkEvolve(b *testing.B) {
	s := fold(b, upTo(events.NodeSwitchingOver)...)
	h := make([]events.Envelope, 1024)
	for i := range h {
		var d events.Event = events.NodeResumed{Step: events.NodeSwitchingOver}
		if i%2 == 0 {
			d = events.NodeStalled{Step: events.NodeSwitchingOver, Volume: "vol-a", Reason: "TargetNotReady", Message: "vol-a: target not ready"}
		}
		h[i] = envAt(agg, t0.Add(time.Duration(i)*time.Second), d)
	}
	b.ReportAllocs()
	b.ResetTimer()
	var err error
	for i := 0; i < b.N; i++ {
		if s, err = Evolve(s, h[i%len(h)]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
