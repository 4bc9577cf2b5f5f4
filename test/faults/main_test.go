//go:build linux

package faults

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchback-dev/switchback/test/harness/testenv"
)

// The suite's shared fixtures, set by TestMain: the switchback binary every
// scenario runs as processes, and one apiserver for all runs (each run has a
// namespace of its own, so runs do not see each other's managers or leases).
var (
	binPath string
	// nextBinPath is a second build of the same code, stamped another
	// version: what a rolling update of Switchback runs next.
	nextBinPath string
	kenv        *testenv.Env
	skipReason  string
)

// TestMain runs the scenarios (the first one builds cmd/switchback and starts
// one kube-apiserver + etcd, see setup), then prints the summary table, also
// written to .cache/faults-summary.txt when the repository has a .cache
// directory.
func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(mainRun(m))
}

func mainRun(m *testing.M) int {
	start := time.Now()
	code := m.Run()
	elapsed := time.Since(start)
	if kenv != nil {
		if err := kenv.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "faults: stop kube-apiserver: %v\n", err)
			if code == 0 {
				code = 1
			}
		}
	}
	if binPath != "" {
		_ = os.RemoveAll(filepath.Dir(binPath))
	}
	// A run that selected no scenario (e.g. -run '^$' for benchmarks)
	// started nothing and has nothing to report.
	summary.mu.Lock()
	ran := len(summary.rows) > 0
	summary.mu.Unlock()
	if !ran {
		return code
	}
	var table strings.Builder
	printSummary(&table, elapsed)
	fmt.Print(table.String())
	writeCache("faults-summary.txt", table.String())
	var chaosTable strings.Builder
	if printChaos(&chaosTable) {
		fmt.Print(chaosTable.String())
		writeCache("chaos-summary.txt", chaosTable.String())
	}
	// make chaos's recovery times go into BENCHMARKS.md with make bench's
	// figures; the fixed CI seeds are too few to stand for them.
	for _, plane := range chaosPlanes {
		var recovery strings.Builder
		if os.Getenv("CHAOS_RUNS") != "" && recoveryBench(&recovery, plane) {
			writeCache("bench-chaos-"+plane+".txt", recovery.String())
		}
	}
	return code
}

// writeCache writes a table to .cache/name when the repository has a .cache
// directory.
func writeCache(name, table string) {
	root, err := testenv.RepoRoot()
	if err != nil {
		return
	}
	if st, err := os.Stat(filepath.Join(root, ".cache")); err != nil || !st.IsDir() {
		return
	}
	if err := os.WriteFile(filepath.Join(root, ".cache", name), []byte(table), 0o644); err != nil {
		fmt.Fprintf(os.Stderr, "faults: write %s: %v\n", name, err)
	}
}

var (
	setupOnce sync.Once
	setupErr  error
)

// setup builds the binary and starts the apiserver on first use, so a test
// binary that runs no scenario (benchmarks, -run filters) starts nothing.
func setup() {
	if testing.Short() {
		skipReason = "-short: the fault-injection suite runs real processes for minutes"
		return
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		setupErr = err
		return
	}
	binDir, err := testenv.BinDir()
	if err == nil {
		err = testenv.CheckBinaries(binDir)
	}
	if err != nil {
		// The same policy as testenv.Main: only an explicit SKIP_APISERVER=1
		// outside CI may skip.
		if errors.Is(err, testenv.ErrBinariesMissing) && os.Getenv("SKIP_APISERVER") == "1" && os.Getenv("CI") != "true" {
			skipReason = fmt.Sprintf("SKIP_APISERVER=1 and %v: fault suite NOT run", err)
			return
		}
		setupErr = fmt.Errorf("%w (run `make testenv-bins`)", err)
		return
	}
	tmp, err := os.MkdirTemp("", "switchback-faults-")
	if err != nil {
		setupErr = err
		return
	}
	bin := filepath.Join(tmp, "switchback")
	build := exec.Command("go", "build", "-o", bin, "./cmd/switchback")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		_ = os.RemoveAll(tmp)
		setupErr = fmt.Errorf("go build ./cmd/switchback: %w\n%s", err, out)
		return
	}
	next := filepath.Join(tmp, "switchback-next")
	build = exec.Command("go", "build", "-ldflags", "-X main.version=next", "-o", next, "./cmd/switchback")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		_ = os.RemoveAll(tmp)
		setupErr = fmt.Errorf("go build ./cmd/switchback (next): %w\n%s", err, out)
		return
	}
	binPath, nextBinPath = bin, next
	ctx, cancel := context.WithTimeout(context.Background(), testenv.StartTimeout)
	defer cancel()
	env, err := testenv.Start(ctx, testenv.Options{BinDir: binDir, CRDDir: filepath.Join(root, "deploy", "crds"), Log: io.Discard})
	if err != nil {
		setupErr = fmt.Errorf("start kube-apiserver: %w", err)
		return
	}
	kenv = env
}

