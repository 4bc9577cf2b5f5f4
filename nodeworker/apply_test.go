package nodeworker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/dataplane"
)

// slowPlane holds every snapshot call until a second one is in flight
// (so a test passes only if they run at once, whatever the machine's load)
// and records how many were in flight; it refuses the snapshots of the
// volumes in refuse.
type slowPlane struct {
	dataplane.DataPlane
	refuse map[string]bool

	mu             sync.Mutex
	inFlight, most int
	calls          []string
	together       chan struct{} // closed once two calls are in flight
}

func (p *slowPlane) note(call string, delta int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.inFlight += delta
	p.most = max(p.most, p.inFlight)
	if delta > 0 {
		p.calls = append(p.calls, call)
	}
	if p.inFlight >= 2 && p.together != nil {
		select {
		case <-p.together:
		default:
			close(p.together)
		}
	}
}

func (p *slowPlane) CreateSnapshot(_ context.Context, volume, _ string) error {
	p.note("CreateSnapshot", 1)
	defer p.note("", -1)
	select {
	case <-p.together:
	case <-time.After(10 * time.Second):
		return errors.New("no other snapshot call came while this one was in flight")
	}
	if p.refuse[volume] {
		return fmt.Errorf("refused %s", volume)
	}
	return nil
}

func (p *slowPlane) SetReplicaScheduling(context.Context, string, bool) error {
	p.note("SetReplicaScheduling", 1)
	p.note("", -1)
	return nil
}

func (p *slowPlane) FailReplica(context.Context, string, string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	// Every snapshot call has answered before the next action starts.
	if p.inFlight != 0 {
		return errors.New("FailReplica while snapshot calls are in flight")
	}
	p.calls = append(p.calls, "FailReplica")
	return nil
}

// TestActAllRunsSnapshotsAtOnceInBounds: a run of snapshot calls runs
// several at once, never more than snapshotCalls, between the actions
// before and after it, which keep their order; its errors come back in
// plan order whatever the order of the answers.
func TestActAllRunsSnapshotsAtOnceInBounds(t *testing.T) {
	p := &slowPlane{refuse: map[string]bool{"vol-07": true, "vol-31": true}, together: make(chan struct{})}
	r := &run{w: &Worker{cfg: Config{DataPlane: p}}}
	actions := []dataplane.Action{{Call: dataplane.CallSetReplicaScheduling, Object: "n1"}}
	for i := range 40 {
		actions = append(actions, dataplane.Action{Call: dataplane.CallCreateSnapshot, Object: fmt.Sprintf("vol-%02d", i), Arg: "snap"})
	}
	actions = append(actions, dataplane.Action{Call: dataplane.CallFailReplica, Object: "vol-00", Arg: "r"})

	err := r.actAll(context.Background(), actions[:len(actions)-1])
	require.Error(t, err)
	assert.Equal(t, "CreateSnapshot vol-07 snap: refused vol-07\nCreateSnapshot vol-31 snap: refused vol-31", err.Error())
	assert.Greater(t, p.most, 1, "snapshot calls ran one at a time")
	assert.LessOrEqual(t, p.most, snapshotCalls)
	assert.Equal(t, "SetReplicaScheduling", p.calls[0])

	p.refuse, p.calls, p.together = nil, nil, make(chan struct{})
	require.NoError(t, r.actAll(context.Background(), actions))
	assert.Len(t, p.calls, len(actions))
	assert.Equal(t, "FailReplica", p.calls[len(p.calls)-1])
}
