package manager

import (
	"testing"
)

// BenchmarkFoldUpgrade measures folding a complete 3-node upgrade history,
// the complete-3-node scenario's.
func BenchmarkFoldUpgrade(b *testing.B) {
	h := newHarness(b)
	scenarios[0].Run(h)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := FoldSkipping(State{}, h.History...); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(h.History))/b.Elapsed().Seconds(), "events/s")
}
