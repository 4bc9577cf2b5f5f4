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

// A temporary replica's events fold in their order (requested, raised,
// added, restored); one out of order is refused, and only this node's
// own raise admits an added replica and a restore. The restore is
// admitted after the node's end, whatever the end; nothing else is.
func TestTemporaryReplicaOrder(t *testing.T) {
	at := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	base := State{Exists: true, Node: "n1", State: events.NodeFailingReplicas, ReplicaPolicy: events.ReplicaPolicyAddFirst,
		Volumes: map[string]Volume{"vol-a": {State: events.VolumePending}}}
	req := events.TemporaryReplicaRequested{Volume: "vol-a", NumberOfReplicas: 2, Replicas: []string{"r1", "r2"}, At: at, Deadline: at.Add(time.Minute)}
	raise := events.ReplicaCountRaised{Volume: "vol-a", NumberOfReplicas: 2, Raised: 3}
	elsewhere := raise
	elsewhere.FirstNode = "n0"
	added := events.TemporaryReplicaAdded{Volume: "vol-a", Replica: "r3", Node: "n3"}
	restored := events.ReplicaCountRestored{Volume: "vol-a", NumberOfReplicas: 2, Replica: "r3"}
	fold := func(t *testing.T, s State, evs ...events.Event) (State, error) {
		t.Helper()
		for _, e := range evs {
			next, err := Evolve(s, events.Envelope{Aggregate: s.Aggregate(), Data: e})
			if err != nil {
				return s, err
			}
			s = next
		}
		return s, nil
	}
	for _, tc := range []struct {
		name    string
		evs     []events.Event
		refused string
	}{
		{name: "in order", evs: []events.Event{req, raise, added, restored}},
		{name: "restored with none built", evs: []events.Event{req, raise, restored}},
		{name: "raised elsewhere: counted only", evs: []events.Event{req, elsewhere}},
		{name: "a raise without a request", evs: []events.Event{raise}, refused: "a raise follows one request"},
		{name: "added before the raise", evs: []events.Event{req, added}, refused: "added once"},
		{name: "added to another node's raise", evs: []events.Event{req, elsewhere, added}, refused: "added once"},
		{name: "restored twice", evs: []events.Event{req, raise, restored, restored}, refused: "once"},
		{name: "restored for another node's raise", evs: []events.Event{req, elsewhere, restored}, refused: "follows the raise this node made"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := fold(t, base, tc.evs...)
			if tc.refused != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.refused)
				return
			}
			require.NoError(t, err)
			assert.NotNil(t, s.Rebuilds["vol-a"].Temporary)
		})
	}
	for _, end := range []events.NodeState{events.NodeCompleted, events.NodeError, events.NodeCancelled} {
		s, err := fold(t, base, req, raise, added)
		require.NoError(t, err)
		s.State = end
		evs, err := Decide(s, RecordRebuilds{Meta: aggregate.Meta{ID: "x"}, Events: []events.Event{restored}})
		require.NoError(t, err)
		require.Len(t, evs, 1, "%s: the restore is the controller's cleanup after the end", end)
		_, err = fold(t, s, evs...)
		require.NoError(t, err, end)
		evs, err = Decide(s, RecordRebuilds{Meta: aggregate.Meta{ID: "y"}, Events: []events.Event{restored, events.RebuildFinished{Volume: "vol-a", At: at}}})
		require.NoError(t, err)
		assert.Empty(t, evs, "%s: nothing but restores after the end", end)
	}
}
