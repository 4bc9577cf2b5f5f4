package perf_test

import (
	"bufio"
	"bytes"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchback-dev/switchback/test/harness/benchenv"
)

// BenchmarkScale: `switchback demo` (built from ./cmd/switchback) run
// as a process of its own at SCALE_NODES_SMALL (default 50) and
// SCALE_NODES_LARGE (default 200) nodes × 20 volumes per node, with a 1 ms
// simulated latency. The demo runs the whole system in that one process:
// the embedded NATS server, the controller (orchestrator, intake,
// projector onto the in-memory API), one worker per node and the simulated
// cluster. It runs on the in-place profile, where every node is upgraded
// live, and with the product's stall timer (--stall-after 2m, the worker's
// default) instead of the demo's 1 s: no step waits on a user.
//
// Metrics:
//   - upgrade-s@N: from the upgrade's request to its completion, as the
//     events' own times say (the first and last lines the demo prints);
//   - ratio-large/small: those times' ratio; linear is the node ratio (4
//     at the defaults), goal ≤ 1.1 × linear (4.4);
//   - peak-rss-MiB@N: the demo process's peak resident set (the kernel's
//     ru_maxrss once it exited): everything above, in one process. Goal:
//     < 1024 MiB at 200 nodes × 4000 volumes.
func BenchmarkScale(b *testing.B) {
	small := benchenv.Int(b, "SCALE_NODES_SMALL", 50)
	large := benchenv.Int(b, "SCALE_NODES_LARGE", 200)
	bin := buildSwitchback(b)
	for b.Loop() {
		took := map[int]time.Duration{}
		for _, nodes := range []int{small, large} {
			d, peak := demoRun(b, bin, nodes)
			took[nodes] = d
			b.ReportMetric(d.Seconds(), fmt.Sprintf("upgrade-s@%d", nodes))
			b.ReportMetric(peak, fmt.Sprintf("peak-rss-MiB@%d", nodes))
		}
		b.ReportMetric(took[large].Seconds()/took[small].Seconds(), "ratio-large/small")
		b.ReportMetric(float64(large)/float64(small), "linear-ratio")
	}
}

// demoRun runs the demo over nodes × 20 volumes and returns the upgrade's
// duration and the process's peak RSS in MiB.
func demoRun(b *testing.B, bin string, nodes int) (time.Duration, float64) {
	b.Helper()
	cmd := exec.Command(bin, "demo", "--nodes", strconv.Itoa(nodes), "--volumes", strconv.Itoa(20*nodes),
		"--latency", "1ms", "--longhorn-profile", "in-place", "--stall-after", "2m",
		"--timeout", "30m", "--data-dir", b.TempDir())
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		b.Fatalf("switchback demo --nodes %d: %v\n%s\n%s", nodes, err, tail(stdout.String()), stderr.String())
	}
	first, last, err := eventSpan(stdout.String())
	if err != nil {
		b.Fatalf("switchback demo --nodes %d: %v\n%s", nodes, err, tail(stdout.String()))
	}
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		b.Fatal("no resource usage for the demo process")
	}
	return last.Sub(first), float64(ru.Maxrss) / 1024 // ru_maxrss is in KiB on Linux
}

// eventSpan reads the times of the first event the demo printed (the
// request) and of the upgrade's completion. Event lines are "seq date
// time Z node what…" (replay.Describe).
func eventSpan(out string) (first, last time.Time, err error) {
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 5 || f[3] != "Z" {
			continue
		}
		if _, err := strconv.Atoi(f[0]); err != nil {
			continue
		}
		at, err := time.Parse("2006-01-02 15:04:05.000", f[1]+" "+f[2])
		if err != nil {
			continue
		}
		if first.IsZero() {
			first = at
		}
		// The manager's own events have no node ("-"); a node's completion
		// says "node upgrade completed".
		switch what := strings.Join(f[5:], " "); {
		case f[4] != "-":
		case strings.HasPrefix(what, "upgrade completed"):
			return first, at, nil
		case strings.HasPrefix(what, "upgrade FAILED"), strings.HasPrefix(what, "upgrade cancelled"):
			return first, at, fmt.Errorf("the upgrade did not complete: %s", what)
		}
	}
	return first, last, fmt.Errorf("no completion among the demo's events: %w", sc.Err())
}

// tail is the end of a long output, for a failure message.
func tail(s string) string {
	if len(s) > 4000 {
		return "…" + s[len(s)-4000:]
	}
	return s
}
