// Package benchenv reads the environment knobs that size benchmarks
// (REPLAY_EVENTS, PERF_MANAGERS, ...): `make bench` runs the real sizes, CI
// small ones so that every benchmark still runs once.
package benchenv

import (
	"os"
	"strconv"
	"testing"
)

// Int returns the positive integer in the environment variable name, or def
// when it is unset. Anything else fails the benchmark: a typo must not
// silently measure the default.
func Int(tb testing.TB, name string, def int) int {
	tb.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		tb.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}
