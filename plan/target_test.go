package plan

import (
	"fmt"
	"testing"

	"github.com/switchback-dev/switchback/test/harness/dataplanetest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/dataplane"
)

func TestChooseTemporaryTargetPreferences(t *testing.T) {
	base := func() Cluster {
		c := cluster3()
		c.Nodes = append(c.Nodes, dataplanetest.V2Node("node-4"))
		c.InstanceManagers = append(c.InstanceManagers, dataplanetest.RunningIM("node-4", oldIM))
		return c
	}
	tests := []struct {
		name   string
		setup  func(c *Cluster) dataplane.Volume
		want   string
		reason string
	}{
		{
			name: "the target image beats locality and load",
			setup: func(c *Cluster) dataplane.Volume {
				c.InstanceManagers[3] = dataplanetest.RunningIM("node-4", newIM)
				c.Volumes = []dataplane.Volume{attached("busy", "node-4", "node-2")}
				return attached("vol", "node-1", "node-1", "node-2", "node-3")
			},
			want:   "node-4",
			reason: "node-4 runs the target image im:v2, holds no healthy replica of vol and hosts 1 other target(s)",
		},
		{
			name: "then a healthy replica beats load",
			setup: func(c *Cluster) dataplane.Volume {
				c.Volumes = []dataplane.Volume{attached("busy", "node-3", "node-2")}
				return attached("vol", "node-1", "node-1", "node-3")
			},
			want:   "node-3",
			reason: "node-3 does not run the target image im:v2 yet (runs im:v1), holds a healthy replica of vol and hosts 1 other target(s)",
		},
		{
			name: "a replica that is not running is no locality",
			setup: func(c *Cluster) dataplane.Volume {
				v := attached("vol", "node-1", "node-1", "node-3")
				v.Replicas[1].State = dataplane.ReplicaRebuilding
				c.Volumes = []dataplane.Volume{attached("busy", "node-3", "node-2")}
				return v
			},
			want:   "node-2",
			reason: "node-2 does not run the target image im:v2 yet (runs im:v1), holds no healthy replica of vol and hosts 0 other target(s)",
		},
		{
			name: "then the fewest targets",
			setup: func(c *Cluster) dataplane.Volume {
				c.Volumes = []dataplane.Volume{attached("x", "node-2", "node-1"), attached("y", "node-3", "node-1"), attached("z", "node-3", "node-1")}
				return attached("vol", "node-1", "node-1")
			},
			want:   "node-4",
			reason: "node-4 does not run the target image im:v2 yet (runs im:v1), holds no healthy replica of vol and hosts 0 other target(s)",
		},
		{
			name: "then the name",
			setup: func(c *Cluster) dataplane.Volume {
				return attached("vol", "node-1", "node-1")
			},
			want:   "node-2",
			reason: "node-2 does not run the target image im:v2 yet (runs im:v1), holds no healthy replica of vol and hosts 0 other target(s)",
		},
		{
			name: "NotReady, non-v2 and IM-less nodes are skipped",
			setup: func(c *Cluster) dataplane.Volume {
				c.Nodes[1].Ready = false // node-2
				c.Nodes[2].Ready = false // node-3
				c.Nodes[3].V2 = false    // node-4
				c.Nodes = append(c.Nodes, dataplanetest.V2Node("node-5"), dataplanetest.V2Node("node-6"))
				c.InstanceManagers = append(c.InstanceManagers, dataplane.InstanceManager{
					Name: "im-node-5", Node: "node-5", Image: newIM, DataEngine: dataplane.DataEngineV2, State: dataplane.IMStarting,
				}, dataplanetest.RunningIM("node-6", oldIM))
				return attached("vol", "node-1", "node-1", "node-2", "node-3")
			},
			want:   "node-6",
			reason: "node-6 does not run the target image im:v2 yet (runs im:v1), holds no healthy replica of vol and hosts 0 other target(s)",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := base()
			vol := tt.setup(&c)
			node, reason, ok := ChooseTemporaryTarget(c, vol, "node-1", newIM)
			assert.True(t, ok, reason)
			assert.Equal(t, tt.want, node)
			assert.Equal(t, tt.reason, reason)
		})
	}
}

