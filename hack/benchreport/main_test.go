package main

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// cpu is the -N suffix go test gives benchmark names on this machine.
var cpu = fmt.Sprintf("-%d", runtime.NumCPU())

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name  string
		input string
		want  map[string][]float64 // "bench|unit" → values in run order
	}{
		{
			name: "standard units and a ratio",
			input: "pkg: github.com/switchback-dev/switchback/eventstore\n" +
				"BenchmarkAppendVsRawPublish" + cpu + "   100   108021 ns/op   0.762 ratio   19283 B/op   212 allocs/op\n",
			want: map[string][]float64{
				"eventstore BenchmarkAppendVsRawPublish|ns/op":     {108021},
				"eventstore BenchmarkAppendVsRawPublish|ratio":     {0.762},
				"eventstore BenchmarkAppendVsRawPublish|B/op":      {19283},
				"eventstore BenchmarkAppendVsRawPublish|allocs/op": {212},
			},
		},
		{
			name: "sub-benchmarks with latency percentiles, over runs",
			input: "pkg: github.com/switchback-dev/switchback/projector\n" +
				"BenchmarkProjectionLag/rate=1" + cpu + "  1  22242230333 ns/op  81.59 max-ms  13.17 p50-ms  81.59 p99-ms\n" +
				"BenchmarkProjectionLag/rate=50" + cpu + "  1  10195292447 ns/op  98.83 max-ms  10.75 p50-ms  66.67 p99-ms\n" +
				"BenchmarkProjectionLag/rate=1" + cpu + "  1  22000000000 ns/op  40 max-ms  12 p50-ms  39.5 p99-ms\n",
			want: map[string][]float64{
				"projector BenchmarkProjectionLag/rate=1|p99-ms":  {81.59, 39.5},
				"projector BenchmarkProjectionLag/rate=1|p50-ms":  {13.17, 12},
				"projector BenchmarkProjectionLag/rate=50|p99-ms": {66.67},
				"projector BenchmarkProjectionLag/rate=50|max-ms": {98.83},
			},
		},
		{
			name: "MiB, ms and per-second units; log lines ignored",
			input: "pkg: github.com/switchback-dev/switchback/test/perf\n" +
				"testenv: kube-apiserver ready at https://127.0.0.1:40617 in 2.205s\n" +
				"BenchmarkControllerResume" + cpu + "  1  2564466086 ns/op  99000 events  438.7 first-upgrade-ms  44.93 peak-rss-MiB  39.91 rss-MiB  41.68 startup-ms\n" +
				"--- BENCH: BenchmarkControllerResume" + cpu + "\n" +
				"    controller_bench_test.go:223: stream of 2000 finished managers written in 4.092s\n" +
				"BenchmarkNatsBenchReference" + cpu + "  1  2301035016 ns/op  21889 append/s  564.0 msg-bytes  14821 nats-msgs/s  1.477 ratio\n",
			want: map[string][]float64{
				"perf BenchmarkControllerResume|peak-rss-MiB":     {44.93},
				"perf BenchmarkControllerResume|rss-MiB":          {39.91},
				"perf BenchmarkControllerResume|startup-ms":       {41.68},
				"perf BenchmarkControllerResume|events":           {99000},
				"perf BenchmarkNatsBenchReference|nats-msgs/s":    {14821},
				"perf BenchmarkNatsBenchReference|append/s":       {21889},
				"perf BenchmarkNatsBenchReference|ratio":          {1.477},
				"perf BenchmarkControllerResume|first-upgrade-ms": {438.7},
			},
		},
		{
			name: "the chaos runs' recovery times, as faults' TestMain writes them",
			input: "pkg: github.com/switchback-dev/switchback/faults\n" +
				"BenchmarkChaosRecovery/plane=sim/fault=kill-9-a-worker" + cpu + "\t1\t850 p50-ms\t2100 p99-ms\t2300 max-ms\t37 recoveries\n" +
				"BenchmarkChaosRecovery/plane=longhorn/fault=any" + cpu + "\t1\t1200 p50-ms\t9000 p99-ms\t12000 max-ms\t220 recoveries\n",
			want: map[string][]float64{
				"faults BenchmarkChaosRecovery/plane=sim/fault=kill-9-a-worker|p50-ms": {850},
				"faults BenchmarkChaosRecovery/plane=sim/fault=kill-9-a-worker|p99-ms": {2100},
				"faults BenchmarkChaosRecovery/plane=longhorn/fault=any|max-ms":        {12000},
				"faults BenchmarkChaosRecovery/plane=longhorn/fault=any|recoveries":    {220},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			all, order, err := parse(strings.NewReader(tc.input))
			require.NoError(t, err)
			assert.Len(t, order, len(all), "each series listed once")
			for key, want := range tc.want {
				bench, unit, _ := strings.Cut(key, "|")
				s, ok := all[bench+"\x00"+unit]
				if assert.True(t, ok, "series %s", key) {
					assert.Equal(t, want, s.values, key)
					assert.Equal(t, bench, s.bench)
					assert.Equal(t, unit, s.unit)
				}
			}
		})
	}
}

