package eventstore_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchback-dev/switchback/aggregate/nodeupgrade"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/eventstore"
	"github.com/switchback-dev/switchback/natsembed/natstest"
)

// BenchmarkAppendConcurrentVsRawAsync: appends to 64 distinct aggregates from
// 64 goroutines (each append still checks its aggregate's version and
// dedups) vs a raw asynchronous publish of the same bytes. "ratio" is our
// throughput over the raw one's.
func BenchmarkAppendConcurrentVsRawAsync(b *testing.B) {
	srv := natstest.Start(b)
	_, js := natstest.Connect(b, srv)
	ctx := context.Background()
	s, err := eventstore.Open(ctx, js, eventstore.Config{Stream: "BENCHC"})
	if err != nil {
		b.Fatal(err)
	}
	const writers = 64
	payload := events.VolumeStateChanged{Volume: "pvc-0123456789abcdef", From: events.VolumeSwitchingOver, To: events.VolumeSwitchedOver, TargetNode: "node-2"}
	sample, err := events.Encode(events.New(events.NodeAggregate(mgr, "n"), events.SourceWorker, "sample", t0, payload)[0])
	if err != nil {
		b.Fatal(err)
	}
	sample.Header.Del(events.MsgIDHeader)
	b.ResetTimer()
	var ours, raw time.Duration
	for b.Loop() {
		per := 200
		start := time.Now()
		var wg sync.WaitGroup
		for w := range writers {
			wg.Go(func() {
				agg := events.NodeAggregate(mgr, fmt.Sprintf("w%d-%d", w, time.Now().UnixNano()))
				var v uint64
				for i := range per {
					var err error
					if v, err = s.Append(ctx, agg, v, events.New(agg, events.SourceWorker, fmt.Sprintf("c%d", i), t0, payload)...); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		ours += time.Since(start)

		start = time.Now()
		for i := range writers * per {
			m := &nats.Msg{Subject: fmt.Sprintf("sb.evt.raw.raw.raw.node.w%d", i%writers), Header: sample.Header, Data: sample.Data}
			if _, err := js.PublishMsgAsync(m); err != nil {
				b.Fatal(err)
			}
		}
		<-js.PublishAsyncComplete()
		raw += time.Since(start)
	}
	n := float64(b.N * writers * 200)
	b.ReportMetric(n/ours.Seconds(), "appends/s")
	b.ReportMetric(n/raw.Seconds(), "raw-async/s")
	b.ReportMetric(raw.Seconds()/ours.Seconds(), "ratio")
}

// BenchmarkReplay1M folds a stream of 1M events (node histories of many
// upgrades) with the controller's fold, vs reading the same stream raw with
// an ordered consumer. "ratio" is fold speed over raw read speed; peak-rss
// is the process's high-water mark.
func BenchmarkReplay1M(b *testing.B) {
	total := 1_000_000
	if v, err := strconv.Atoi(os.Getenv("REPLAY_EVENTS")); err == nil && v > 0 {
		total = v
	}
	srv := natstest.Start(b)
	_, js := natstest.Connect(b, srv)
	ctx := context.Background()
	s, err := eventstore.Open(ctx, js, eventstore.Config{Stream: "REPLAY"})
	if err != nil {
		b.Fatal(err)
	}
	fillHistories(b, js, total)
	b.ResetTimer()
	var fold, raw time.Duration
	for b.Loop() {
		start := time.Now()
		states := map[events.AggregateID]nodeupgrade.State{}
		n := 0
		err := s.Scan(ctx, eventstore.ScanOptions{}, func(e events.Envelope) error {
			states[e.Aggregate], _ = nodeupgrade.Evolve(states[e.Aggregate], e)
			n++
			return nil
		}, nil)
		if err != nil || n != total {
			b.Fatalf("folded %d of %d: %v", n, total, err)
		}
		fold += time.Since(start)

		start = time.Now()
		st, err := js.Stream(ctx, "REPLAY")
		if err != nil {
			b.Fatal(err)
		}
		cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
		if err != nil {
			b.Fatal(err)
		}
		it, err := cons.Messages(jetstream.PullMaxMessages(1024))
		if err != nil {
			b.Fatal(err)
		}
		for range total {
			if _, err := it.Next(); err != nil {
				b.Fatal(err)
			}
		}
		it.Stop()
		raw += time.Since(start)
	}
	b.ReportMetric(float64(b.N*total)/fold.Seconds(), "fold-events/s")
	b.ReportMetric(float64(b.N*total)/raw.Seconds(), "raw-events/s")
	b.ReportMetric(raw.Seconds()/fold.Seconds(), "ratio")
	b.ReportMetric(peakRSSMiB(), "peak-rss-MiB")
}

// fillHistories publishes total events: per node upgrade, a start, state
// changes and volume changes, as a real history has.
func fillHistories(b *testing.B, js jetstream.JetStream, total int) {
	b.Helper()
	published := 0
	for u := 0; published < total; u++ {
		ref := events.ManagerRef{Namespace: "ns", Name: "m", UID: fmt.Sprintf("u%d", u)}
		agg := events.NodeAggregate(ref, "n1")
		data := []events.Event{events.NodeUpgradeStarted{Node: "n1", DataEngine: "v2", InstanceManagerImage: "im:2", Attempt: 1}}
		for _, st := range events.NodeSteps {
			if next, ok := st.Next(); ok && next != events.NodeCompleted {
				data = append(data, events.NodeStateChanged{From: st, To: next})
			}
		}
		for v := range 20 {
			data = append(data, events.VolumeStateChanged{Volume: fmt.Sprintf("pvc-%d", v), To: events.VolumePending})
		}
		for i, env := range events.New(agg, events.SourceWorker, "fill", t0, data...) {
			if published == total {
				break
			}
			m, err := events.Encode(env)
			if err != nil {
				b.Fatal(err)
			}
			m.Header.Set(events.MsgIDHeader, fmt.Sprintf("%d-%d", u, i))
			if _, err := js.PublishMsgAsync(m); err != nil {
				b.Fatal(err)
			}
			published++
		}
		if u%200 == 0 {
			<-js.PublishAsyncComplete()
		}
	}
	<-js.PublishAsyncComplete()
}

// peakRSSMiB reads the process's resident high-water mark (Linux).
func peakRSSMiB() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}
