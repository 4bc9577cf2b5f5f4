package perf_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchback-dev/switchback/test/harness/proctest"

	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/switchback-dev/switchback/aggregate/manager"
	"github.com/switchback-dev/switchback/api/v1beta2"
	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/eventstore"
	"github.com/switchback-dev/switchback/kubeclient"
	"github.com/switchback-dev/switchback/natsembed"
	"github.com/switchback-dev/switchback/sim"
	"github.com/switchback-dev/switchback/sim/simremote"
	"github.com/switchback-dev/switchback/test/harness/benchenv"
	"github.com/switchback-dev/switchback/test/harness/syncbuf"
	"github.com/switchback-dev/switchback/test/harness/testenv"
	"github.com/switchback-dev/switchback/topology"
)

type managerStateT = manager.State

var nsSeq atomic.Int64

// BenchmarkControllerResume starts the real `switchback controller` process
// (built from ./cmd/switchback) against a NATS stream that holds the
// complete histories of PERF_MANAGERS (default 10000) finished upgrades, and
// the test kube-apiserver.
//
// What it models: a controller restart (a rollout, a node drain) in a
// cluster that has run many upgrades. The histories are one real completed
// upgrade (the engine over the 3-node simulated cluster) re-addressed to
// each manager. Their DataEngineUpgradeManagers no longer exist: finished
// managers get deleted, and the history stays in the stream. The previous
// controller had handled all of it, so the durable consumers (projector,
// orchestrator) are at the stream's end, as they would be after a restart.
//
// Metrics:
//   - startup-ms: from the process's start until it is ready and has resumed:
//     /readyz answers 200, /leader says it leads, and both durable consumers
//     have a pull request waiting (the projector and the orchestrator
//     consume again) with nothing pending.
//   - first-upgrade-ms: from creating a new DataEngineUpgradeManager after
//     that until its status names the node being upgraded (intake, which
//     waits for its informer's first list, prechecks, which consult the
//     upgrades in progress: the orchestrator's snapshot and the tail after
//     it, plan, schedule, projection).
//   - peak-rss-MiB: the process's VmHWM at the end; rss-MiB: its VmRSS then.
//     Goal: < 300 MiB.
//   - events: the events in the stream (99 per manager).
//
// The stream is written once per process (about 30 s for 10k managers on 2
// busy cores) into a directory under $TMPDIR, and each run starts a server on
// a copy; PERF_CONTROLLER_LOG=FILE keeps the controller's log.
func BenchmarkControllerResume(b *testing.B) {
	benchResume(b, false)
}

// benchResume runs the resume benchmark, cold or from consumers at the end.
func benchResume(b *testing.B, cold bool) {
	env := testenv.Get(b)
	n := benchenv.Int(b, "PERF_MANAGERS", 10000)
	bin := buildSwitchback(b)
	hist := completedUpgrade(b)
	for b.Loop() {
		r := resume(b, env, bin, hist, n, cold)
		b.ReportMetric(ms(r.startup), "startup-ms")
		b.ReportMetric(ms(r.firstUpgrade), "first-upgrade-ms")
		b.ReportMetric(r.peakRSS, "peak-rss-MiB")
		b.ReportMetric(r.rss, "rss-MiB")
		b.ReportMetric(float64(r.events), "events")
	}
}

type resumeResult struct {
	startup, firstUpgrade time.Duration
	peakRSS, rss          float64
	events                int
}

// BenchmarkControllerColdStart is BenchmarkControllerResume without the
// durable consumers and without the read-model snapshots: a controller that
// finds the history but no position in it (a new installation over an
// existing stream, consumers deleted to re-project) and goes through all of
// it before it has resumed (startup-ms waits for both consumers to have
// acknowledged the whole stream). A read-model snapshot (eventstore's
// "model." keys: the orchestrator's upgrades in progress) is a position too,
// the sequence its model was folded to; left in place, the orchestrator
// would fold only the tail after it and this would measure a warm read
// model under cold consumers. A new installation, a snapshot of another
// schema (a controller that changed activeSnapshotSchema) or a lost
// snapshot bucket all start without one, so the cold start deletes them;
// the aggregates' own snapshots stay, as they are caches of one aggregate
// each, not positions in the stream. It runs only when PERF_COLD=1, as it
// takes minutes at 10k managers; PERF_MANAGERS sizes it.
func BenchmarkControllerColdStart(b *testing.B) {
	if os.Getenv("PERF_COLD") != "1" {
		b.Skip("PERF_COLD=1 runs it (minutes at 10k managers)")
	}
	benchResume(b, true)
}

