package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The environment of the running test package, set by Main.
var (
	current    *Env
	skipReason string
)

// StartTimeout bounds Main's start of the environment, CRDs included. A cold
// start takes a few seconds; the margin is for loaded CI machines running
// several test packages at once.
const StartTimeout = 3 * time.Minute

// Main is the body of a test package's TestMain: it starts one environment
// with the CRDs of <repo>/deploy/crds, runs the tests, stops the environment
// and exits with the tests' code. It never returns.
//
// Environment variables:
//   - K8S_BIN_DIR: where the binaries are (default <repo>/.cache/k8s/v<K8sVersion>);
//   - SKIP_APISERVER=1: outside CI, skip the tests of the package when the
//     binaries are missing, instead of failing;
//   - CI=true: never skip;
//   - TESTENV_KEEP=1: keep the working directory (logs, PKI) after the run.
func Main(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	binDir, err := BinDir()
	if err == nil {
		err = CheckBinaries(binDir)
	}
	if err != nil {
		if !errors.Is(err, ErrBinariesMissing) {
			fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
			return 1
		}
		return missingBinaries(m, err)
	}

	crdDir, err := crdDir()
	if err != nil {
		fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
	env, err := Start(ctx, Options{
		BinDir: binDir,
		CRDDir: crdDir,
		Keep:   os.Getenv("TESTENV_KEEP") == "1",
		Log:    os.Stderr,
	})
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "testenv: start: %v\n", err)
		return 1
	}
	current = env

	// Ctrl-C or a polite kill: stop the servers and clean up before going.
	// A hard death is covered by the children's parent-death signal.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		s := <-sigs
		fmt.Fprintf(os.Stderr, "testenv: %v: stopping kube-apiserver and etcd\n", s)
		if err := env.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "testenv: stop: %v\n", err)
		}
		os.Exit(2)
	}()

	code := m.Run()
	signal.Stop(sigs)
	if err := env.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "testenv: stop: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	if env.keep {
		fmt.Fprintf(os.Stderr, "testenv: TESTENV_KEEP=1: work dir kept at %s\n", env.Dir)
	}
	return code
}

// missingBinaries applies the policy for absent binaries: CI fails, an
// explicit SKIP_APISERVER=1 skips loudly, anything else fails with the fix.
func missingBinaries(m *testing.M, err error) int {
	switch {
	case os.Getenv("CI") == "true":
		fmt.Fprintf(os.Stderr, "testenv: FAIL: %v\n"+
			"testenv: CI must build them before the tests: run `make testenv-bins` in .ci/run.\n", err)
		return 1
	case os.Getenv("SKIP_APISERVER") == "1":
		skipReason = fmt.Sprintf("SKIP_APISERVER=1 and %v: test NOT run against a real apiserver", err)
		bar := strings.Repeat("!", 78)
		fmt.Fprintf(os.Stderr, "%s\n!!! testenv: SKIPPING every apiserver test of this package (SKIP_APISERVER=1)\n"+
			"!!! %v\n!!! Run `make testenv-bins` to build them (~12 min cold) and test for real.\n%s\n",
			bar, err, bar)
		return m.Run()
	default:
		fmt.Fprintf(os.Stderr, "testenv: FAIL: %v\n"+
			"testenv: run `make testenv-bins` to build etcd, kube-apiserver and kubectl (~12 min cold, ~25 s warm),\n"+
			"testenv: or set SKIP_APISERVER=1 to skip these tests on purpose (never in CI).\n", err)
		return 1
	}
}

// RequireBinaries returns the binary directory for a test that starts its
// own environment with Start, applying the same policy as Main when the
// binaries are missing: fail in CI, skip with SKIP_APISERVER=1, fail
// otherwise.
func RequireBinaries(t testing.TB) string {
	t.Helper()
	dir, err := BinDir()
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	if err := CheckBinaries(dir); err != nil {
		switch {
		case os.Getenv("CI") == "true":
			t.Fatalf("testenv: %v; CI must run `make testenv-bins` first", err)
		case os.Getenv("SKIP_APISERVER") == "1":
			t.Skipf("SKIP_APISERVER=1 and %v: test NOT run against a real apiserver", err)
		default:
			t.Fatalf("testenv: %v; run `make testenv-bins`, or set SKIP_APISERVER=1 to skip on purpose", err)
		}
	}
	return dir
}

func crdDir() (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "deploy", "crds"), nil
}

// Get returns the environment started by Main. It skips the test when Main
// skipped the environment (SKIP_APISERVER=1), and fails it when Main was not
// used.
func Get(t testing.TB) *Env {
	t.Helper()
	if current != nil {
		return current
	}
	if skipReason != "" {
		t.Skip(skipReason)
	}
	t.Fatal("testenv: no environment: the package's TestMain must call testenv.Main(m)")
	return nil
}
