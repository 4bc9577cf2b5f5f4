package eventstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/eventstore"
	"github.com/switchback-dev/switchback/internal/benchenv"
)

// BenchmarkScanVsOrderedConsumer measures what Scan's own ordered reader
// (immune to stored status lookalikes) costs against nats.go's ordered
// consumer, which Scan used before, both decoding every event: SCAN_EVENTS
// events (default 200k) on one embedded server.
func BenchmarkScanVsOrderedConsumer(b *testing.B) {
	total := benchenv.Int(b, "SCAN_EVENTS", 200_000)
	ctx := context.Background()
	js, s := replayStream(b, total)
	b.ResetTimer()
	var scan, ordered time.Duration
	for b.Loop() {
		start := time.Now()
		n := 0
		err := s.Scan(ctx, eventstore.ScanOptions{}, func(events.Envelope) error { n++; return nil }, nil)
		if err != nil || n != total {
			b.Fatalf("scanned %d of %d: %v", n, total, err)
		}
		scan += time.Since(start)

		start = time.Now()
		readOrdered(b, js, total, func(m jetstream.Msg) {
			md, err := m.Metadata()
			if err != nil {
				b.Fatal(err)
			}
			if _, err := eventstore.DecodeDelivered(m.Subject(), md.Sequence.Stream, m.Headers(), m.Data()); err != nil {
				b.Fatal(err)
			}
		})
		ordered += time.Since(start)
	}
	b.ReportMetric(float64(b.N*total)/scan.Seconds(), "scan-events/s")
	b.ReportMetric(float64(b.N*total)/ordered.Seconds(), "ordered-events/s")
}
