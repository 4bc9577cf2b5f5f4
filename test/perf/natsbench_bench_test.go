package perf_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/eventstore"
	"github.com/switchback-dev/switchback/natsembed"
	"github.com/switchback-dev/switchback/test/harness/benchenv"
	"github.com/switchback-dev/switchback/test/harness/testenv"
)

// BenchmarkNatsBenchReference runs the nats CLI's own benchmark,
// `nats bench js pub sync` (one client, synchronous publishes to a
// file-storage stream), on an embedded server configured like the store's,
// with messages the size of a typical encoded event (a volume state change:
// CloudEvents headers plus JSON data), and then our Append of such events,
// one at a time, on the same server in the same run.
//
// Metrics: nats-msgs/s (the CLI's figure), append/s (ours) and ratio =
// append/s ÷ nats-msgs/s: what the event store's envelope, per-subject
// concurrency check and Nats-Msg-Id dedup cost against the plain
// synchronous publish the server can take. NATS_BENCH_MSGS (default 20000)
// messages each. Skipped when the CLI is not at .cache/bin/nats (`make
// tools` installs natscli v0.5.0).
func BenchmarkNatsBenchReference(b *testing.B) {
	root, err := testenv.RepoRoot()
	must(b, err)
	cli := filepath.Join(root, ".cache", "bin", "nats")
	if _, err := os.Stat(cli); err != nil {
		b.Skipf("the nats CLI is not at %s (make tools installs it): %v", cli, err)
	}
	msgs := benchenv.Int(b, "NATS_BENCH_MSGS", 20000)
	ref := events.ManagerRef{Namespace: "longhorn-system", Name: "bench", UID: uid(0)}
	agg := events.NodeAggregate(ref, "node-2.example.com")
	payload := events.VolumeStateChanged{Volume: "pvc-0123456789abcdef", From: events.VolumeSwitchingOver, To: events.VolumeSwitchedOver,
		TargetNode: "node-3.example.com", Message: "target moved to node-3.example.com"}
	sample, err := events.Encode(events.New(agg, events.SourceWorker, "sample", time.Now(), payload)[0])
	must(b, err)
	size := len(sample.Data)
	for k, vs := range sample.Header {
		for _, v := range vs {
			size += len(k) + len(v) + 4 // "k: v\r\n"
		}
	}

	for b.Loop() {
		srv, err := natsembed.Start(natsembed.Options{StoreDir: b.TempDir()})
		must(b, err)
		natsRate := natsBench(b, cli, srv.ClientURL(), msgs, size)
		appendRate := appendRate(b, srv, agg, payload, msgs)
		srv.Shutdown()
		b.ReportMetric(natsRate, "nats-msgs/s")
		b.ReportMetric(appendRate, "append/s")
		b.ReportMetric(appendRate/natsRate, "ratio")
		b.ReportMetric(float64(size), "msg-bytes")
	}
}

var natsRateRE = regexp.MustCompile(`stats: ([0-9,]+) msgs/sec`)

// natsBench runs `nats bench js pub sync` and returns its msgs/sec.
func natsBench(b *testing.B, cli, url string, msgs, size int) float64 {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, cli, "--no-context", "-s", url, "bench", "js", "pub", "sync",
		"--create", "--storage", "file", "--replicas", "1", "--stream", "benchstream",
		"--msgs", strconv.Itoa(msgs), "--size", strconv.Itoa(size), "--no-progress", "sb.bench")
	out, err := cmd.CombinedOutput()
	if err != nil {
		b.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, out)
	}
	m := natsRateRE.FindSubmatch(out)
	if m == nil {
		b.Fatalf("no msgs/sec in the output of %s:\n%s", strings.Join(cmd.Args, " "), out)
	}
	rate, err := strconv.ParseFloat(strings.ReplaceAll(string(m[1]), ",", ""), 64)
	must(b, err)
	return rate
}

// appendRate appends msgs events one at a time to a store on srv and
// returns the appends per second.
func appendRate(b *testing.B, srv *natsembed.Server, agg events.AggregateID, payload events.Event, msgs int) float64 {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	nc, err := srv.Connect()
	must(b, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	must(b, err)
	s, err := eventstore.Open(ctx, js, eventstore.Config{})
	must(b, err)
	var version uint64
	start := time.Now()
	for i := range msgs {
		version, err = s.Append(ctx, agg, version, events.New(agg, events.SourceWorker, fmt.Sprintf("cmd-%d", i), time.Now(), payload)...)
		if err != nil {
			b.Fatalf("append %d: %v", i, err)
		}
	}
	return float64(msgs) / time.Since(start).Seconds()
}