func resume(b *testing.B, env *testenv.Env, bin string, hist []events.Envelope, n int, cold bool) resumeResult {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	g := goldenStore(b, hist, n)
	dir := b.TempDir()
	must(b, os.CopyFS(dir, os.DirFS(g.dir)))
	srv, err := natsembed.Start(natsembed.Options{StoreDir: dir})
	must(b, err)
	defer srv.Shutdown()
	nc, err := srv.Connect()
	must(b, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	must(b, err)
	store, err := eventstore.Open(ctx, js, eventstore.Config{})
	must(b, err)
	last, err := store.LastSequence(ctx)
	must(b, err)
	if last != uint64(g.events) {
		b.Fatalf("the copied stream holds %d events, not %d", last, g.events)
	}
	if cold {
		for _, name := range []string{topology.ProjectorConsumer, topology.OrchestratorConsumer} {
			must(b, js.DeleteConsumer(ctx, store.Stream(), name))
		}
		deleteModelSnapshots(ctx, b, js)
	}
	cluster, err := sim.ThreeNodes(sim.Config{Profile: dataplane.ProfileInPlace})
	must(b, err)
	served, err := simremote.Serve(nc, topology.SimPrefix, cluster)
	must(b, err)
	defer served.Stop()

	cs, err := kubernetes.NewForConfig(env.Config)
	must(b, err)
	kc, err := kubeclient.New(env.Config)
	must(b, err)
	ns := fmt.Sprintf("perf-%d", nsSeq.Add(1))
	_, err = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	must(b, err)
	defer func() { _ = cs.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) }()

	port, err := natsembed.FreePort("127.0.0.1")
	must(b, err)
	health := "127.0.0.1:" + strconv.Itoa(port)
	var out syncbuf.Buffer
	cmd := exec.Command(bin, "controller", "--kubeconfig", env.Kubeconfig, "--nats-url", srv.ClientURL(), "--namespace", ns,
		"--data-plane", "sim", "--webhook-addr", "", "--health-addr", health, "--id", "perf-"+ns, "--log-level", "warn")
	cmd.Stdout, cmd.Stderr = &out, &out
	if path := os.Getenv("PERF_CONTROLLER_LOG"); path != "" {
		// For investigation: the controller's log, at info level, in a file;
		// appended to, so that every run of -count N is kept.
		f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		must(b, err)
		defer f.Close()
		_, _ = fmt.Fprintf(f, "=== run %s\n", ns)
		cmd.Args[len(cmd.Args)-1] = "info"
		cmd.Stdout, cmd.Stderr = f, f
	}
	started := time.Now()
	must(b, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer proctest.Stop(cmd.Process, exited)
	fail := func(format string, args ...any) {
		b.Helper()
		b.Fatalf("%s\ncontroller output:\n%s", fmt.Sprintf(format, args...), out.String())
	}

	client := &http.Client{Timeout: time.Second}
	resumed := func() bool {
		if get(client, "http://"+health+"/readyz") != "ok" || get(client, "http://"+health+"/leader") != "true" {
			return false
		}
		for _, name := range []string{topology.ProjectorConsumer, topology.OrchestratorConsumer} {
			c, err := js.Consumer(ctx, store.Stream(), name)
			if err != nil {
				return false
			}
			ci := c.CachedInfo() // fresh: js.Consumer just read it
			if ci.NumWaiting == 0 || ci.NumPending > 0 || ci.NumAckPending > 0 {
				return false
			}
		}
		return true
	}
	if !poll(ctx, exited, 5*time.Millisecond, resumed) {
		fail("the controller did not resume")
	}
	startup := time.Since(started)

	created := time.Now()
	_, err = kc.Managers(ns).Create(ctx, &v1beta2.DataEngineUpgradeManager{
		ObjectMeta: metav1.ObjectMeta{Name: "after-restart"},
		Spec:       v1beta2.DataEngineUpgradeManagerSpec{DataEngine: v1beta2.DataEngineTypeV2},
	})
	must(b, err)
	var obj *v1beta2.DataEngineUpgradeManager
	if !poll(ctx, exited, 5*time.Millisecond, func() bool {
		obj, err = kc.Managers(ns).Get(ctx, "after-restart")
		return err == nil && obj.Status.UpgradingNode != ""
	}) {
		fail("the new upgrade was not scheduled; last read %+v (error %v)", obj, err)
	}
	firstUpgrade := time.Since(created)

	peak, rss, err := memory(cmd.Process.Pid)
	if err != nil {
		fail("%v", err)
	}
	return resumeResult{startup: startup, firstUpgrade: firstUpgrade, peakRSS: peak, rss: rss, events: g.events}
}

// deleteModelSnapshots deletes every read-model snapshot (see
// BenchmarkControllerColdStart), failing if there was none: the golden
// stream holds the orchestrator's, so none means the keys moved.
func deleteModelSnapshots(ctx context.Context, b *testing.B, js jetstream.JetStream) {
	kv, err := js.KeyValue(ctx, topology.SnapshotBucket)
	must(b, err)
	keys, err := kv.ListKeysFiltered(ctx, eventstore.ModelSnapshotKeyPrefix+">")
	must(b, err)
	deleted := 0
	for k := range keys.Keys() {
		must(b, kv.Purge(ctx, k))
		deleted++
	}
	if deleted == 0 {
		b.Fatalf("no read-model snapshot (%s*) in %s to delete", eventstore.ModelSnapshotKeyPrefix, topology.SnapshotBucket)
	}
}

// drain creates a durable consumer and acknowledges everything on the
// stream with it, as a controller that handled the whole history would
// have.
func drain(ctx context.Context, js jetstream.JetStream, stream string, cfg jetstream.ConsumerConfig) error {
	c, err := js.CreateOrUpdateConsumer(ctx, stream, cfg)
	if err != nil {
		return fmt.Errorf("consumer %s: %w", cfg.Durable, err)
	}
	batch := 4096
	if cfg.MaxAckPending > 0 {
		batch = cfg.MaxAckPending
	}
	for {
		msgs, err := c.FetchNoWait(batch)
		if err != nil {
			return fmt.Errorf("consumer %s: fetch: %w", cfg.Durable, err)
		}
		got := 0
		for m := range msgs.Messages() {
			got++
			if err := m.Ack(); err != nil {
				return fmt.Errorf("consumer %s: ack: %w", cfg.Durable, err)
			}
		}
		if err := msgs.Error(); err != nil {
			return fmt.Errorf("consumer %s: fetch: %w", cfg.Durable, err)
		}
		if got > 0 {
			continue
		}
		info, err := c.Info(ctx)
		if err != nil {
			return fmt.Errorf("consumer %s: %w", cfg.Durable, err)
		}
		if info.NumPending == 0 && info.NumAckPending == 0 {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("consumer %s: %d pending: %w", cfg.Durable, info.NumPending+uint64(info.NumAckPending), ctx.Err())
		}
		time.Sleep(5 * time.Millisecond) // acks in flight: poll the consumer's state
	}
}

// poll calls cond every interval until it holds; false when ctx ends or the
// process exits first.
func poll(ctx context.Context, exited <-chan error, interval time.Duration, cond func() bool) bool {
	t := time.NewTicker(interval)
	defer t.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return false
		case <-exited:
			return false
		case <-t.C:
		}
	}
	return true
}

