package plan

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/switchback-dev/switchback/dataplane"
)

func TestTargetNodes(t *testing.T) {
	// node-1 hosts two targets, node-3 one, node-2 none; node-4 is not v2.
	c := cluster3(
		attached("a", "node-1", "node-2", "node-3"),
		attached("b", "node-1", "node-2", "node-3"),
		attached("c", "node-3", "node-1", "node-2"),
		detached("d", "node-1"),
		v1(attached("e", "node-2", "node-1")),
		v1(attached("f", "node-2", "node-1")),
	)
	c.Nodes = append(c.Nodes, dataplane.Node{Name: "node-4", Ready: true})

	tests := []struct {
		name      string
		requested []string
		want      []string
	}{
		{"every v2 node, fewest targets first", nil, []string{"node-2", "node-3", "node-1"}},
		{"requested subset, same rule", []string{"node-1", "node-3"}, []string{"node-3", "node-1"}},
		{"duplicates and empty names dropped", []string{"node-1", "", "node-1"}, []string{"node-1"}},
		{"unknown names kept, for the plan to show", []string{"node-1", "ghost"}, []string{"ghost", "node-1"}},
		{"ties broken by name", []string{"node-4", "node-2"}, []string{"node-2", "node-4"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, TargetNodes(c, tt.requested))
		})
	}
}

func TestTargetNodesIgnoresSnapshotOrder(t *testing.T) {
	c := cluster3(attached("a", "node-1", "node-2"), attached("b", "node-3", "node-2"), attached("c", "node-3", "node-1"))
	want := TargetNodes(c, nil)
	assert.Equal(t, []string{"node-2", "node-1", "node-3"}, want)

	slices.Reverse(c.Nodes)
	slices.Reverse(c.Volumes)
	slices.Reverse(c.InstanceManagers)
	assert.Equal(t, want, TargetNodes(c, nil))
	assert.Equal(t, want, TargetNodes(c, []string{"node-3", "node-2", "node-1"}))
}

func TestTargetNodesCountsOnlyAttachedV2Targets(t *testing.T) {
	// A target switched over to node-2 counts on node-2, not on the attached
	// node; an attached volume without a reported target counts on its
	// attached node.
	moved := attached("a", "node-1", "node-3")
	moved.TargetNode = "node-2"
	unreported := attached("b", "node-3", "node-1")
	unreported.TargetNode = ""
	c := cluster3(moved, unreported, detached("c", "node-1"), v1(attached("d", "node-1", "node-2")))
	assert.Equal(t, []string{"node-1", "node-2", "node-3"}, TargetNodes(c, nil))
}