func TestGoals(t *testing.T) {
	input := "pkg: github.com/switchback-dev/switchback/projector\n" +
		"BenchmarkProjectionLag/rate=1" + cpu + "  1  1 ns/op  20 p99-ms\n" +
		"BenchmarkProjectionLag/rate=1" + cpu + "  1  1 ns/op  60 p99-ms\n" +
		"BenchmarkProjectionLag/rate=1" + cpu + "  1  1 ns/op  30 p99-ms\n" +
		"BenchmarkProjectionLag/rate=50" + cpu + "  1  1 ns/op  51 p99-ms\n" +
		"pkg: github.com/switchback-dev/switchback/eventstore\n" +
		"BenchmarkLoad10k/stream-only" + cpu + "  10  130000000 ns/op\n" +
		"BenchmarkLoad10k/snapshot+tail" + cpu + "  3000  368049 ns/op\n" +
		"BenchmarkAppendVsRawPublish" + cpu + "  100  1 ns/op  0.762 ratio\n" +
		"BenchmarkReplay1M" + cpu + "  1  1 ns/op  0.93 ratio  110 replay-peak-rss-MiB@1M  100 replay-peak-rss-MiB@250k\n" +
		"pkg: github.com/switchback-dev/switchback/test/perf\n" +
		"BenchmarkPerVolumeCost" + cpu + "  1  1 ns/op  1.2 ratio100/20\n"
	all, _, err := parse(strings.NewReader(input))
	require.NoError(t, err)
	byWhat := map[string]goal{}
	for _, g := range goals {
		byWhat[g.bench+" "+g.unit] = g
	}
	for _, tc := range []struct {
		goal     string
		value    float64
		met, ran bool
	}{
		{"projector BenchmarkProjectionLag/rate=1 p99-ms", 30, true, true}, // the median, not the worst run
		{"projector BenchmarkProjectionLag/rate=50 p99-ms", 51, false, true},
		{"eventstore BenchmarkLoad10k/stream-only ns/op", 130000000.0 / 368049, true, true},
		{"eventstore BenchmarkAppendVsRawPublish ratio", 0.762, false, true}, // goal 0.9
		{"eventstore BenchmarkReplay1M ratio", 0.93, true, true},
		{"eventstore BenchmarkReplay1M replay-peak-rss-MiB@1M", 1.1, true, true}, // flat: 110 MiB at 1M over 100 at 250k
		{"perf BenchmarkControllerResume peak-rss-MiB", 0, false, false},
		{"perf BenchmarkPerVolumeCost ratio100/20", 1.2, true, true}, // "≤": the limit itself meets it
	} {
		t.Run(tc.goal, func(t *testing.T) {
			g, ok := byWhat[tc.goal]
			require.True(t, ok, "goal %s is listed", tc.goal)
			v, met, ran := g.evaluate(all)
			assert.Equal(t, tc.ran, ran, "measured")
			assert.InDelta(t, tc.value, v, 1e-9)
			assert.Equal(t, tc.met, met, "met")
		})
	}
}

func TestWriteGoalsAndNotes(t *testing.T) {
	input := "pkg: github.com/switchback-dev/switchback/test/perf\n" +
		"BenchmarkControllerResume" + cpu + "  1  1 ns/op  44.93 peak-rss-MiB\n"
	all, order, err := parse(strings.NewReader(input))
	require.NoError(t, err)
	for _, tc := range []struct {
		name, notes string
		wantNotes   bool
	}{
		{"with notes", "The projector spends its time in status writes.\n\n| a | b |\n", true},
		{"without notes", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out strings.Builder
			write(&out, all, order, tc.notes)
			md := out.String()
			assert.Contains(t, md, "## Goals")
			assert.Contains(t, md, "| controller peak RSS, 10k finished managers in the stream | perf BenchmarkControllerResume | peak-rss-MiB | 44.93 | < 300 | met |")
			assert.Contains(t, md, "| projection lag p99 at 1 event/s | projector BenchmarkProjectionLag/rate=1 | p99-ms | - | < 50 | not measured |")
			assert.Contains(t, md, "| perf BenchmarkControllerResume | peak-rss-MiB | 44.93 | 44.93 | 44.93 | 1 |")
			assert.Less(t, strings.Index(md, "## Goals"), strings.Index(md, "## All figures"))
			if tc.wantNotes {
				assert.Contains(t, md, "## Profiling notes\n\nThe projector spends its time in status writes.\n\n| a | b |\n")
			} else {
				assert.NotContains(t, md, "Profiling notes")
			}
		})
	}
}
