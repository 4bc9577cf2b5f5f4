package sim

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
