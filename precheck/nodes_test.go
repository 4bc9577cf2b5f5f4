package precheck

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/plan"
)

const recreate = "; the upgrade does not start: spec.nodes cannot change, so name only existing nodes with the v2 data engine in a new manager"

func TestCheckNodesKnown(t *testing.T) {
	c := cluster(3)
	c.Nodes = append(c.Nodes, dataplane.Node{Name: "v1-node", Ready: true})
	tests := []struct {
		name      string
		requested []string
		want      Result
	}{
		{"empty means every v2 node", nil,
			Result{NodesKnown, true, ReasonChecksPassed, "spec.nodes is empty: every node with the v2 data engine is upgraded (3)"}},
		{"all known", []string{"node-3", "node-1"},
			Result{NodesKnown, true, ReasonChecksPassed, "every node in spec.nodes exists and runs the v2 data engine (2)"}},
		{"one unknown", []string{"node-1", "node-9"},
			Result{NodesKnown, false, ReasonUnknownNodes, "spec.nodes names unknown nodes: node-9" + recreate}},
		{"every unknown node named, sorted, once", []string{"zeta", "node-1", "alpha", "node-7", "alpha"},
			Result{NodesKnown, false, ReasonUnknownNodes, "spec.nodes names unknown nodes: alpha, node-7, zeta" + recreate}},
		{"existing node without the v2 engine", []string{"node-1", "v1-node"},
			Result{NodesKnown, false, ReasonNodesWithoutV2Engine, "spec.nodes names nodes without the v2 data engine: v1-node" + recreate}},
		{"both, unknown wins the reason", []string{"v1-node", "ghost"},
			Result{NodesKnown, false, ReasonUnknownNodes,
				"spec.nodes names unknown nodes: ghost; spec.nodes names nodes without the v2 data engine: v1-node" + recreate}},
		{"an empty name is shown", []string{"node-1", ""},
			Result{NodesKnown, false, ReasonUnknownNodes, `spec.nodes names unknown nodes: ""` + recreate}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, CheckNodesKnown(input(c, tt.requested...)))
		})
	}
}

func TestCheckAtLeastTwoNodes(t *testing.T) {
	single := cluster(1)
	single.Nodes = append(single.Nodes, dataplane.Node{Name: "v1-a", Ready: true}, dataplane.Node{Name: "v1-b", Ready: true})
	notReady := cluster(2)
	notReady.Nodes[1].Ready = false
	tests := []struct {
		name string
		c    plan.Cluster
		want Result
	}{
		{"empty cluster", plan.Cluster{}, Result{AtLeastTwoNodes, false, ReasonTooFewNodes,
			"0 node(s) run the v2 data engine; at least 2 are needed so that each target has another node to move to"}},
		{"single v2 node, v1 nodes do not count", single, Result{AtLeastTwoNodes, false, ReasonTooFewNodes,
			"1 node(s) run the v2 data engine (node-1); at least 2 are needed so that each target has another node to move to"}},
		{"two", cluster(2), Result{AtLeastTwoNodes, true, ReasonChecksPassed, "2 nodes run the v2 data engine"}},
		// Readiness is the temporary target's business, checked per volume.
		{"a NotReady node still counts", notReady, Result{AtLeastTwoNodes, true, ReasonChecksPassed, "2 nodes run the v2 data engine"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, CheckAtLeastTwoNodes(input(tt.c)))
		})
	}
}

func TestCheckDefaultImageOnAllNodesReady(t *testing.T) {
	missing := func(c plan.Cluster, names ...string) plan.Cluster {
		for i := range c.Nodes {
			for _, n := range names {
				if c.Nodes[i].Name == n {
					c.Nodes[i].Images = []string{oldIM}
				}
			}
		}
		return c
	}
	withV1 := cluster(2)
	withV1.Nodes = append(withV1.Nodes, dataplane.Node{Name: "v1-node", Ready: true})
	tests := []struct {
		name      string
		c         plan.Cluster
		requested []string
		target    string
		want      Result
	}{
		{"present everywhere", cluster(3), nil, newIM,
			Result{DefaultImageOnAllNodesReady, true, ReasonChecksPassed, "instance-manager image im:v2 is present on every node to upgrade (3)"}},
		{"missing on some, listed sorted", missing(cluster(4), "node-3", "node-1"), nil, newIM,
			Result{DefaultImageOnAllNodesReady, false, ReasonImageNotReady, "instance-manager image im:v2 is not present on nodes: node-1, node-3"}},
		{"only the nodes to upgrade matter", missing(cluster(3), "node-3"), []string{"node-1", "node-2"}, newIM,
			Result{DefaultImageOnAllNodesReady, true, ReasonChecksPassed, "instance-manager image im:v2 is present on every node to upgrade (2)"}},
		{"one node", cluster(3), []string{"node-2"}, newIM,
			Result{DefaultImageOnAllNodesReady, true, ReasonChecksPassed, "instance-manager image im:v2 is present on every node to upgrade (1)"}},
		{"unknown and non-v2 nodes are NodesKnown's business", withV1, []string{"node-1", "ghost", "v1-node"}, newIM,
			Result{DefaultImageOnAllNodesReady, true, ReasonChecksPassed, "instance-manager image im:v2 is present on every node to upgrade (1)"}},
		{"no node to upgrade", plan.Cluster{}, nil, newIM,
			Result{DefaultImageOnAllNodesReady, true, ReasonChecksPassed, "no node to upgrade"}},
		{"no target image", cluster(3), nil, "",
			Result{DefaultImageOnAllNodesReady, false, ReasonImageNotReady, "no target instance-manager image: the default instance-manager image is not set"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := input(tt.c, tt.requested...)
			in.TargetImage = tt.target
			assert.Equal(t, tt.want, CheckDefaultImageOnAllNodesReady(in))
		})
	}
}
