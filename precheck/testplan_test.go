package precheck

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/switchback-dev/switchback/dataplane"
)

// TestProposalTestPlan runs the examples of the design proposal's test plan
// (the prechecks of docs/upgrade-flows.md): three nodes, every node
// upgraded, e = engine (target), r = replica.
func TestProposalTestPlan(t *testing.T) {
	all := []string{"node-1", "node-2", "node-3"}
	tests := []struct {
		name     string
		vols     []dataplane.Volume
		accepted bool
		message  string
	}{
		{
			name:    "refused: vol-1 has a single replica on node 1, its engine on node 1",
			vols:    []dataplane.Volume{vol("vol-1", "node-1", "node-1")},
			message: mustBe + "vol-1 has a single replica",
		},
		{
			name:    "refused: vol-1 has a single replica on node 2, its engine on node 1",
			vols:    []dataplane.Volume{vol("vol-1", "node-1", "node-2")},
			message: mustBe + "vol-1 has a single replica",
		},
		{
			name: "accepted: three volumes with 3 replicas each, engines all on node 1",
			vols: []dataplane.Volume{
				vol("vol-1", "node-1", all...), vol("vol-2", "node-1", all...), vol("vol-3", "node-1", all...),
			},
			accepted: true,
			message:  "every attached v2 volume on the nodes to upgrade is healthy and has more than one replica (3)",
		},
		{
			name: "accepted: replicas only on nodes 2 and 3",
			vols: []dataplane.Volume{
				vol("vol-1", "node-1", "node-2", "node-3"), vol("vol-2", "node-2", "node-2", "node-3"), vol("vol-3", "node-3", "node-2", "node-3"),
			},
			accepted: true,
			message:  "every attached v2 volume on the nodes to upgrade is healthy and has more than one replica (3)",
		},
		{
			name: "accepted: engines spread over nodes 1, 2 and 3",
			vols: []dataplane.Volume{
				vol("vol-1", "node-1", all...), vol("vol-2", "node-2", all...), vol("vol-3", "node-3", all...),
			},
			accepted: true,
			message:  "every attached v2 volume on the nodes to upgrade is healthy and has more than one replica (3)",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rs := Run(input(cluster(3, tt.vols...)))
			assert.Equal(t, tt.accepted, Passed(rs), Summary(rs))
			last := rs[len(rs)-1]
			assert.Equal(t, VolumesHealthy, last.Check)
			assert.Equal(t, tt.accepted, last.Passed)
			assert.Equal(t, tt.message, last.Message)
			for _, r := range rs[:len(rs)-1] {
				assert.True(t, r.Passed, "only VolumesHealthy decides here; %s: %s", r.Check, r.Message)
			}
		})
	}
}

// TestV1VolumesIgnored: the same single-replica layouts as v1 volumes do not
// refuse a v2 upgrade; v1 never lives in a v2 instance manager.
func TestV1VolumesIgnored(t *testing.T) {
	a := vol("vol-1", "node-1", "node-1")
	b := vol("vol-2", "node-1", "node-2")
	a.DataEngine, b.DataEngine = "v1", "v1"
	rs := Run(input(cluster(3, a, b)))
	assert.True(t, Passed(rs), Summary(rs))
}
