package perf_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchback-dev/switchback/commands"
	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/eventstore"
	"github.com/switchback-dev/switchback/natsembed"
	"github.com/switchback-dev/switchback/nodequeue"
	"github.com/switchback-dev/switchback/orchestrator"
	"github.com/switchback-dev/switchback/sim"
	"github.com/switchback-dev/switchback/topology"
)

// golden is a NATS store directory holding the stream of n finished
// managers, with the controller's durable consumers at its end. Writing it
// takes long (a million events for 10k managers), so it is written once per
// process and each run starts a server on a copy.
var golden goldenStream

type goldenStream struct {
	once   sync.Once
	dir    string
	events int
}

// goldenPrefix names the golden directories, followed by the pid of the
// process that owns one.
const goldenPrefix = "switchback-perf-golden-"

func goldenStore(b *testing.B, hist []events.Envelope, n int) *goldenStream {
	b.Helper()
	golden.once.Do(func() {
		removeStaleGolden()
		dir, err := os.MkdirTemp("", goldenPrefix+strconv.Itoa(os.Getpid())+"-")
		must(b, err)
		start := time.Now()
		golden.events = writeGolden(b, dir, hist, n)
		golden.dir = dir
		b.Logf("stream of %d finished managers (%d events) written in %s", n, golden.events, time.Since(start).Round(time.Millisecond))
	})
	if golden.dir == "" {
		b.Fatal("no golden store (writing it failed earlier)")
	}
	return &golden
}

func writeGolden(b *testing.B, dir string, hist []events.Envelope, n int) int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	srv, err := natsembed.Start(natsembed.Options{StoreDir: dir})
	must(b, err)
	defer srv.Shutdown()
	nc, err := srv.Connect()
	must(b, err)
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096))
	must(b, err)
	store, err := eventstore.Open(ctx, js, eventstore.Config{})
	must(b, err)
	queue, err := nodequeue.Open(ctx, js, nodequeue.Config{})
	must(b, err)
	count := loadFinished(ctx, b, js, hist, "perf-done", n)
	last, err := store.LastSequence(ctx)
	must(b, err)
	if last != uint64(count) {
		b.Fatalf("stream holds %d events, %d published", last, count)
	}
	// The copies must be histories the aggregates accept, not just bytes.
	for _, i := range []int{0, n - 1} {
		ref := events.ManagerRef{Namespace: "perf-done", Name: fmt.Sprintf("done-%05d", i), UID: uid(i)}
		l, err := commands.New(commands.Config{Store: store}).Managers.Load(ctx, events.ManagerAggregate(ref))
		must(b, err)
		if l.State.State != events.ManagerCompleted || len(l.State.Plan) == 0 {
			b.Fatalf("manager %s folds to %q (plan %v), not a completed upgrade", ref, l.State.State, l.State.Plan)
		}
	}
	// The previous controller's consumers, at the end of the stream. Only
	// what cannot be updated must match the controller's own configuration
	// (it updates the rest, such as MaxAckPending, when it starts).
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for _, cfg := range []jetstream.ConsumerConfig{
		{Durable: topology.ProjectorConsumer, FilterSubject: events.StreamSubjects,
			DeliverPolicy: jetstream.DeliverAllPolicy, AckPolicy: jetstream.AckExplicitPolicy, MaxDeliver: -1},
		{Durable: topology.OrchestratorConsumer,
			DeliverPolicy: jetstream.DeliverAllPolicy, AckPolicy: jetstream.AckExplicitPolicy, MaxAckPending: 4096},
	} {
		wg.Go(func() { errs <- drain(ctx, js, store.Stream(), cfg) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		must(b, err)
	}
	// The previous controller's read model of the upgrades in progress,
	// saved as its orchestrator saves it: a restart folds only what the
	// stream holds after it.
	cluster, err := sim.ThreeNodes(sim.Config{Profile: dataplane.ProfileInPlace})
	must(b, err)
	o, err := orchestrator.New(orchestrator.Config{Store: store, Queue: queue, Cluster: cluster})
	must(b, err)
	must(b, o.WarmUp(ctx))
	return count
}

// removeStaleGolden removes the golden directories of processes that are
// gone (the test binary exits without a hook to remove its own).
func removeStaleGolden() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), goldenPrefix+"*"))
	for _, d := range dirs {
		pid, _, _ := strings.Cut(strings.TrimPrefix(filepath.Base(d), goldenPrefix), "-")
		if _, err := os.Stat("/proc/" + pid); os.IsNotExist(err) {
			_ = os.RemoveAll(d)
		}
	}
}
