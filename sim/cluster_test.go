package sim

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/dataplane"
)

func TestVolumesOnMatchesAFilteredList(t *testing.T) {
	s := Random(7, RandomOptions{Nodes: 6, Volumes: 30})
	ctx := t.Context()
	all, err := s.Volumes(ctx)
	require.NoError(t, err)
	for _, n := range []string{"node-1", "node-2", "node-6", "nowhere"} {
		var want []string
		for _, v := range all {
			on := v.AttachedNode == n || v.TargetNode == n
			for _, r := range v.Replicas {
				on = on || r.Node == n
			}
			if on {
				want = append(want, v.Name)
			}
		}
		got, err := s.VolumesOn(ctx, n)
		require.NoError(t, err)
		var names []string
		for _, v := range got {
			names = append(names, v.Name)
		}
		assert.Equal(t, want, names, "node %s", n)
	}
}

// TestTargetCountsMatchACountedList: the kept counts equal counting every
// exported volume, on varied clusters and after attaches, detaches and
// target moves.
func TestTargetCountsMatchACountedList(t *testing.T) {
	ctx := t.Context()
	check := func(s *Sim, when string) {
		t.Helper()
		vols, err := s.Volumes(ctx)
		require.NoError(t, err)
		got, err := s.TargetCounts(ctx)
		require.NoError(t, err)
		require.Equal(t, dataplane.CountTargets(vols), got, when)
	}
	for seed := range int64(30) {
		clock := NewFakeClock(DefaultStart)
		s := Random(seed, RandomOptions{Faults: seed%2 == 0, Config: Config{Clock: clock}})
		check(s, fmt.Sprintf("seed %d as built", seed))
		nodes, err := s.Nodes(ctx)
		require.NoError(t, err)
		vols, err := s.Volumes(ctx)
		require.NoError(t, err)
		for i, v := range vols {
			other := nodes[(i+1)%len(nodes)].Name
			if v.Attached() {
				// An error (v1 volume, node not ready) changes nothing and
				// must leave the counts right as well.
				_ = s.SetEngineNode(ctx, v.Name, other)
				clock.Advance(time.Minute)
				check(s, fmt.Sprintf("seed %d, %s moved to %s", seed, v.Name, other))
				require.NoError(t, s.DetachVolume(v.Name))
			} else {
				_ = s.AttachVolume(v.Name, other)
			}
			check(s, fmt.Sprintf("seed %d, %s attached or detached", seed, v.Name))
		}
	}
}
