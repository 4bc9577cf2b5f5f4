//go:build linux

package faults

import (
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Chaos runs: CHAOS_PLANE (sim, longhorn; default both), CHAOS_RUNS
// schedules per data plane from seed CHAOS_SEED on (make chaos). Unset,
// the suite plays chaosFixedSeeds: the few CI runs.
// CHAOS_KEEP_LOGS=DIR keeps each failed run's process logs under DIR.
var chaosFixedSeeds = map[string][]uint64{
	"sim": {1, 2},
	// Seed 3 stalled the upgrade for good: after a NATS server's restart
	// the new leader's orchestrator stopped on a timeout and the leader
	// kept the lease with nothing reacting (it steps down now). Seed 91
	// left a node's replica scheduling off but recorded as restored: a
	// restoring write's answer was lost, and the step's next pass kept
	// scheduling off while it recorded the restore.
	"longhorn": {1, 2, 3, 91},
}

// TestChaos plays seeded fault schedules (see newSchedule and nemesis) on
// both data planes: each run upgrades every node while its schedule's
// faults come and go, checks what must hold at every quiet point, and ends
// with the suite's invariants (checkInvariants) and no command parked.
func TestChaos(t *testing.T) {
	planes, seeds := chaosConfig(t)
	for _, plane := range planes {
		t.Run(plane, func(t *testing.T) {
			for _, seed := range seeds[plane] {
				t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { chaosRun(t, newSchedule(seed, plane, scheduleNodes)) })
			}
		})
	}
}

// chaosPlanes are the data planes a chaos run plays on.
var chaosPlanes = []string{"sim", "longhorn"}

func chaosConfig(t *testing.T) (planes []string, seeds map[string][]uint64) {
	planes = chaosPlanes
	if p := os.Getenv("CHAOS_PLANE"); p != "" {
		require.Contains(t, planes, p, "CHAOS_PLANE")
		planes = []string{p}
	}
	runs := os.Getenv("CHAOS_RUNS")
	if runs == "" {
		return planes, chaosFixedSeeds
	}
	n, err := strconv.Atoi(runs)
	require.NoError(t, err, "CHAOS_RUNS")
	first := uint64(1)
	if s := os.Getenv("CHAOS_SEED"); s != "" {
		first, err = strconv.ParseUint(s, 10, 64)
		require.NoError(t, err, "CHAOS_SEED")
	}
	seeds = map[string][]uint64{}
	for _, p := range planes {
		for i := range n {
			seeds[p] = append(seeds[p], first+uint64(i))
		}
	}
	return planes, seeds
}

// chaosRun plays one schedule.
func chaosRun(t *testing.T, s schedule) {
	t.Logf("schedule %s", s)
	n := &nemesis{sched: s}
	t.Cleanup(func() { recordChaos(s, n, t.Failed()) })
	w := newWorld(t, "chaos: "+s.plane+" data plane", options{cluster: s.cluster, longhorn: s.plane == "longhorn", links: true, kubelet: true})
	n.w = w
	if keep := os.Getenv("CHAOS_KEEP_LOGS"); keep != "" {
		// A failed run's process logs outlive its temporary directory.
		t.Cleanup(func() {
			if !t.Failed() {
				return
			}
			dst := filepath.Join(keep, fmt.Sprintf("%s-seed%d", s.plane, s.seed))
			if err := os.CopyFS(dst, os.DirFS(w.dir)); err != nil {
				t.Logf("CHAOS_KEEP_LOGS: %v", err)
			}
		})
	}
	for i := range s.controllers {
		w.startController(fmt.Sprintf("c%d", i))
	}
	w.startWorkers()
	w.createManager()
	n.play()
	w.checkInvariants()
	h, err := w.refresh()
	require.NoError(t, err)
	n.measureRecoveries(h)
	w.mu.Lock()
	restarts := slices.Clone(w.restarts)
	w.mu.Unlock()
	for _, r := range restarts {
		t.Logf("restarted by the kubelet: %s", r)
	}
	n.restarts = len(restarts)
}

// The chaos table: what the runs injected and how fast the upgrade
// recovered, by fault kind; every failed schedule with its replay command.
var chaos struct {
	mu     sync.Mutex
	runs   map[string]int // by plane
	failed []schedule
	quiet  int
	// restarts by the kubelet (a process that exited 1, see exitedOnItsOwn)
	restarts int
	byKind   map[faultKind]*kindRow
}

type kindRow struct {
	injected, missed int
	recoveries       map[string][]time.Duration // by plane
}

// all is every plane's recoveries.
func (r *kindRow) all() []time.Duration {
	var ds []time.Duration
	for _, p := range slices.Sorted(maps.Keys(r.recoveries)) {
		ds = append(ds, r.recoveries[p]...)
	}
	return ds
}

