package plan

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBuildConcernsOnlyV2(t *testing.T) {
	c := cluster3(
		attached("a", "node-1", "node-1", "node-2"),
		detached("d", "node-1", "node-3"),
		v1(attached("old-attached", "node-1", "node-1", "node-2")),
		v1(detached("old-detached", "node-1")),
	)
	p := Build(c, []string{"node-1"}, newIM)
	require.Len(t, p.Nodes, 1)
	n := p.Nodes[0]
	assert.Equal(t, "node-1", n.Node)
	assert.Equal(t, oldIM, n.Image)
	assert.False(t, n.Unknown)
	require.Len(t, n.Switchovers, 1)
	assert.Equal(t, "a", n.Switchovers[0].Volume)
	assert.Equal(t, []ReplicaRef{{"a", "a-r-node-1"}}, n.Replicas, "a detached volume's replicas are not touched")
}

func TestBuildWholePlan(t *testing.T) {
	// node-2 hosts no target, node-3 one, node-1 two (wholeCluster): that is the order.
	c := wholeCluster()
	p := Build(c, nil, newIM)
	assert.Equal(t, []string{"node-2", "node-3", "node-1"}, p.Order())
	assert.True(t, p.Feasible())
	assert.Equal(t, Plan{TargetImage: newIM, Platform: inPlace, MaxConcurrentNodes: 1, Nodes: []NodePlan{
		{
			Node: "node-2", Wave: 1, Image: oldIM, Live: true,
			Replicas:      []ReplicaRef{{"b", "b-r-node-2"}},
			SingleReplica: []string{"b"},
		},
		{
			// node-2 is on the target image by then: it beats node-1, which
			// holds a replica of c.
			Node: "node-3", Wave: 2, Image: oldIM, Live: true,
			Switchovers: []Switchover{{
				Volume: "c", AttachedNode: "node-3", TemporaryTarget: "node-2", OK: true,
				Reason: "node-2 runs the target image im:v2, holds no healthy replica of c and hosts 0 other target(s)",
			}},
			Replicas:      []ReplicaRef{{"a", "a-r-node-3"}, {"c", "c-r-node-3"}},
			SingleReplica: []string{"a", "c"},
		},
		{
			// Both are on the target image now; locality decides for a, then
			// b goes to node-2, which holds its replica.
			Node: "node-1", Wave: 3, Image: oldIM, Live: true,
			Switchovers: []Switchover{
				{
					Volume: "a", AttachedNode: "node-1", TemporaryTarget: "node-3", OK: true,
					Reason: "node-3 runs the target image im:v2, holds a healthy replica of a and hosts 1 other target(s)",
				},
				{
					Volume: "b", AttachedNode: "node-1", TemporaryTarget: "node-2", OK: true,
					Reason: "node-2 runs the target image im:v2, holds a healthy replica of b and hosts 0 other target(s)",
				},
			},
			Replicas:      []ReplicaRef{{"a", "a-r-node-1"}, {"b", "b-r-node-1"}, {"c", "c-r-node-1"}},
			SingleReplica: []string{"a", "b", "c"},
		},
	}, Waves: []Wave{{Nodes: []string{"node-2"}}, {Nodes: []string{"node-3"}}, {Nodes: []string{"node-1"}}}}, p)
}

func TestBuildSimulatesEarlierNodesUpgraded(t *testing.T) {
	// Today nothing runs the target image, so ChooseTemporaryTarget picks
	// node-3 for vol (it holds a replica). In the plan node-2 comes first and
	// is upgraded by the time node-1's turn comes.
	c := cluster3(attached("vol", "node-1", "node-1", "node-3"), attached("other", "node-3", "node-1", "node-3"))

	today, _, ok := ChooseTemporaryTarget(c, c.Volumes[0], "node-1", newIM)
	require.True(t, ok)
	assert.Equal(t, "node-3", today)

	p := Build(c, []string{"node-1", "node-2"}, newIM)
	require.Equal(t, []string{"node-2", "node-1"}, p.Order())
	require.Len(t, p.Nodes[1].Switchovers, 1)
	assert.Equal(t, "node-2", p.Nodes[1].Switchovers[0].TemporaryTarget)

	// A node outside the plan is not simulated: upgrading only node-1, the
	// choice is today's.
	p = Build(c, []string{"node-1"}, newIM)
	assert.Equal(t, "node-3", p.Nodes[0].Switchovers[0].TemporaryTarget)
}

