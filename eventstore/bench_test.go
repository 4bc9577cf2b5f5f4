package eventstore_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/events/fastcodec"
	"github.com/switchback-dev/switchback/eventstore"
	"github.com/switchback-dev/switchback/natsembed/natstest"
)

// BenchmarkAppendVsRawPublish measures our Append (encode the CloudEvent,
// publish it with its Nats-Msg-Id and expected last subject sequence, map the
// answer) against a raw jetstream publish of the same bytes: the very
// message Append sends, built before the clock starts, so the server does the
// same work. "ratio" is raw time / our time: 1.0 means no overhead (goal ≥
// 0.8). "ratio-vs-unchecked" compares with a publish without those two
// headers: the difference to "ratio" is what JetStream's deduplication and
// sequence check cost on the server, which the design requires.
func BenchmarkAppendVsRawPublish(b *testing.B) {
	srv := natstest.Start(b)
	_, js := natstest.Connect(b, srv)
	ctx := context.Background()
	s, err := eventstore.Open(ctx, js, eventstore.Config{Stream: "BENCH"})
	if err != nil {
		b.Fatal(err)
	}
	agg := events.NodeAggregate(mgr, "bench-node")
	rawAgg := events.NodeAggregate(mgr, "bench-raw")
	payload := events.VolumeStateChanged{Volume: "pvc-0123456789abcdef", From: events.VolumeSwitchingOver, To: events.VolumeSwitchedOver, TargetNode: "node-2.example.com", Message: "target moved"}
	unchecked := appendedBytes(b, events.NodeAggregate(mgr, "bench-unchecked"), "sample", payload, nil)

	var ours, raw, rawUnchecked time.Duration
	var version, rawVersion uint64
	for i := 0; b.Loop(); i++ {
		start := time.Now()
		env := events.New(agg, events.SourceWorker, fmt.Sprintf("cmd-%d", i), t0, payload)
		version, err = s.Append(ctx, agg, version, env...)
		if err != nil {
			b.Fatal(err)
		}
		ours += time.Since(start)

		m := appendedBytes(b, rawAgg, fmt.Sprintf("cmd-%d", i), payload, &rawVersion)
		start = time.Now()
		ack, err := js.PublishMsg(ctx, m)
		if err != nil {
			b.Fatal(err)
		}
		rawVersion = ack.Sequence
		raw += time.Since(start)

		start = time.Now()
		if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: unchecked.Subject, Header: unchecked.Header, Data: unchecked.Data}); err != nil {
			b.Fatal(err)
		}
		rawUnchecked += time.Since(start)
	}
	b.ReportMetric(float64(ours.Nanoseconds())/float64(b.N), "append-ns/op")
	b.ReportMetric(float64(raw.Nanoseconds())/float64(b.N), "raw-ns/op")
	b.ReportMetric(float64(rawUnchecked.Nanoseconds())/float64(b.N), "raw-unchecked-ns/op")
	b.ReportMetric(float64(raw)/float64(ours), "ratio")
	b.ReportMetric(float64(rawUnchecked)/float64(ours), "ratio-vs-unchecked")
}

// appendedBytes is the message Append sends for one event of payload on agg:
// with its Nats-Msg-Id and, when expected is not nil, the expected last
// subject sequence; without either when expected is nil (an unchecked
// publish).
func appendedBytes(b *testing.B, agg events.AggregateID, cmd string, payload events.Event, expected *uint64) *nats.Msg {
	m, err := events.Encode(events.New(agg, events.SourceWorker, cmd, t0, payload)[0])
	if err != nil {
		b.Fatal(err)
	}
	if expected == nil {
		m.Header.Del(events.MsgIDHeader)
		return m
	}
	m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(*expected, 10))
	return m
}

// BenchmarkLoad10k loads an aggregate with a 10,000-event history from the
// stream alone and from a snapshot plus a 10-event tail (goal: ≥ 10x faster).
func BenchmarkLoad10k(b *testing.B) {
	srv := natstest.Start(b)
	_, js := natstest.Connect(b, srv)
	ctx := context.Background()
	s, err := eventstore.Open(ctx, js, eventstore.Config{})
	if err != nil {
		b.Fatal(err)
	}
	agg := events.NodeAggregate(mgr, "long-history")
	fill(b, ctx, s, js, agg, 10_000)
	snap := &eventstore.Snapshotting{Schema: "counter/v1", Every: 1}
	if _, err := eventstore.LoadState(ctx, s, agg, counter{}, foldCounter, snap); err != nil {
		b.Fatal(err)
	}
	fill(b, ctx, s, js, agg, 10)
	b.Run("stream-only", func(b *testing.B) {
		for b.Loop() {
			l, err := eventstore.LoadState(ctx, s, agg, counter{}, foldCounter, nil)
			if err != nil || l.State.N != 10_010 {
				b.Fatal(err, l.State.N)
			}
		}
	})
	b.Run("snapshot+tail", func(b *testing.B) {
		read := &eventstore.Snapshotting{Schema: "counter/v1"}
		for b.Loop() {
			l, err := eventstore.LoadState(ctx, s, agg, counter{}, foldCounter, read)
			if err != nil || l.State.N != 10_010 || l.Folded != 10 {
				b.Fatal(err, l.State.N, l.Folded)
			}
		}
	})
}

// fill appends n events to agg quickly (async publish), bypassing Append's
// per-event round trip; only the history matters here.
func fill(b *testing.B, ctx context.Context, s *eventstore.Store, js jetstream.JetStream, agg events.AggregateID, n int) {
	b.Helper()
	base, _ := s.LastSequence(ctx)
	for i := range n {
		m, err := fastcodec.Encode(resumed(agg, fmt.Sprintf("fill-%d-%d", base, i)))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := js.PublishMsgAsync(m); err != nil {
			b.Fatal(err)
		}
		if (i+1)%1000 == 0 { // under the client's limit of outstanding publishes
			<-js.PublishAsyncComplete()
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(time.Minute):
		b.Fatal("async publish did not complete")
	}
}
