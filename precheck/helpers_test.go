package precheck

import (
	"fmt"

	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/plan"
)

const (
	oldIM = "im:v1"
	newIM = "im:v2"
)

func v2node(name string) dataplane.Node {
	return dataplane.Node{Name: name, Ready: true, V2: true, Images: []string{oldIM, newIM}}
}

func runningIM(node, image string) dataplane.InstanceManager {
	return dataplane.InstanceManager{
		Name: "im-" + node, Node: node, Image: image,
		DataEngine: dataplane.DataEngineV2, State: dataplane.IMRunning,
	}
}

// vol is a healthy attached v2 volume with its engine (target) on engine and
// one running replica on each of replicaNodes.
func vol(name, engine string, replicaNodes ...string) dataplane.Volume {
	v := dataplane.Volume{
		Name: name, DataEngine: dataplane.DataEngineV2, NumberOfReplicas: len(replicaNodes),
		AttachedNode: engine, TargetNode: engine, Robustness: dataplane.RobustnessHealthy,
	}
	for _, n := range replicaNodes {
		v.Replicas = append(v.Replicas, dataplane.Replica{Name: name + "-r-" + n, Node: n, State: dataplane.ReplicaRunning})
	}
	return v
}

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