func recordChaos(s schedule, n *nemesis, failed bool) {
	chaos.mu.Lock()
	defer chaos.mu.Unlock()
	if chaos.runs == nil {
		chaos.runs, chaos.byKind = map[string]int{}, map[faultKind]*kindRow{}
	}
	chaos.runs[s.plane]++
	chaos.quiet += n.quiet
	chaos.restarts += n.restarts
	if failed {
		chaos.failed = append(chaos.failed, s)
	}
	for _, in := range n.played {
		row := chaos.byKind[in.kind]
		if row == nil {
			row = &kindRow{recoveries: map[string][]time.Duration{}}
			chaos.byKind[in.kind] = row
		}
		switch {
		case in.missed:
			row.missed++
		default:
			row.injected++
			if in.recovered {
				row.recoveries[s.plane] = append(row.recoveries[s.plane], in.recovery)
			}
		}
	}
}

// printChaos writes the chaos table (nothing when no chaos run ran).
func printChaos(w io.Writer) bool {
	chaos.mu.Lock()
	defer chaos.mu.Unlock()
	if len(chaos.runs) == 0 {
		return false
	}
	var planes []string
	total := 0
	for _, p := range slices.Sorted(maps.Keys(chaos.runs)) {
		planes = append(planes, fmt.Sprintf("%s %d", p, chaos.runs[p]))
		total += chaos.runs[p]
	}
	fmt.Fprintf(w, "\nChaos: %d schedule(s) (%s), %d violation(s), %d quiet point(s) checked, %d kubelet restart(s)\n",
		total, strings.Join(planes, ", "), len(chaos.failed), chaos.quiet, chaos.restarts)
	fmt.Fprintf(w, "%-42s | %8s | %6s | %12s | %12s | %12s\n", "fault", "injected", "missed", "recovery p50", "recovery p99", "slowest")
	fmt.Fprintln(w, strings.Repeat("-", 108))
	for _, k := range faultKinds {
		row := chaos.byKind[k]
		if row == nil {
			continue
		}
		r := func(d time.Duration) string { return d.Round(time.Millisecond).String() }
		p50, p99, most := "-", "-", "-"
		if q, ok := quantiles(row.all()); ok {
			p50, p99, most = r(q.p50), r(q.p99), r(q.most)
		}
		fmt.Fprintf(w, "%-42s | %8d | %6d | %12s | %12s | %12s\n", k, row.injected, row.missed, p50, p99, most)
	}
	for _, s := range chaos.failed {
		fmt.Fprintf(w, "FAILED %s\n  replay: %s\n", s, s.replayCommand())
	}
	return true
}

// recoveryBench writes plane's recovery times in `go test -bench`'s
// format, for hack/benchreport to put into BENCHMARKS.md beside the
// benchmarks' figures: per fault kind and over every kind, the
// nearest-rank p50 and p99 and the slowest in milliseconds, and how many
// recoveries were measured. It writes nothing when none was measured.
func recoveryBench(w io.Writer, plane string) bool {
	chaos.mu.Lock()
	defer chaos.mu.Unlock()
	var all []time.Duration
	var lines []string
	line := func(name string, ds []time.Duration) {
		q, ok := quantiles(ds)
		if !ok {
			return
		}
		ms := func(d time.Duration) string {
			return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 0, 64)
		}
		lines = append(lines, fmt.Sprintf("BenchmarkChaosRecovery/plane=%s/fault=%s-%d\t1\t%s p50-ms\t%s p99-ms\t%s max-ms\t%d recoveries",
			plane, name, runtime.NumCPU(), ms(q.p50), ms(q.p99), ms(q.most), len(ds)))
	}
	for _, k := range faultKinds {
		if row := chaos.byKind[k]; row != nil {
			line(kindSlug(k), row.recoveries[plane])
			all = append(all, row.recoveries[plane]...)
		}
	}
	line("any", all)
	if len(lines) == 0 {
		return false
	}
	fmt.Fprintln(w, "pkg: github.com/switchback-dev/switchback/faults")
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
	return true
}

// kindSlug is k as one benchmark name's token: "kill -9 a worker" is
// "kill-9-a-worker", "NATS server stopped" "nats-server-stopped".
func kindSlug(k faultKind) string {
	return strings.Join(strings.FieldsFunc(strings.ToLower(string(k)), func(r rune) bool {
		return !('a' <= r && r <= 'z' || '0' <= r && r <= '9')
	}), "-")
}

// quantile is the nearest-rank p50 and p99 of some durations and their
// maximum.
type quantile struct{ p50, p99, most time.Duration }

// quantiles of ds; ok is false without samples.
func quantiles(ds []time.Duration) (q quantile, ok bool) {
	if len(ds) == 0 {
		return q, false
	}
	s := slices.Sorted(slices.Values(ds))
	rank := func(p float64) time.Duration {
		i := int(p*float64(len(s))+0.999999) - 1
		return s[max(0, min(i, len(s)-1))]
	}
	return quantile{rank(0.50), rank(0.99), s[len(s)-1]}, true
}