func TestBuildSpreadsTargetsOfOneNode(t *testing.T) {
	c := cluster3(
		attached("a", "node-1", "node-1"),
		attached("b", "node-1", "node-1"),
		attached("c", "node-1", "node-1"),
	)
	p := Build(c, []string{"node-1"}, newIM)
	var got []string
	for _, s := range p.Nodes[0].Switchovers {
		got = append(got, s.Volume+"->"+s.TemporaryTarget)
	}
	assert.Equal(t, []string{"a->node-2", "b->node-3", "c->node-2"}, got)
}

func TestBuildUnplaceableAndUnknown(t *testing.T) {
	c := cluster3(attached("vol", "node-1", "node-1", "node-2"))
	c.Nodes[1].Ready = false
	c.Nodes[2].Ready = false
	p := Build(c, []string{"node-1", "ghost"}, newIM)
	assert.False(t, p.Feasible())
	assert.Equal(t, []string{"ghost", "node-1"}, p.Order())
	assert.True(t, p.Nodes[0].Unknown)
	assert.Empty(t, p.Nodes[0].Image)
	s := p.Nodes[1].Switchovers[0]
	assert.False(t, s.OK)
	assert.Empty(t, s.TemporaryTarget)
	assert.Equal(t, "no node can host the target of vol while node-1 is upgraded: node-1 is the node being upgraded; node-2 is not ready; node-3 is not ready", s.Reason)

	c.Nodes[1].Ready = true
	assert.False(t, Build(c, []string{"node-1", "ghost"}, newIM).Feasible(), "an unknown node alone makes the plan infeasible")
	assert.True(t, Build(c, []string{"node-1"}, newIM).Feasible())
}

func TestBuildIsPureAndOrderIndependent(t *testing.T) {
	c := cluster3(
		attached("a", "node-1", "node-3", "node-1"),
		attached("b", "node-2", "node-1", "node-3"),
		detached("c", "node-3", "node-2"),
	)
	c.Nodes[0].AllowScheduling = true
	before := cloneCluster(c)
	p := Build(c, nil, newIM)
	assert.Equal(t, before, c, "Build must not modify its snapshot")
	assert.Equal(t, p, Build(c, nil, newIM))

	slices.Reverse(c.Nodes)
	slices.Reverse(c.InstanceManagers)
	slices.Reverse(c.Volumes)
	for i := range c.Volumes {
		slices.Reverse(c.Volumes[i].Replicas)
	}
	assert.Equal(t, p, Build(c, nil, newIM))
}

func TestBuildEmpty(t *testing.T) {
	assert.Equal(t, Plan{TargetImage: newIM, MaxConcurrentNodes: 1}, Build(Cluster{}, nil, newIM))
	assert.True(t, Plan{}.Feasible())
	assert.Empty(t, Plan{}.Order())
}

// cloneCluster deep-copies c, so a test can tell whether a function changed it.
func cloneCluster(c Cluster) Cluster {
	out := Cluster{Platform: c.Platform, DefaultImage: c.DefaultImage}
	for _, n := range c.Nodes {
		n.Images = slices.Clone(n.Images)
		out.Nodes = append(out.Nodes, n)
	}
	out.InstanceManagers = slices.Clone(c.InstanceManagers)
	for _, v := range c.Volumes {
		v.Replicas = slices.Clone(v.Replicas)
		out.Volumes = append(out.Volumes, v)
	}
	return out
}
