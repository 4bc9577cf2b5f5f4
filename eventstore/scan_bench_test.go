package eventstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/eventstore"
	"github.com/switchback-dev/switchback/test/harness/benchenv"
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

// BenchmarkDirectScanVsScan measures a scan by direct batch gets
// (Config.DirectScans: the reader alone in its account, which has no
// consumer API) against Scan through its own consumer, both decoding every
// event: SCAN_EVENTS events (default 200k) on one embedded server.
func BenchmarkDirectScanVsScan(b *testing.B) {
	total := benchenv.Int(b, "SCAN_EVENTS", 200_000)
	ctx := context.Background()
	js, s := replayStream(b, total)
	direct, err := eventstore.Open(ctx, js, eventstore.Config{Stream: "REPLAY", DirectScans: true})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	var byDirect, byConsumer time.Duration
	for b.Loop() {
		for _, r := range []struct {
			s   *eventstore.Store
			sum *time.Duration
		}{{direct, &byDirect}, {s, &byConsumer}} {
			start := time.Now()
			n := 0
			err := r.s.Scan(ctx, eventstore.ScanOptions{}, func(events.Envelope) error { n++; return nil }, nil)
			if err != nil || n != total {
				b.Fatalf("scanned %d of %d: %v", n, total, err)
			}
			*r.sum += time.Since(start)
		}
	}
	b.ReportMetric(float64(b.N*total)/byDirect.Seconds(), "direct-events/s")
	b.ReportMetric(float64(b.N*total)/byConsumer.Seconds(), "scan-events/s")
	b.ReportMetric(byConsumer.Seconds()/byDirect.Seconds(), "ratio")
}
