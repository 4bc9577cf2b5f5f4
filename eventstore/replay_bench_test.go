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

	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/eventstore"
	"github.com/switchback-dev/switchback/natsembed/natstest"
	"github.com/switchback-dev/switchback/test/harness/benchenv"
	"github.com/switchback-dev/switchback/test/harness/historytest"
)

// BenchmarkAppendConcurrentVsRawAsync: batched appends to 64 distinct
// aggregates (AppendBatch: each event still checks its aggregate's version
// and carries its Nats-Msg-Id), 200 rounds, each round waiting for its
// answers because the next append to an aggregate needs the version the last
// one got; vs the same rounds of raw asynchronous publishes of the same bytes
// (the messages AppendBatch sends, built before each round's clock starts):
// "ratio", goal >= 0.8. "ratio-vs-unchecked" compares with raw publishes
// without the Nats-Msg-Id and expected-sequence headers: the difference is
// JetStream's server-side checks. "sync-appends/s" is 64 goroutines doing
// plain Append, for comparison.
func BenchmarkAppendConcurrentVsRawAsync(b *testing.B) {
	srv := natstest.Start(b)
	_, js := natstest.Connect(b, srv)
	ctx := context.Background()
	s, err := eventstore.Open(ctx, js, eventstore.Config{Stream: "BENCHC"})
	if err != nil {
		b.Fatal(err)
	}
	const writers, rounds = 64, 200
	payload := events.VolumeStateChanged{Volume: "pvc-0123456789abcdef", From: events.VolumeSwitchingOver, To: events.VolumeSwitchedOver, TargetNode: "node-2"}
	// rawRound publishes msgs asynchronously, waits for every answer, records
	// each stored sequence in last, and returns how long that took.
	rawRound := func(msgs []*nats.Msg, last []uint64) time.Duration {
		start := time.Now()
		futs := make([]jetstream.PubAckFuture, len(msgs))
		for w, m := range msgs {
			if futs[w], err = js.PublishMsgAsync(m); err != nil {
				b.Fatal(err)
			}
		}
		for w, f := range futs {
			select {
			case ack := <-f.Ok():
				last[w] = ack.Sequence
			case err := <-f.Err():
				b.Fatal(err)
			}
		}
		return time.Since(start)
	}
	var ours, raw, rawUnchecked, syncConc time.Duration
	for it := 0; b.Loop(); it++ {
		aggs := make([]events.AggregateID, writers)
		versions := make([]uint64, writers)
		for w := range aggs {
			aggs[w] = events.NodeAggregate(mgr, fmt.Sprintf("a%d-%d", it, w))
		}
		start := time.Now()
		for r := range rounds {
			reqs := make([]eventstore.AppendRequest, writers)
			for w, agg := range aggs {
				reqs[w] = eventstore.AppendRequest{Aggregate: agg, Expected: versions[w],
					Events: events.New(agg, events.SourceWorker, fmt.Sprintf("c%d", r), t0, payload)}
			}
			for w, res := range s.AppendBatch(ctx, reqs) {
				if res.Err != nil {
					b.Fatal(res.Err)
				}
				versions[w] = res.Version
			}
		}
		ours += time.Since(start)

		last := make([]uint64, writers)
		msgs := make([]*nats.Msg, writers)
		for r := range rounds {
			for w := range msgs {
				msgs[w] = appendedBytes(b, events.NodeAggregate(mgr, fmt.Sprintf("raw%d-%d", it, w)), fmt.Sprintf("c%d", r), payload, &last[w])
			}
			raw += rawRound(msgs, last)
		}

		for w := range msgs {
			msgs[w] = appendedBytes(b, events.NodeAggregate(mgr, fmt.Sprintf("unchecked%d-%d", it, w)), "c", payload, nil)
		}
		for range rounds {
			rawUnchecked += rawRound(msgs, last)
		}

		start = time.Now()
		var wg sync.WaitGroup
		for w := range writers {
			wg.Go(func() {
				agg := events.NodeAggregate(mgr, fmt.Sprintf("s%d-%d", it, w))
				var v uint64
				for i := range rounds {
					var err error
					if v, err = s.Append(ctx, agg, v, events.New(agg, events.SourceWorker, fmt.Sprintf("c%d", i), t0, payload)...); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		syncConc += time.Since(start)
	}
	n := float64(b.N * writers * rounds)
	b.ReportMetric(n/ours.Seconds(), "appends/s")
	b.ReportMetric(n/raw.Seconds(), "raw-async/s")
	b.ReportMetric(n/rawUnchecked.Seconds(), "raw-async-unchecked/s")
	b.ReportMetric(n/syncConc.Seconds(), "sync-appends/s")
	b.ReportMetric(raw.Seconds()/ours.Seconds(), "ratio")
	b.ReportMetric(rawUnchecked.Seconds()/ours.Seconds(), "ratio-vs-unchecked")
}

// BenchmarkReplay1M replays a stream of REPLAY_EVENTS events (default 1M;
// whole upgrades of one node with 20 volumes, 135 events each) as
// `switchback replay` does, in a process of its own as the command runs
// (TestReplayChild): replay.Stream decodes
// and folds, hands out the finished upgrades as it goes, and their table is
// printed (here to nowhere). It measures at a quarter of the events first,
// then fills the stream to all of them and measures again. "ratio" is the
// replay's speed over a raw read of the same stream with nats.go's ordered
// consumer in the same child process, the median of timedRounds rounds of
// one pass each ("ratio@<size>" at the quarter); the events/s are the
// median passes' (see TestReplayChild). In this process the
// embedded server's heap, which the command never has, would be marked by
// every collection the decoding causes.
// "replay-peak-rss-MiB@<size>" is the peak resident set (the kernel's
// VmHWM) of a child that only replays. The goal is a flat replay peak;
// peak-rss-MiB is this process's high-water mark, the server's included.
func BenchmarkReplay1M(b *testing.B) {
	total := benchenv.Int(b, "REPLAY_EVENTS", 1_000_000)
	ctx := context.Background()
	srv := natstest.Start(b)
	_, js := natstest.Connect(b, srv)
	if _, err := eventstore.Open(ctx, js, eventstore.Config{Stream: "REPLAY"}); err != nil {
		b.Fatal(err)
	}
	sizes := []int{total / 4, total}
	filled, next := 0, 0
	for b.Loop() {
		for _, n := range sizes {
			if n > filled {
				b.StopTimer()
				next = fillHistories(b, js, next, n-filled)
				filled = n
				b.StartTimer()
			}
			timed := replayChild(b, srv.URL(), n, childTimed)
			fold, raw, ratio := timed[foldSecondsMarker], timed[rawSecondsMarker], timed[ratioMarker]
			label := sizeLabel(n)
			if n == total {
				b.ReportMetric(float64(n)/fold, "fold-events/s")
				b.ReportMetric(float64(n)/raw, "raw-events/s")
				b.ReportMetric(ratio, "ratio")
			} else {
				b.ReportMetric(ratio, "ratio@"+label)
			}
			b.ReportMetric(replayChild(b, srv.URL(), n, childPeak)[replayPeakMarker], "replay-peak-rss-MiB@"+label)
		}
	}
	b.ReportMetric(peakRSSMiB(), "peak-rss-MiB")
}

// sizeLabel writes n as metric names do: 250k, 1M.
func sizeLabel(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return strconv.Itoa(n/1_000_000) + "M"
	case n >= 1000 && n%1000 == 0:
		return strconv.Itoa(n/1000) + "k"
	}
	return strconv.Itoa(n)
}

// fillHistories publishes total events of whole upgrades, numbered from
// first, each on one node with 20 volumes, as a real history has them
// (historytest.Completed); it returns the number after the last one
// written, to fill more later. The last upgrade may be cut short.
func fillHistories(b *testing.B, js jetstream.JetStream, first, total int) (next int) {
	b.Helper()
	var envs []events.Envelope
	u := first
	for ; len(envs) < total; u++ {
		envs = append(envs, historytest.Completed(events.ManagerRef{Namespace: "ns", Name: "m", UID: fmt.Sprintf("u%d", u)}, "n1", 20)...)
	}
	historytest.Publish(b, js, fmt.Sprintf("fill%d", first), envs[:total])
	return u
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

// replayStream starts a server holding total events of realistic histories
// in the stream REPLAY.
func replayStream(b *testing.B, total int) (jetstream.JetStream, *eventstore.Store) {
	_, js := natstest.Connect(b, natstest.Start(b))
	s, err := eventstore.Open(context.Background(), js, eventstore.Config{Stream: "REPLAY"})
	if err != nil {
		b.Fatal(err)
	}
	fillHistories(b, js, 0, total)
	return js, s
}

// readOrdered reads the first total messages of REPLAY with a nats.go
// ordered consumer: the raw baseline the fold and Scan are compared with.
func readOrdered(b testing.TB, js jetstream.JetStream, total int, fn func(jetstream.Msg)) {
	ctx := context.Background()
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
	defer it.Stop()
	for range total {
		m, err := it.Next()
		if err != nil {
			b.Fatal(err)
		}
		fn(m)
	}
}
