package plan

import (
	"testing"

	"github.com/switchback-dev/switchback/test/harness/dataplanetest"

	"github.com/stretchr/testify/assert"

	"github.com/switchback-dev/switchback/dataplane"
)

func TestInstanceManagerImage(t *testing.T) {
	stopped := func(node, image string) dataplane.InstanceManager {
		im := dataplanetest.RunningIM(node, image)
		im.State = dataplane.IMStopped
		return im
	}
	starting := func(node, image string) dataplane.InstanceManager {
		im := dataplanetest.RunningIM(node, image)
		im.State = dataplane.IMStarting
		return im
	}
	otherEngine := dataplanetest.RunningIM("n5", "im:v1-engine")
	otherEngine.DataEngine = "v1"
	c := Cluster{InstanceManagers: []dataplane.InstanceManager{
		dataplanetest.RunningIM("n1", "im:b"), stopped("n1", "im:a"), // the running one counts
		stopped("n2", "im:a"),                                                        // none running: the one it has
		dataplanetest.RunningIM("n3", "im:b"), dataplanetest.RunningIM("n3", "im:a"), // caught between two
		otherEngine,                                   // not a v2 IM
		stopped("n6", "im:a"), starting("n6", "im:b"), // the replacement counts
	}}
	assert.Equal(t, "im:b", c.InstanceManagerImage("n1"))
	assert.Equal(t, "im:a", c.InstanceManagerImage("n2"))
	assert.Equal(t, "im:a+im:b", c.InstanceManagerImage("n3"))
	assert.Equal(t, "", c.InstanceManagerImage("n4"))
	assert.Equal(t, "", c.InstanceManagerImage("n5"))
	assert.Equal(t, "im:b", c.InstanceManagerImage("n6"))
}

func TestConcerned(t *testing.T) {
	moved := attached("moved", "node-1", "node-3")
	moved.TargetNode = "node-2"
	tests := []struct {
		vol  dataplane.Volume
		node string
		want bool
	}{
		{attached("target", "node-1", "node-2"), "node-1", true},
		{attached("replica", "node-2", "node-1"), "node-1", true},
		{attached("elsewhere", "node-2", "node-3"), "node-1", false},
		{detached("detached", "node-1"), "node-1", true},
		{detached("detached", "node-2"), "node-1", false},
		{v1(attached("v1", "node-1", "node-1")), "node-1", false},
		{moved, "node-2", true},  // its target runs there now
		{moved, "node-1", false}, // only the initiator is there
		{attached("empty", "", ""), "", false},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, Concerned(tt.vol, tt.node), "%s on %s", tt.vol.Name, tt.node)
	}
}

func TestV2NodesAndNode(t *testing.T) {
	c := Cluster{Nodes: []dataplane.Node{dataplanetest.V2Node("b"), {Name: "v1-only"}, dataplanetest.V2Node("a"), dataplanetest.V2Node("b")}}
	assert.Equal(t, []string{"a", "b"}, c.V2Nodes())
	n, ok := c.Node("a")
	assert.True(t, ok)
	assert.Equal(t, "a", n.Name)
	_, ok = c.Node("ghost")
	assert.False(t, ok)
}
