//go:build linux

package faults

import (
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
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
// the suite plays chaosFixedSeeds on each plane: the few CI runs.
// CHAOS_KEEP_LOGS=DIR keeps each failed run's process logs under DIR.
var chaosFixedSeeds = []uint64{1, 2}

// TestChaos plays seeded fault schedules (see newSchedule and nemesis) on
// both data planes: each run upgrades every node while its schedule's
// faults come and go, checks what must hold at every quiet point, and ends
// with the suite's invariants (checkInvariants) and no command parked.
func TestChaos(t *testing.T) {
	planes, seeds := chaosConfig(t)
	for _, plane := range planes {
		t.Run(plane, func(t *testing.T) {
			for _, seed := range seeds {
				t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { chaosRun(t, newSchedule(seed, plane, scheduleNodes)) })
			}
		})
	}
}

func chaosConfig(t *testing.T) (planes []string, seeds []uint64) {
	planes = []string{"sim", "longhorn"}
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
	for i := range n {
		seeds = append(seeds, first+uint64(i))
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
	recoveries       []time.Duration
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
			row = &kindRow{}
			chaos.byKind[in.kind] = row
		}
		switch {
		case in.missed:
			row.missed++
		default:
			row.injected++
			if in.recovered {
				row.recoveries = append(row.recoveries, in.recovery)
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
		p50, p99, most := percentiles(row.recoveries)
		fmt.Fprintf(w, "%-42s | %8d | %6d | %12s | %12s | %12s\n", k, row.injected, row.missed, p50, p99, most)
	}
	for _, s := range chaos.failed {
		fmt.Fprintf(w, "FAILED %s\n  replay: %s\n", s, s.replayCommand())
	}
	return true
}

// percentiles are the nearest-rank p50 and p99 of ds and their maximum,
// rounded to milliseconds ("-" without samples).
func percentiles(ds []time.Duration) (p50, p99, most string) {
	if len(ds) == 0 {
		return "-", "-", "-"
	}
	s := slices.Sorted(slices.Values(ds))
	rank := func(p float64) time.Duration {
		i := int(p*float64(len(s))+0.999999) - 1
		return s[max(0, min(i, len(s)-1))]
	}
	r := func(d time.Duration) string { return d.Round(time.Millisecond).String() }
	return r(rank(0.50)), r(rank(0.99)), r(s[len(s)-1])
}
