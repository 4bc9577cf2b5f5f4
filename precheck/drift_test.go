package precheck

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/plan"
)

// imagesCluster has one Ready v2 node per image, named n1..nN, each IM running
// that image ("" = the node has no IM).
func imagesCluster(images ...string) plan.Cluster {
	var c plan.Cluster
	for i, img := range images {
		name := fmt.Sprintf("n%d", i+1)
		c.Nodes = append(c.Nodes, v2node(name))
		if img != "" {
			c.InstanceManagers = append(c.InstanceManagers, runningIM(name, img))
		}
	}
	return c
}

func TestCheckNoVersionDrift(t *testing.T) {
	const (
		v18 = "im:v1.8.0"
		v19 = "im:v1.9.0"
		v20 = "im:v2.0.0" // the target
	)
	withV1Node := imagesCluster(v18, v18, v18)
	withV1Node.Nodes = append(withV1Node.Nodes, dataplane.Node{Name: "n4", Ready: true})
	withV1Node.InstanceManagers = append(withV1Node.InstanceManagers, runningIM("n4", v19)) // not a v2 node: ignored

	crashedOld := imagesCluster(v19, v18, v18)
	crashedOld.InstanceManagers[0].State = dataplane.IMError

	pass := func(msg string) Result { return Result{NoVersionDrift, true, ReasonChecksPassed, msg} }
	drift := func(msg string) Result { return Result{NoVersionDrift, false, ReasonVersionDrift, msg} }
	tests := []struct {
		name      string
		c         plan.Cluster
		requested []string
		want      Result
	}{
		// Clean cluster.
		{"clean cluster, every node", imagesCluster(v18, v18, v18), nil,
			pass("the upgrade covers every node with the v2 data engine")},
		{"clean cluster, a subset: the rest stays on the one old image", imagesCluster(v18, v18, v18, v18), []string{"n1", "n2"},
			pass("nodes outside this upgrade all run im:v1.8.0; the upgrade leaves no image other than it and im:v2.0.0")},
		{"a subset naming every node", imagesCluster(v18, v19), []string{"n2", "n1"},
			pass("the upgrade covers every node with the v2 data engine")},
		{"non-v2 nodes are not outside this upgrade", withV1Node, []string{"n1"},
			pass("nodes outside this upgrade all run im:v1.8.0; the upgrade leaves no image other than it and im:v2.0.0")},

		// Subset upgraded earlier.
		{"earlier subset to the same target, continued", imagesCluster(v20, v18, v18), []string{"n2"},
			pass("nodes outside this upgrade all run im:v1.8.0; the upgrade leaves no image other than it and im:v2.0.0")},
		{"earlier subset to the same target, a done node requested again", imagesCluster(v20, v18, v18), []string{"n1", "n2"},
			pass("nodes outside this upgrade all run im:v1.8.0; the upgrade leaves no image other than it and im:v2.0.0")},
		{"earlier subset to the same target, finished now", imagesCluster(v20, v20, v18), []string{"n3"},
			pass("every node outside this upgrade already runs im:v2.0.0")},
		{"earlier subset to the same target, finished by covering everything", imagesCluster(v20, v19, v18), nil,
			pass("the upgrade covers every node with the v2 data engine")},
		{"earlier subset to another image, the upgraded subset requested", imagesCluster(v19, v19, v18, v18), []string{"n1", "n2"},
			drift("nodes to upgrade run n1=im:v1.9.0, n2=im:v1.9.0 while the nodes outside this upgrade run im:v1.8.0 (n3, n4); finish the earlier upgrade first")},
		{"earlier subset to another image, another subset requested", imagesCluster(v19, v19, v18, v18), []string{"n3"},
			drift("nodes outside this upgrade run different instance-manager images: n1=im:v1.9.0, n2=im:v1.9.0, n4=im:v1.8.0; finish the earlier upgrade first")},

		// Mixed images outside the subset.
		{"mixed images outside the subset", imagesCluster(v18, v18, v18, v19), []string{"n1", "n2"},
			drift("nodes outside this upgrade run different instance-manager images: n3=im:v1.8.0, n4=im:v1.9.0; finish the earlier upgrade first")},
		{"mixed images outside, the target among them", imagesCluster(v18, v20, v19, v18), []string{"n1"},
			drift("nodes outside this upgrade run different instance-manager images: n3=im:v1.9.0, n4=im:v1.8.0; finish the earlier upgrade first")},
		{"a node caught between two IMs is its own image", func() plan.Cluster {
			c := imagesCluster(v18, v18, v18)
			c.InstanceManagers = append(c.InstanceManagers, runningIM("n3", v19))
			return c
		}(), []string{"n1"},
			drift("nodes outside this upgrade run different instance-manager images: n2=im:v1.8.0, n3=im:v1.8.0+im:v1.9.0; finish the earlier upgrade first")},

		// Nodes without an IM get the default image: they do not drift.
		{"a node without IM", imagesCluster(v18, "", v18), []string{"n1"},
			pass("nodes outside this upgrade all run im:v1.8.0; the upgrade leaves no image other than it and im:v2.0.0")},
		{"a crashed IM still counts with its image", crashedOld, []string{"n2"},
			drift("nodes outside this upgrade run different instance-manager images: n1=im:v1.9.0, n3=im:v1.8.0; finish the earlier upgrade first")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := input(tt.c, tt.requested...)
			in.TargetImage = v20
			assert.Equal(t, tt.want, CheckNoVersionDrift(in))
		})
	}
}