// requireEnv sets the suite up on first use; it skips the test when the
// suite is skipped (-short, SKIP_APISERVER=1) and fails it when setup
// failed.
func requireEnv(t *testing.T) {
	t.Helper()
	setupOnce.Do(setup)
	if skipReason != "" {
		t.Skip(skipReason)
	}
	if setupErr != nil {
		t.Fatalf("faults: %v", setupErr)
	}
}

// runResult is one run of a scenario, as the summary table counts it.
type runResult struct {
	passed   bool
	skipped  string // the skip reason (a BUG names its fix)
	lost     int
	dups     int
	failedIO int
}

// scenarioRow aggregates the runs of one scenario.
type scenarioRow struct {
	name string
	runs []*runResult
}

var summary struct {
	mu   sync.Mutex
	rows []*scenarioRow
}

// record adds a run to its scenario's row; the row keeps the order in which
// scenarios first ran.
func record(scenario string, r *runResult) {
	summary.mu.Lock()
	defer summary.mu.Unlock()
	for _, row := range summary.rows {
		if row.name == scenario {
			row.runs = append(row.runs, r)
			return
		}
	}
	summary.rows = append(summary.rows, &scenarioRow{name: scenario, runs: []*runResult{r}})
}

func printSummary(w io.Writer, elapsed time.Duration) {
	summary.mu.Lock()
	defer summary.mu.Unlock()
	fmt.Fprintf(w, "\nFault-injection suite (%s, %d scenario(s))\n", elapsed.Round(time.Second), len(summary.rows))
	fmt.Fprintf(w, "%-52s | %4s | %6s | %16s | %10s | %11s | %s\n", "scenario", "runs", "passed", "transitions lost", "duplicates", "failed I/Os", "notes")
	fmt.Fprintln(w, strings.Repeat("-", 130))
	var tot runResult
	runs, passed := 0, 0
	for _, row := range summary.rows {
		var agg runResult
		p := 0
		var notes []string
		for _, r := range row.runs {
			if r.passed {
				p++
			}
			if r.skipped != "" {
				notes = append(notes, r.skipped)
			}
			agg.lost += r.lost
			agg.dups += r.dups
			agg.failedIO += r.failedIO
		}
		fmt.Fprintf(w, "%-52s | %4d | %6d | %16d | %10d | %11d | %s\n", row.name, len(row.runs), p, agg.lost, agg.dups, agg.failedIO, strings.Join(notes, "; "))
		runs += len(row.runs)
		passed += p
		tot.lost += agg.lost
		tot.dups += agg.dups
		tot.failedIO += agg.failedIO
	}
	fmt.Fprintln(w, strings.Repeat("-", 130))
	fmt.Fprintf(w, "%-52s | %4d | %6d | %16d | %10d | %11d |\n", "total", runs, passed, tot.lost, tot.dups, tot.failedIO)
}
