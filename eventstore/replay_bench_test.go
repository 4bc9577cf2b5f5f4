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
	"github.com/switchback-dev/switchback/internal/benchenv"
	"github.com/switchback-dev/switchback/natsembed/natstest"
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

// BenchmarkReplay1M folds a stream of REPLAY_EVENTS events (default 1M;
// node histories of many upgrades) with Scan (decode) and a
// nodeupgrade.Folder per aggregate (the node machine's Evolve, in place), vs
// reading the same stream raw with an ordered consumer. It measures at a
// quarter of the events first, then fills the stream to all of them and
// measures again. "ratio" is fold speed over raw read speed at the full size
// ("ratio@<size>" at the quarter). "replay-peak-rss-MiB@<size>" is the peak
// resident set (the kernel's ru_maxrss, VmHWM) of a child process that runs
// replay.Run over the whole stream, as `switchback replay` does: the
// embedded server, the fill and this process's fold are not in it. The goal
// is a flat replay peak; peak-rss-MiB is this process's high-water mark,
// the server's included.
func BenchmarkReplay1M(b *testing.B) {
	total := benchenv.Int(b, "REPLAY_EVENTS", 1_000_000)
	ctx := context.Background()
	srv := natstest.Start(b)
	_, js := natstest.Connect(b, srv)
	s, err := eventstore.Open(ctx, js, eventstore.Config{Stream: "REPLAY"})
	if err != nil {
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
			fold, raw := replayRound(b, s, js, n)
			label := sizeLabel(n)
			if n == total {
				b.ReportMetric(float64(n)/fold.Seconds(), "fold-events/s")
				b.ReportMetric(float64(n)/raw.Seconds(), "raw-events/s")
				b.ReportMetric(raw.Seconds()/fold.Seconds(), "ratio")
			} else {
				b.ReportMetric(raw.Seconds()/fold.Seconds(), "ratio@"+label)
			}
			b.ReportMetric(replayPeakRSS(b, srv.URL(), n), "replay-peak-rss-MiB@"+label)
		}
	}
	b.ReportMetric(peakRSSMiB(), "peak-rss-MiB")
}

// replayRound times one fold of the stream's n events and one raw read of
// them.
func replayRound(b *testing.B, s *eventstore.Store, js jetstream.JetStream, n int) (fold, raw time.Duration) {
	rawRead := func() { readOrdered(b, js, n, func(jetstream.Msg) {}) }
	// One untimed pass first: whichever read came first would otherwise pay
	// for loading the stream's blocks into the server's cache (at 1M events
	// the fill has evicted the early ones), which made the fold look slower.
	rawRead()
	start := time.Now()
	// A Folder per aggregate: the replay owns its states, so volume
	// changes write in place instead of copying a node's volume map.
	folders := map[events.AggregateID]*nodeupgrade.Folder{}
	folded := 0
	err := s.Scan(context.Background(), eventstore.ScanOptions{}, func(e events.Envelope) error {
		f := folders[e.Aggregate]
		if f == nil {
			f = nodeupgrade.NewFolder(nodeupgrade.State{})
			folders[e.Aggregate] = f
		}
		_ = f.Apply(e)
		folded++
		return nil
	}, nil)
	if err != nil || folded != n {
		b.Fatalf("folded %d of %d: %v", folded, n, err)
	}
	fold = time.Since(start)
	start = time.Now()
	rawRead()
	return fold, time.Since(start)
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

// fillHistories publishes total events: per node upgrade, a start, state
// changes and volume changes, as a real history has. The upgrades are
// numbered from first; it returns the number after the last one written, to
// fill more later.
func fillHistories(b *testing.B, js jetstream.JetStream, first, total int) (next int) {
	b.Helper()
	published := 0
	u := first
	for ; published < total; u++ {
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
			// Stay well under the client's limit of outstanding async
			// publishes: on a loaded machine the acks lag, and the client
			// refuses more once it stalls.
			if published%1000 == 0 {
				<-js.PublishAsyncComplete()
			}
		}
	}
	<-js.PublishAsyncComplete()
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
func readOrdered(b *testing.B, js jetstream.JetStream, total int, fn func(jetstream.Msg)) {
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
