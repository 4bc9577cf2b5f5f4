package sim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/dataplane"
)

// The cases of longhorn-manager v1.12.1's own volume controller tests about
// replenishment, carried over as facts (their inputs and what they expect,
// not their code): the simulator's replica placement must agree.
// docs/longhorn-evidence.md §8.2 cites the tests.
func TestUpstreamReplenishmentCases(t *testing.T) {
	// The upstream template: a volume attached on node-1 with replicas on
	// node-1 and node-2, a spare node-3.
	layout := func(t *testing.T, wait time.Duration) *Sim {
		s, _ := cluster3(t, Config{ReplicaReplenishWait: wait}, VolumeSpec{Name: "vol-1", ReplicasOn: []string{"node-1", "node-2"}, AttachedTo: "node-1"})
		s.Settle()
		return s
	}
	t.Run("replica rebuilding - reuse failed replica", func(t *testing.T) {
		// Its node allows scheduling and the wait is 0: the failed replica
		// is reused (failedAt cleared, started again), and no replica is
		// added elsewhere.
		s := layout(t, 0)
		// As upstream's input has it: failed and stopped already.
		require.NoError(t, s.ForceStopReplica("vol-1", "vol-1-r-1"))
		s.Settle()
		v := vol(t, s, "vol-1")
		r := replicaNamed(t, v, "vol-1-r-1")
		assert.False(t, r.Failed, "failedAt cleared")
		assert.True(t, r.Running, "started again")
		assert.Len(t, v.Replicas, 2, "no replica added on node-3")
	})
	t.Run("replica rebuilding - delay replica replenishment", func(t *testing.T) {
		// The failed replica's node does not allow scheduling and the wait
		// never ends: nothing changes, no reuse and no new replica.
		s := layout(t, -1)
		require.NoError(t, s.SetReplicaScheduling(ctx, "node-2", false))
		retire(t, s, "vol-1", "vol-1-r-2")
		s.Settle()
		s.Advance(time.Hour)
		v := vol(t, s, "vol-1")
		assert.True(t, replicaNamed(t, v, "vol-1-r-2").Failed, "not reused")
		assert.Len(t, v.Replicas, 2, "no replica added on node-3")
		assert.Equal(t, dataplane.RobustnessDegraded, v.Robustness)
	})
}
