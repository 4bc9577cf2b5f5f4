package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/switchback-dev/switchback/sim"
)

func TestDescribeWorstStall(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	stall := func(vol string, d time.Duration, injected bool) sim.IOStall {
		return sim.IOStall{Volume: vol, Cause: "path inaccessible", Phase: "n1 switching-over", Injected: injected, Start: t0, End: t0.Add(d)}
	}
	tests := []struct {
		name string
		io   sim.IOStats
		want string
	}{
		{"none", sim.IOStats{}, "no I/O waited longer than the stall threshold"},
		{"injected ones do not count", sim.IOStats{Stalls: []sim.IOStall{stall("a", time.Minute, true)}}, "no I/O waited longer than the stall threshold"},
		{"the worst named", sim.IOStats{Stalls: []sim.IOStall{stall("a", 1500*time.Millisecond, false), stall("b", 4*time.Second, false), stall("c", time.Hour, true)}},
			"2 stall(s) over the threshold; the worst 4s on volume b (path inaccessible) during n1 switching-over"},
		{"one lasting, measured to when the stats were taken", sim.IOStats{At: t0.Add(2 * time.Second), Stalls: []sim.IOStall{{Volume: "a", Cause: "queued", Start: t0}}},
			"1 stall(s) over the threshold; the worst 2s on volume a (queued)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { assert.Equal(t, tt.want, describeWorstStall(tt.io)) })
	}
}