func TestChooseTemporaryTargetNoCandidate(t *testing.T) {
	vol := attached("vol", "node-1", "node-1", "node-2")
	tests := []struct {
		name   string
		c      Cluster
		vol    dataplane.Volume
		reason string
	}{
		{
			name:   "empty cluster",
			c:      Cluster{},
			vol:    vol,
			reason: "no node can host the target of vol while node-1 is upgraded: the cluster has no other node",
		},
		{
			name:   "single node",
			c:      Cluster{Nodes: []dataplane.Node{dataplanetest.V2Node("node-1")}, InstanceManagers: []dataplane.InstanceManager{dataplanetest.RunningIM("node-1", newIM)}},
			vol:    vol,
			reason: "no node can host the target of vol while node-1 is upgraded: node-1 is the node being upgraded",
		},
		{
			name: "every other node ruled out, each for its own reason",
			c: func() Cluster {
				c := cluster3()
				c.Nodes[1].Ready = false
				c.Nodes[2].V2 = false
				c.Nodes = append(c.Nodes,
					dataplane.Node{Name: "node-4", Ready: true},
					dataplanetest.V2Node("node-5"), dataplanetest.V2Node("node-6"), dataplanetest.V2Node("node-7"))
				stopped := dataplanetest.RunningIM("node-5", newIM)
				stopped.State = dataplane.IMStopped
				crashed := dataplanetest.RunningIM("node-7", newIM)
				crashed.State = dataplane.IMError
				c.InstanceManagers = append(c.InstanceManagers, dataplanetest.RunningIM("node-4", newIM), stopped, crashed)
				return c
			}(),
			vol: vol,
			reason: "no node can host the target of vol while node-1 is upgraded: " +
				"node-1 is the node being upgraded; node-2 is not ready; node-3 does not run the v2 data engine; " +
				"node-4 does not run the v2 data engine; node-5 has no running v2 instance manager; " +
				"node-6 has no running v2 instance manager; node-7 has no running v2 instance manager",
		},
		{
			name: "an IM of another data engine is no v2 instance manager",
			c: func() Cluster {
				c := cluster3()
				c.Nodes = c.Nodes[:2]
				c.InstanceManagers = []dataplane.InstanceManager{dataplanetest.RunningIM("node-1", oldIM), dataplanetest.RunningIM("node-2", oldIM)}
				c.InstanceManagers[1].DataEngine = "v1"
				return c
			}(),
			vol:    vol,
			reason: "no node can host the target of vol while node-1 is upgraded: node-1 is the node being upgraded; node-2 has no running v2 instance manager",
		},
		{
			name:   "v1 volume",
			c:      cluster3(),
			vol:    v1(vol),
			reason: "vol is not a v2 volume: its target does not live in a v2 instance manager",
		},
		{
			name:   "detached volume",
			c:      cluster3(),
			vol:    detached("vol", "node-1"),
			reason: "vol is detached: it has no target to move",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			node, reason, ok := ChooseTemporaryTarget(tt.c, tt.vol, "node-1", newIM)
			assert.False(t, ok)
			assert.Empty(t, node)
			assert.Equal(t, tt.reason, reason)
		})
	}
}

func TestChooseTemporaryTargetIsStableAfterTheSwitchOver(t *testing.T) {
	// Once vol's target runs on the chosen node, asking again (a worker that
	// restarted mid-step) must give the same node: vol's own target does not
	// count against it.
	c := cluster3(attached("vol", "node-1", "node-1"))
	first, _, ok := ChooseTemporaryTarget(c, c.Volumes[0], "node-1", newIM)
	assert.True(t, ok)
	assert.Equal(t, "node-2", first)

	c.Volumes[0].TargetNode = first
	c.Volumes[0].EngineNode = first
	again, reason, ok := ChooseTemporaryTarget(c, c.Volumes[0], "node-1", newIM)
	assert.True(t, ok)
	assert.Equal(t, first, again)
	assert.Contains(t, reason, "hosts 0 other target(s)")
}

func TestChooseTemporaryTargetWithoutTargetImage(t *testing.T) {
	node, reason, ok := ChooseTemporaryTarget(cluster3(), attached("vol", "node-1", "node-1"), "node-1", "")
	assert.True(t, ok)
	assert.Equal(t, "node-2", node)
	assert.Equal(t, "node-2 runs im:v1 (no target image given), holds no healthy replica of vol and hosts 0 other target(s)", reason)
}

func TestChooserSpreadsAndMatchesChooseTemporaryTarget(t *testing.T) {
	c := Cluster{DefaultImage: "im:new"}
	for _, n := range []string{"a", "b", "c"} {
		c.Nodes = append(c.Nodes, dataplane.Node{Name: n, Ready: true, V2: true})
		c.InstanceManagers = append(c.InstanceManagers, dataplane.InstanceManager{Name: "im-" + n, Node: n, Image: "im:old", DataEngine: "v2", State: dataplane.IMRunning})
	}
	var vols []dataplane.Volume
	for i := range 4 {
		vols = append(vols, dataplane.Volume{Name: fmt.Sprintf("v%d", i), DataEngine: "v2", NumberOfReplicas: 2, AttachedNode: "a", TargetNode: "a",
			Replicas: []dataplane.Replica{{Name: "r", Node: "a", State: dataplane.ReplicaRunning}}})
	}
	c.Volumes = vols
	first, _, ok := ChooseTemporaryTarget(c, vols[0], "a", "im:new")
	require.True(t, ok)
	ch := NewChooser(c)
	got := map[string]int{}
	for i, v := range vols {
		n, _, ok := ch.Choose(v, "a", "im:new")
		require.True(t, ok)
		if i == 0 {
			assert.Equal(t, first, n, "the first choice is ChooseTemporaryTarget's")
		}
		got[n]++
	}
	assert.Equal(t, map[string]int{"b": 2, "c": 2}, got, "targets are spread over the candidates")
}
