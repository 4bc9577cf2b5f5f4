package aggregate_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/switchback-dev/switchback/aggregate/internal/history"
	"github.com/switchback-dev/switchback/aggregate/manager"
	"github.com/switchback-dev/switchback/aggregate/nodeupgrade"
	"github.com/switchback-dev/switchback/events"
)

// BenchmarkFold1M folds one million recorded events, a mix of complete
// manager and node histories for many upgrades, the way replay does: each
// envelope routed to its aggregate's state. Reported: events/s.
func BenchmarkFold1M(b *testing.B) {
	load := func(path string) []events.Envelope {
		data, err := os.ReadFile(path)
		if err != nil {
			b.Fatal(err)
		}
		h, err := history.Unmarshal(data)
		if err != nil {
			b.Fatal(err)
		}
		return h
	}
	mgrHist := load("manager/testdata/complete-3-node.history.json")
	nodeHist := load("nodeupgrade/testdata/complete.history.json")
	const total = 1_000_000
	all := make([]events.Envelope, 0, total)
	for i := 0; len(all) < total; i++ {
		// Each copy is another upgrade: same shape, its own aggregates.
		for _, h := range [][]events.Envelope{mgrHist, nodeHist} {
			for _, e := range h {
				e.Aggregate.Manager.UID = fmt.Sprintf("%s-%d", e.Aggregate.Manager.UID, i)
				if d, ok := e.Data.(events.UpgradeRequested); ok {
					d.UID = e.Aggregate.Manager.UID
					e.Data = d
				}
				all = append(all, e)
			}
		}
	}
	all = all[:total]
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		managers := map[events.AggregateID]manager.State{}
		nodes := map[events.AggregateID]nodeupgrade.State{}
		refused := 0
		for _, e := range all {
			var err error
			if e.Aggregate.IsNode() {
				nodes[e.Aggregate], err = nodeupgrade.Evolve(nodes[e.Aggregate], e)
			} else {
				managers[e.Aggregate], err = manager.Evolve(managers[e.Aggregate], e)
			}
			if err != nil {
				refused++
			}
		}
		if refused > 1 {
			b.Fatalf("%d events refused", refused)
		}
	}
	b.ReportMetric(float64(total)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
