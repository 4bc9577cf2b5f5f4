package plan

import (
	"github.com/switchback-dev/switchback/dataplane"
)

const (
	oldIM = "im:v1"
	newIM = "im:v2"
)

// v2node is a Ready v2 node with both images pulled.
func v2node(name string) dataplane.Node {
	return dataplane.Node{Name: name, Ready: true, V2: true, Images: []string{oldIM, newIM}}
}

func runningIM(node, image string) dataplane.InstanceManager {
	return dataplane.InstanceManager{
		Name: "im-" + node, Node: node, Image: image,
		DataEngine: dataplane.DataEngineV2, State: dataplane.IMRunning,
	}
}

// attached is a healthy attached v2 volume whose target runs on node, with one
// running replica on each of replicaNodes.
func attached(name, node string, replicaNodes ...string) dataplane.Volume {
	v := dataplane.Volume{
		Name: name, DataEngine: dataplane.DataEngineV2, NumberOfReplicas: len(replicaNodes),
		AttachedNode: node, TargetNode: node, Frontend: dataplane.FrontendBlockdev, Robustness: dataplane.RobustnessHealthy,
	}
	for _, n := range replicaNodes {
		v.Replicas = append(v.Replicas, dataplane.Replica{Name: name + "-r-" + n, Node: n, State: dataplane.ReplicaRunning})
	}
	return v
}

func detached(name string, replicaNodes ...string) dataplane.Volume {
	v := attached(name, "", replicaNodes...)
	v.Robustness = dataplane.RobustnessUnknown
	return v
}

func v1(v dataplane.Volume) dataplane.Volume {
	v.DataEngine = "v1"
	return v
}

// inPlace is the platform of the placement tests: every node can be
// upgraded live there, whatever it holds.
var inPlace = dataplane.Platform{Profile: dataplane.ProfileInPlace}

// cluster3 is three Ready v2 nodes, all on oldIM, of a Longhorn updating
// IMs in place.
func cluster3(vols ...dataplane.Volume) Cluster {
	return Cluster{
		Platform:         inPlace,
		Nodes:            []dataplane.Node{v2node("node-1"), v2node("node-2"), v2node("node-3")},
		InstanceManagers: []dataplane.InstanceManager{runningIM("node-1", oldIM), runningIM("node-2", oldIM), runningIM("node-3", oldIM)},
		Volumes:          vols,
		DefaultImage:     newIM,
	}
}
