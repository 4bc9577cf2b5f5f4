package precheck

import (
	"fmt"

	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/plan"
	"github.com/switchback-dev/switchback/test/harness/dataplanetest"
)

const (
	oldIM = dataplanetest.OldIM
	newIM = dataplanetest.NewIM
)

var (
	v2node    = dataplanetest.V2Node
	runningIM = dataplanetest.RunningIM
	// vol is a healthy attached v2 volume with its engine (target) on engine
	// and one running replica on each of replicaNodes.
	vol = dataplanetest.Volume
)

// cluster is n Ready v2 nodes named node-1..node-n, every IM on oldIM.
func cluster(n int, vols ...dataplane.Volume) plan.Cluster {
	c := plan.Cluster{Volumes: vols, DefaultImage: newIM}
	for i := 1; i <= n; i++ {
		name := fmt.Sprintf("node-%d", i)
		c.Nodes = append(c.Nodes, v2node(name))
		c.InstanceManagers = append(c.InstanceManagers, runningIM(name, oldIM))
	}
	return c
}

// input is a request to upgrade nodes (all v2 nodes when none) of c to newIM.
func input(c plan.Cluster, nodes ...string) Input {
	return Input{Cluster: c, DataEngine: dataplane.DataEngineV2, RequestedNodes: nodes, TargetImage: newIM}
}
