package nodeworker

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestPace is the stall and failure policy of a step's loop as a table:
// the round's outcome, whether the step is stalled, since when it is
// blocked, and what the loop does next.
func TestPace(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	pol := policy{stallAfter: 2 * time.Minute, failAfter: 10 * time.Minute, idle: 30 * time.Second}
	since := func(d time.Duration) pacing { return pacing{blockedSince: t0.Add(-d)} }
	waitFor := waiting("vol-a", "TargetNotMoved", "waiting")
	broken := &block{reason: "InstanceManagerFailed", message: "in error", permanent: true}
	for _, tc := range []struct {
		name    string
		out     outcome
		stalled bool
		p       pacing
		want    turn
	}{
		{name: "first round, blocked: the clock starts, the wait ends at the stall",
			out: outcome{block: waitFor}, p: pacing{},
			want: turn{pacing: since(0), wait: 30 * time.Second}},
		{name: "blocked, the stall a little ahead: the wait ends at it",
			out: outcome{block: waitFor}, p: since(2*time.Minute - 5*time.Second),
			want: turn{pacing: since(2*time.Minute - 5*time.Second), wait: 5 * time.Second}},
		{name: "blocked past StallAfter: stalled, then the idle wait",
			out: outcome{block: waitFor}, p: since(3 * time.Minute),
			want: turn{pacing: since(3 * time.Minute), stall: waitFor, wait: 30 * time.Second}},
		{name: "progress: the clock restarts, act again at once",
			out: outcome{progressed: true, block: waitFor}, p: since(time.Hour),
			want: turn{pacing: since(0), again: true, wait: 30 * time.Second}},
		{name: "progress while stalled: resumed",
			out: outcome{progressed: true}, stalled: true, p: since(time.Hour),
			want: turn{pacing: since(0), resume: true, again: true, wait: 30 * time.Second}},
		{name: "a permanent block before FailAfter: stalled, the wait ends at the failure",
			out: outcome{block: broken}, p: since(10*time.Minute - 10*time.Second),
			want: turn{pacing: since(10*time.Minute - 10*time.Second), stall: broken, wait: 10 * time.Second}},
		{name: "a permanent block at FailAfter: failed, saying for how long",
			out: outcome{block: broken}, p: since(10 * time.Minute),
			want: turn{pacing: since(10 * time.Minute),
				fail: &block{reason: "InstanceManagerFailed", message: "in error (no progress for 10m0s)", permanent: true}}},
		{name: "a passing block is never failed, whatever the time",
			out: outcome{block: waitFor}, p: since(24 * time.Hour),
			want: turn{pacing: since(24 * time.Hour), stall: waitFor, wait: 30 * time.Second}},
		{name: "nothing blocks and nothing happened: the idle wait",
			out: outcome{}, p: since(time.Hour),
			want: turn{pacing: since(time.Hour), wait: 30 * time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, pace(tc.out, tc.stalled, tc.p, t0, pol))
		})
	}
}
