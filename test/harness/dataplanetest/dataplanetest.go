// Package dataplanetest builds the dataplane objects the tests of the
// planner (package plan) and of the pre-flight checks (package precheck)
// describe their clusters with: Ready v2 nodes, running instance managers and
// healthy v2 volumes.
package dataplanetest

import (
	"github.com/switchback-dev/switchback/dataplane"
)

// The instance-manager images of the tests: the one running before the
// upgrade and the one it upgrades to.
const (
	OldIM = "im:v1"
	NewIM = "im:v2"
)

// V2Node is a Ready v2 node that allows replica scheduling, with both OldIM
// and NewIM pulled and its longhorn-manager already on NewIM.
func V2Node(name string) dataplane.Node {
	return dataplane.Node{Name: name, Ready: true, V2: true, AllowScheduling: true, Images: []string{OldIM, NewIM}, ManagerIMImage: NewIM}
}

// BlockDisk is a schedulable block disk of capacity bytes with nothing on
// it, under Longhorn's storage settings at their defaults.
func BlockDisk(name string, capacity int64) dataplane.Disk {
	return dataplane.Disk{Name: name, Block: true, Schedulable: true, StorageMaximum: capacity, StorageAvailable: capacity,
		OverProvisioningPercentage: 100, MinimalAvailablePercentage: 25}
}

// RunningIM is the running v2 instance manager of node, on image.
func RunningIM(node, image string) dataplane.InstanceManager {
	return dataplane.InstanceManager{
		Name: "im-" + node, Node: node, Image: image,
		DataEngine: dataplane.DataEngineV2, State: dataplane.IMRunning,
	}
}

// Volume is a healthy v2 volume attached to node, its engine (target) there,
// with one running replica on each of replicaNodes. Its frontend is unset:
// a caller that needs one sets it.
func Volume(name, node string, replicaNodes ...string) dataplane.Volume {
	v := dataplane.Volume{
		Name: name, DataEngine: dataplane.DataEngineV2, NumberOfReplicas: len(replicaNodes),
		AttachedNode: node, TargetNode: node, Robustness: dataplane.RobustnessHealthy,
	}
	for _, n := range replicaNodes {
		v.Replicas = append(v.Replicas, dataplane.Replica{Name: name + "-r-" + n, Node: n, State: dataplane.ReplicaRunning})
	}
	return v
}
