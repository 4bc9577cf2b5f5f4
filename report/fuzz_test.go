package report_test

import (
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/events/eventstest"
	"github.com/switchback-dev/switchback/report"
)

// fuzzEvents is what a fuzz input picks from: one sample of every type on
// two nodes, another incarnation's, and the moves a node's steps and
// volumes make, legal at some point or not.
func fuzzEvents() []events.Envelope {
	other := ref
	other.UID = "uid-2"
	pool := append(eventstest.Samples(ref, "n1", t0), eventstest.Samples(ref, "n2", t0)...)
	pool = append(pool, eventstest.Samples(other, "n1", t0)[:3]...)
	pool = append(pool, planned("n1", "n2").out...)
	for _, node := range []string{"n1", "n2"} {
		agg := events.NodeAggregate(ref, node)
		var evs []events.Event
		for i, s := range events.NodeSteps {
			if next, _ := s.Next(); next != events.NodeCompleted {
				evs = append(evs, events.NodeStateChanged{From: s, To: next})
			}
			evs = append(evs, events.NodeStalled{Step: s, Reason: "R", Message: string(s)},
				events.NodeResumed{Step: s}, events.NodeUpgradeFailed{Step: s, Reason: "R", Message: "m"},
				events.NodeUpgradeCancelled{Step: s})
			vs := []events.VolumeState{"", events.VolumePending, events.VolumeSwitchingOver, events.VolumeSwitchedOver,
				events.VolumeSwitchingBack, events.VolumeSwitchedBack, events.VolumeCompleted, events.VolumeError}
			evs = append(evs, events.VolumeStateChanged{Volume: "pvc-1", From: vs[i%len(vs)], To: vs[(i+1)%len(vs)]})
		}
		evs = append(evs, events.VolumeStateChanged{Volume: "pvc-1", From: events.VolumeSwitchedOver, To: events.VolumeSwitchingBack})
		pool = append(pool, events.New(agg, events.SourceWorker, "fuzz-"+node, t0, evs...)...)
	}
	return pool
}

// FuzzFold: whatever the events, in whatever order and at whatever times
// (writers' clocks step back), Fold and Render never panic and every bar
// lies inside the timeline.
func FuzzFold(f *testing.F) {
	pool := fuzzEvents()
	f.Add([]byte{})
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15})
	seed := make([]byte, 0, 2*len(pool))
	for i := range pool {
		seed = append(seed, byte(i), byte(i*7))
	}
	f.Add(seed)
	f.Fuzz(func(t *testing.T, in []byte) {
		var history []events.Envelope
		for i := 0; i+1 < len(in); i += 2 {
			e := pool[int(in[i])%len(pool)]
			// Times move on by up to 127 ms and back by up to 128.
			e.Time = t0.Add(time.Duration(int8(in[i+1])) * time.Millisecond * time.Duration(i+1))
			e.Sequence = uint64(i/2 + 1)
			history = append(history, e)
		}
		tl := report.BuildTimeline(history)
		require.NoError(t, report.Render(io.Discard, tl))
		assert.False(t, tl.End.Before(tl.Start))
		for _, n := range tl.Nodes {
			for _, s := range n.Steps {
				inside(t, tl, s.Span)
			}
			for _, s := range n.Stalls {
				inside(t, tl, s.Span)
			}
		}
		for _, h := range tl.Holds {
			inside(t, tl, h)
		}
	})
}

func inside(t *testing.T, tl *report.Timeline, s report.Span) {
	t.Helper()
	assert.False(t, s.Start.Before(tl.Start) || s.End.After(tl.End) || s.End.Before(s.Start),
		"span %s–%s outside %s–%s", s.Start, s.End, tl.Start, tl.End)
}
