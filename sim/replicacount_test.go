package sim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/dataplane"
)

// A raised numberOfReplicas is replenished on a node without a replica at
// once (no failed replica to wait for); the volume keeps serving from its
// replicas meanwhile, and a count set again is a no-op.
func TestSetReplicaCountAddsAReplicaElsewhere(t *testing.T) {
	s, fc := cluster3(t, Config{RebuildLatency: 10 * time.Second},
		VolumeSpec{Name: "vol-1", ReplicasOn: []string{"node-1", "node-2"}, AttachedTo: "node-1"})
	require.NoError(t, s.SetReplicaCount(ctx, "vol-1", dataplane.ReplicaSpec{NumberOfReplicas: 3, ReplicaAutoBalance: dataplane.AutoBalanceDisabled}))
	v := vol(t, s, "vol-1")
	require.Len(t, v.Replicas, 3)
	assert.Equal(t, "node-3", v.Replicas[2].Node)
	assert.Equal(t, dataplane.ReplicaRebuilding, v.Replicas[2].State)
	assert.Equal(t, 3, v.NumberOfReplicas)
	assert.Equal(t, dataplane.AutoBalanceDisabled, v.ReplicaAutoBalance)
	assert.Equal(t, "disabled", v.DataLocality, "left as it was")
	fc.Advance(10 * time.Second)
	assert.Equal(t, 3, vol(t, s, "vol-1").HealthyReplicas())
	n := len(mustLog(s))
	require.NoError(t, s.SetReplicaCount(ctx, "vol-1", dataplane.ReplicaSpec{NumberOfReplicas: 3}))
	assert.True(t, mustLog(s)[n].NoOp)
	assert.ErrorIs(t, s.SetReplicaCount(ctx, "vol-1", dataplane.ReplicaSpec{NumberOfReplicas: 0}), dataplane.ErrRefused)
	assert.ErrorIs(t, s.SetReplicaCount(ctx, "nope", dataplane.ReplicaSpec{NumberOfReplicas: 1}), dataplane.ErrNotFound)
}

// Lowering numberOfReplicas below the healthy count deletes a replica
// only with data locality or auto-balance on (RuleExtraReplicaCleanup),
// and not necessarily the one added last: with both disabled, none, and
// deleting the one the caller means is left to it.
func TestRule_ExtraReplicaCleanup(t *testing.T) {
	for _, tc := range []struct {
		name               string
		autoBalance, local string
		disable            []Rule
		want               []string
	}{
		{name: "both disabled", autoBalance: "disabled", local: "disabled", want: []string{"vol-1-r-1", "vol-1-r-2", "vol-1-r-3"}},
		{name: "ignored follows the global setting, disabled", autoBalance: "ignored", local: "disabled", want: []string{"vol-1-r-1", "vol-1-r-2", "vol-1-r-3"}},
		{name: "auto-balance deletes by its own choice", autoBalance: "best-effort", local: "disabled", want: []string{"vol-1-r-2", "vol-1-r-3"}},
		{name: "data locality deletes the smallest off the engine's node", autoBalance: "disabled", local: "best-effort", want: []string{"vol-1-r-1", "vol-1-r-3"}},
		{name: "rule off", autoBalance: "best-effort", local: "disabled", disable: []Rule{RuleExtraReplicaCleanup}, want: []string{"vol-1-r-1", "vol-1-r-2", "vol-1-r-3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := cluster3(t, Config{Disable: tc.disable},
				VolumeSpec{Name: "vol-1", ReplicasOn: three, NumberOfReplicas: 3, AttachedTo: "node-1", ReplicaAutoBalance: tc.autoBalance, DataLocality: tc.local})
			require.NoError(t, s.SetReplicaCount(ctx, "vol-1", dataplane.ReplicaSpec{NumberOfReplicas: 2}))
			var names []string
			for _, r := range vol(t, s, "vol-1").Replicas {
				names = append(names, r.Name)
			}
			assert.Equal(t, tc.want, names)
		})
	}
}

// With Config.FullRedundancy an attached volume serving from fewer nodes
// than it was built with is unsafe; without it, only one with none is.
func TestUnsafeRedundancy(t *testing.T) {
	for _, full := range []bool{false, true} {
		s, _ := cluster3(t, Config{FullRedundancy: full, RebuildLatency: time.Hour},
			VolumeSpec{Name: "vol-1", ReplicasOn: []string{"node-1", "node-2"}, AttachedTo: "node-1"})
		assert.Empty(t, s.Unsafe(""))
		require.NoError(t, s.SetReplicaScheduling(ctx, "node-2", false))
		retire(t, s, "vol-1", "vol-1-r-2")
		got := s.Unsafe("")
		if !full {
			assert.Empty(t, got)
			assert.Empty(t, s.IOStats().Breaches)
			continue
		}
		require.Len(t, got, 1)
		assert.Equal(t, UnsafeRedundancy, got[0].Kind)
		assert.Contains(t, got[0].Detail, "healthy replicas on 1 node(s), built with 2")
		breaches := s.IOStats().Breaches
		require.Len(t, breaches, 1, "recorded as it happened")
		assert.Contains(t, breaches[0].Detail, "built with 2")
	}
}

func mustLog(s *Sim) []ActionRecord {
	l, _ := s.ActionLog()
	return l
}
