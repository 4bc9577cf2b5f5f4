package commands_test

import "testing"

func BenchmarkProf50(b *testing.B) {
	for b.Loop() {
		d, s := upgradeTime(b, 50)
		b.ReportMetric(float64(d.Microseconds())/1000/float64(s), "ms/step")
	}
}
