package plan

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/test/harness/dataplanetest"
)

func TestFootprint(t *testing.T) {
	moved := attached("moved", "node-1", "node-2", "node-3")
	moved.TargetNode, moved.EngineNode = "node-4", "node-4"
	moved.Away = &dataplane.TargetAway{Node: "node-5", EngineNodeBefore: "node-6", Temporary: "node-4"}
	failed := attached("failed", "node-1", "node-1", "node-2")
	failed.Replicas[1].Failed, failed.Replicas[1].State = true, dataplane.ReplicaStopped
	for _, tc := range []struct {
		name string
		vol  dataplane.Volume
		want []string
	}{
		{"attached: initiator, target and replicas", attached("a", "node-1", "node-2", "node-3"), []string{"node-1", "node-2", "node-3"}},
		{"a failed replica counts: Longhorn may reuse it", failed, []string{"node-1", "node-2"}},
		{"a target away: its temporary node, its home and the node whose upgrade moved it", moved, []string{"node-1", "node-2", "node-3", "node-4", "node-5", "node-6"}},
		{"detached: nothing runs", detached("d", "node-1", "node-2"), nil},
		{"v1: not upgraded", v1(attached("v", "node-1", "node-1", "node-2")), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, Footprint(tc.vol))
		})
	}
}

// sixNodes is six v2 nodes with three attached volumes, each on its own
// pair of nodes except that vol-c shares node-5 with vol-b: node-1/2,
// node-3/4 and node-4/5 hold volumes, node-6 none.
func sixNodes() Cluster {
	c := cluster3(
		attached("vol-a", "node-1", "node-1", "node-2"),
		attached("vol-b", "node-3", "node-3", "node-4"),
		attached("vol-c", "node-5", "node-5", "node-4"),
	)
	for _, n := range []string{"node-4", "node-5", "node-6"} {
		c.Nodes = append(c.Nodes, dataplanetest.V2Node(n))
		c.InstanceManagers = append(c.InstanceManagers, dataplanetest.RunningIM(n, oldIM))
	}
	return c
}

// Waves take the nodes in today's order, each wave every node left that
// shares no volume with a node already in it, up to the limit; a node
// passed over says why. One at a time is today's order, one node a wave.
func TestBuildWaves(t *testing.T) {
	c := sixNodes()
	order := Build(c, nil, newIM).Order()
	require.Equal(t, []string{"node-2", "node-4", "node-6", "node-1", "node-3", "node-5"}, order)
	for _, tc := range []struct {
		limit  int
		waves  [][]string
		waited map[string]string
	}{
		{limit: 1, waves: [][]string{{"node-2"}, {"node-4"}, {"node-6"}, {"node-1"}, {"node-3"}, {"node-5"}}, waited: map[string]string{}},
		{limit: 2, waves: [][]string{{"node-2", "node-4"}, {"node-6", "node-1"}, {"node-3", "node-5"}}, waited: map[string]string{
			"node-6": "wave 1 had its 2 node(s)", "node-1": "volume vol-a depends on it and on node-2 (wave 1)",
			"node-3": "wave 2 had its 2 node(s)", "node-5": "wave 2 had its 2 node(s)"}},
		{limit: 4, waves: [][]string{{"node-2", "node-4", "node-6"}, {"node-1", "node-3", "node-5"}}, waited: map[string]string{
			"node-1": "volume vol-a depends on it and on node-2 (wave 1)", "node-3": "volume vol-b depends on it and on node-4 (wave 1)",
			"node-5": "volume vol-c depends on it and on node-4 (wave 1)"}},
	} {
		p := BuildWaves(c, nil, newIM, tc.limit)
		var waves [][]string
		for _, w := range p.Waves {
			waves = append(waves, w.Nodes)
		}
		assert.Equal(t, tc.waves, waves, "limit %d", tc.limit)
		waited := map[string]string{}
		for _, n := range p.Nodes {
			if n.Waited != "" {
				waited[n.Node] = n.Waited
			}
		}
		assert.Equal(t, tc.waited, waited, "limit %d", tc.limit)
		for _, n := range p.Nodes {
			for _, s := range n.Switchovers {
				assert.NotContains(t, p.Waves[n.Wave-1].Nodes, s.TemporaryTarget, "a temporary target in its own wave")
			}
		}
	}
	one := BuildWaves(c, nil, newIM, 1)
	one.Waves, one.MaxConcurrentNodes = nil, 0
	plain := Build(c, nil, newIM)
	plain.Waves, plain.MaxConcurrentNodes = nil, 0
	assert.Equal(t, plain, one)

	out := BuildWaves(c, nil, newIM, 4).String()
	assert.Contains(t, out, "Waves (up to 4 nodes at once; two nodes share a wave only if no attached volume depends on both):\n"+
		"WAVE  NODES\n1     node-2, node-4, node-6\n2     node-1, node-3, node-5\n"+
		"Why a node could not join the wave before its own:\n"+
		"  node-1 (wave 2): volume vol-a depends on it and on node-2 (wave 1)\n")
	assert.NotContains(t, Build(c, nil, newIM).String(), "Waves")
}
