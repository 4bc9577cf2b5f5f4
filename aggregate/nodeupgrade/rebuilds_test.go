package nodeupgrade

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/aggregate"
	"github.com/switchback-dev/switchback/events"
)

func TestRecordRebuilds(t *testing.T) {
	at := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	base := State{Exists: true, Node: "n1", State: events.NodeFailingReplicas,
		Volumes: map[string]Volume{"vol-a": {State: events.VolumePending}, "vol-b": {State: events.VolumePending}}}
	hashA := events.HashingRequested{Volume: "vol-a", Snapshot: "s", At: at, Deadline: at.Add(time.Minute)}
	planA := events.RebuildPlanned{Volume: "vol-a", Hashed: true, ExpectedBytes: 1, FullBytes: 10}
	tests := []struct {
		name    string
		st      func() State
		evs     []events.Event
		want    int
		refused string
	}{
		{name: "new: recorded", st: func() State { return base }, evs: []events.Event{hashA, events.RebuildPlanned{Volume: "vol-b", Reason: "TooFewHealthyReplicas", FullBytes: 1}}, want: 2},
		{name: "one kind twice in a batch: the first counts", st: func() State { return base }, evs: []events.Event{planA, planA}, want: 1},
		{name: "recorded before: nothing", st: func() State {
			s := base
			s.Rebuilds = map[string]Rebuild{"vol-a": {Hashing: &hashA}}
			return s
		}, evs: []events.Event{hashA}, want: 0},
		{name: "a volume the node did not record: refused", st: func() State { return base }, evs: []events.Event{events.RebuildFinished{Volume: "vol-x", At: at}}, refused: "not recorded"},
		{name: "unhashed without a reason: refused", st: func() State { return base }, evs: []events.Event{events.RebuildPlanned{Volume: "vol-a"}}, refused: "reason"},
		{name: "not a rebuild event: refused", st: func() State { return base }, evs: []events.Event{events.NodeResumed{Step: events.NodeFailingReplicas}}, refused: "not a rebuild event"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			evs, err := Decide(tt.st(), RecordRebuilds{Meta: aggregate.Meta{ID: "x", At: at}, Events: tt.evs})
			if tt.refused != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.refused)
				return
			}
			require.NoError(t, err)
			assert.Len(t, evs, tt.want)
		})
	}
}

// A completed node's snapshots are removed after its end (the controller's
// cleanup); nothing else is admitted then.
func TestSnapshotsRemovedAfterCompletion(t *testing.T) {
	s := State{Exists: true, Node: "n1", State: events.NodeCompleted, Snapshots: &Snapshots{Name: "s", Volumes: []string{"vol-a"}}}
	evs, err := Decide(s, ConfirmSnapshotsRemoved{Meta: aggregate.Meta{ID: "x"}})
	require.NoError(t, err)
	require.Len(t, evs, 1)
	next, err := Evolve(s, events.Envelope{Aggregate: s.Aggregate(), Data: evs[0]})
	require.NoError(t, err)
	assert.True(t, next.Snapshots.Removed)
	evs, err = Decide(next, ConfirmSnapshotsRemoved{Meta: aggregate.Meta{ID: "y"}})
	require.NoError(t, err)
	assert.Empty(t, evs, "once")

	s.State = events.NodeError
	evs, err = Decide(s, ConfirmSnapshotsRemoved{Meta: aggregate.Meta{ID: "x"}})
	require.NoError(t, err)
	assert.Empty(t, evs, "a failed node keeps its snapshots, for recovery")
}
