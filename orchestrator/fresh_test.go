package orchestrator

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/eventstore"
)

func TestIncludes(t *testing.T) {
	ref := events.ManagerRef{Namespace: "ns", Name: "m", UID: "u"}
	node := events.NodeAggregate(ref, "n1")
	e := events.Envelope{Aggregate: node, Sequence: 42}
	assert.Equal(t, uint64(42), includes(e, node), "the event's own aggregate must reach it")
	assert.Zero(t, includes(e, events.ManagerAggregate(ref)), "another aggregate: any fold")
	assert.Zero(t, includes(events.Envelope{Aggregate: node}, node), "an event not read from a stream")
}

func TestReadFresh(t *testing.T) {
	agg := events.NodeAggregate(events.ManagerRef{Namespace: "ns", Name: "m", UID: "u"}, "n1")
	boom := errors.New("no responders")
	tests := []struct {
		name     string
		versions []uint64 // what successive loads return; the last repeats
		fail     error
		atLeast  uint64
		want     uint64
		wantErr  error
		loads    int
	}{
		{name: "fresh at once", versions: []uint64{7}, atLeast: 7, want: 7, loads: 1},
		{name: "newer than needed", versions: []uint64{9}, atLeast: 7, want: 9, loads: 1},
		{name: "no event to include", versions: []uint64{0}, want: 0, loads: 1},
		{name: "a follower catches up", versions: []uint64{5, 6, 7}, atLeast: 7, want: 7, loads: 3},
		{name: "never catches up", versions: []uint64{5}, atLeast: 7, want: 5, wantErr: ErrStaleRead},
		{name: "a load error is returned as it is", fail: boom, atLeast: 7, wantErr: boom, loads: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			loads := 0
			load := func(_ context.Context, got events.AggregateID) (eventstore.Loaded[int], error) {
				require.Equal(t, agg, got)
				loads++
				if tt.fail != nil {
					return eventstore.Loaded[int]{}, tt.fail
				}
				return eventstore.Loaded[int]{Version: tt.versions[min(loads, len(tt.versions))-1]}, nil
			}
			l, err := readFresh(context.Background(), load, agg, tt.atLeast, 40*time.Millisecond)
			require.ErrorIs(t, err, tt.wantErr)
			if tt.wantErr == nil {
				require.NoError(t, err)
			}
			assert.Equal(t, tt.want, l.Version)
			if tt.loads > 0 {
				assert.Equal(t, tt.loads, loads)
			} else {
				assert.Greater(t, loads, 1, "read again before giving up")
			}
		})
	}
}

func TestReadFreshStopsWithTheContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	load := func(context.Context, events.AggregateID) (eventstore.Loaded[int], error) {
		return eventstore.Loaded[int]{Version: 1}, nil
	}
	_, err := readFresh(ctx, load, events.AggregateID{}, 2, time.Hour)
	require.ErrorIs(t, err, context.Canceled)
}
