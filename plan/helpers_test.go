package plan

import (
	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/test/harness/dataplanetest"
)

const (
	oldIM = dataplanetest.OldIM
	newIM = dataplanetest.NewIM
)

// attached is a healthy attached v2 volume on a block device whose target
// runs on node, with one running replica on each of replicaNodes.
func attached(name, node string, replicaNodes ...string) dataplane.Volume {
	v := dataplanetest.Volume(name, node, replicaNodes...)
	v.Frontend = dataplane.FrontendBlockdev
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
		Nodes:            []dataplane.Node{dataplanetest.V2Node("node-1"), dataplanetest.V2Node("node-2"), dataplanetest.V2Node("node-3")},
		InstanceManagers: []dataplane.InstanceManager{dataplanetest.RunningIM("node-1", oldIM), dataplanetest.RunningIM("node-2", oldIM), dataplanetest.RunningIM("node-3", oldIM)},
		Volumes:          vols,
		DefaultImage:     newIM,
	}
}

// wholeCluster is cluster3 with three attached volumes and a detached one:
// node-2 hosts no target, node-3 one and node-1 two, and every node holds
// replicas, so that a plan of it has every part.
func wholeCluster() Cluster {
	return cluster3(
		attached("a", "node-1", "node-1", "node-3"),
		attached("b", "node-1", "node-1", "node-2"),
		attached("c", "node-3", "node-1", "node-3"),
		detached("d", "node-2", "node-3"),
	)
}
