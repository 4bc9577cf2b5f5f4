//go:build linux

package faults

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/events"
)

var scheduleNodes = []string{"n1", "n2", "n3"}

// checkSchedule is what every schedule must be: faults in order of their
// point, each point inside the upgrade, each hold inside its kind's range,
// each target one the world has, one fault per kind and target.
func checkSchedule(t *testing.T, s schedule) {
	t.Helper()
	points := len(scheduleNodes)*(len(events.NodeSteps)-1) - 2
	require.NotEmpty(t, s.faults)
	assert.LessOrEqual(t, len(s.faults), 4)
	assert.Contains(t, []int{1, 2}, s.controllers)
	seen := map[string]bool{}
	for i, f := range s.faults {
		if i > 0 {
			assert.LessOrEqual(t, s.faults[i-1].at, f.at, "in order of their point")
		}
		assert.GreaterOrEqual(t, f.at, 0)
		assert.Less(t, f.at, points, "%s begins before the upgrade's last two changes", f)
		hr := holdRange[f.kind]
		assert.GreaterOrEqual(t, f.hold, hr[0], "%s", f)
		assert.LessOrEqual(t, f.hold, hr[1]+100e6, "%s", f)
		switch f.kind {
		case fkWorkerKill, fkWorkerPartition:
			assert.Contains(t, scheduleNodes, f.target)
		case fkNATSServer:
			if s.cluster {
				assert.Contains(t, []string{"server 0", "server 1", "server 2"}, f.target)
			} else {
				assert.Empty(t, f.target)
			}
		case fkSlowPlane:
			assert.GreaterOrEqual(t, f.delay.Milliseconds(), int64(50))
			assert.LessOrEqual(t, f.delay.Milliseconds(), int64(300))
		default:
			assert.Empty(t, f.target, "%s", f)
		}
		key := string(f.kind) + "/" + f.target
		if f.kind == fkNATSServer {
			key = string(f.kind)
		}
		assert.False(t, seen[key], "one %s per schedule", key)
		seen[key] = true
	}
}

func TestScheduleIsAFunctionOfItsSeed(t *testing.T) {
	for _, tc := range []struct {
		name string
		seed uint64
	}{{"seed 1", 1}, {"seed 2", 2}, {"seed 1000", 1000}, {"seed max", ^uint64(0)}} {
		t.Run(tc.name, func(t *testing.T) {
			for _, plane := range []string{"sim", "longhorn"} {
				a, b := newSchedule(tc.seed, plane, scheduleNodes), newSchedule(tc.seed, plane, scheduleNodes)
				assert.Equal(t, a, b, "the same seed draws the same schedule")
				checkSchedule(t, a)
				assert.Contains(t, a.replayCommand(), fmt.Sprintf("CHAOS_SEED=%d", tc.seed))
			}
		})
	}
}

// A hundred seeds reach every kind of fault, both NATS layouts, both
// controller counts and bursts: the schedules cover what the nemesis can do.
func TestSchedulesCoverEveryFault(t *testing.T) {
	kinds := map[faultKind]int{}
	clusters, pairs, bursts := 0, 0, 0
	for seed := range uint64(100) {
		s := newSchedule(seed+1, "sim", scheduleNodes)
		for _, f := range s.faults {
			kinds[f.kind]++
		}
		if s.cluster {
			clusters++
		}
		if s.controllers == 2 {
			pairs++
		}
		if len(s.faults) > 1 && s.faults[0].at == s.faults[len(s.faults)-1].at {
			bursts++
		}
	}
	for _, k := range faultKinds {
		assert.NotZero(t, kinds[k], "some schedule injects %s", k)
	}
	assert.NotZero(t, clusters)
	assert.NotZero(t, 100-clusters)
	assert.NotZero(t, pairs)
	assert.NotZero(t, bursts)
}

func FuzzSchedule(f *testing.F) {
	for _, s := range []uint64{0, 1, 42, 1 << 63} {
		f.Add(s, true)
		f.Add(s, false)
	}
	f.Fuzz(func(t *testing.T, seed uint64, longhorn bool) {
		plane := "sim"
		if longhorn {
			plane = "longhorn"
		}
		checkSchedule(t, newSchedule(seed, plane, scheduleNodes))
	})
}