func get(c *http.Client, url string) string {
	resp, err := c.Get(url)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return ""
	}
	return strings.TrimSpace(string(body))
}

// memory returns a process's peak (VmHWM) and current (VmRSS) resident
// set, in MiB.
func memory(pid int) (peak, rss float64, err error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, fmt.Errorf("memory of process %d: %w", pid, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) != 3 || fields[2] != "kB" {
			continue
		}
		kb, _ := strconv.ParseFloat(fields[1], 64)
		switch fields[0] {
		case "VmHWM:":
			peak = kb / 1024
		case "VmRSS:":
			rss = kb / 1024
		}
	}
	if peak == 0 || rss == 0 {
		return 0, 0, fmt.Errorf("memory of process %d: no VmHWM/VmRSS in its status", pid)
	}
	return peak, rss, sc.Err()
}

// buildSwitchback builds the command into a temporary directory.
func buildSwitchback(b *testing.B) string {
	b.Helper()
	root, err := testenv.RepoRoot()
	must(b, err)
	bin := filepath.Join(b.TempDir(), "switchback")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/switchback")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("go build ./cmd/switchback: %v\n%s", err, out)
	}
	return bin
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func must(b *testing.B, err error) {
	b.Helper()
	if err != nil {
		b.Fatal(err)
	}
}
