package precheck

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/switchback-dev/switchback/dataplane"
)

const mustBe = "attached v2 volumes on the nodes to upgrade must be healthy and have more than one replica: "

func TestCheckVolumesHealthy(t *testing.T) {
	degraded := vol("degraded", "node-1", "node-1", "node-2", "node-3")
	degraded.Robustness = dataplane.RobustnessDegraded
	degraded.Replicas[2].State = dataplane.ReplicaError
	lonely := vol("lonely", "node-1", "node-1", "node-2", "node-3")
	lonely.Replicas[1].State = dataplane.ReplicaRebuilding
	lonely.Replicas[2].State = dataplane.ReplicaStopped
	faultedSingle := vol("faulted", "node-2", "node-2")
	faultedSingle.Robustness = dataplane.RobustnessFaulted
	faultedSingle.Replicas[0].State = dataplane.ReplicaError
	noRobustness := vol("blank", "node-1", "node-1", "node-2")
	noRobustness.Robustness = ""
	unreported := vol("unreported", "node-1", "node-1", "node-2") // numberOfReplicas not reported
	unreported.NumberOfReplicas = 0
	none := vol("none", "node-1")
	v1 := vol("v1-single", "node-1", "node-1")
	v1.DataEngine = "v1"
	detachedSingle := vol("detached-single", "", "node-1")
	detachedSingle.TargetNode = ""

	tests := []struct {
		name      string
		vols      []dataplane.Volume
		requested []string
		want      Result
	}{
		{"no volume", nil, nil,
			Result{VolumesHealthy, true, ReasonChecksPassed, "no attached v2 volume has a replica or target on the nodes to upgrade"}},
		{"healthy", []dataplane.Volume{vol("a", "node-1", "node-1", "node-2"), vol("b", "node-3", "node-2", "node-3")}, nil,
			Result{VolumesHealthy, true, ReasonChecksPassed, "every attached v2 volume on the nodes to upgrade is healthy and has more than one replica (2)"}},
		{"numberOfReplicas not reported: the replicas are counted", []dataplane.Volume{unreported}, nil,
			Result{VolumesHealthy, true, ReasonChecksPassed, "every attached v2 volume on the nodes to upgrade is healthy and has more than one replica (1)"}},
		{"single replica", []dataplane.Volume{vol("vol-1", "node-1", "node-1")}, nil,
			Result{VolumesHealthy, false, ReasonSingleReplica, mustBe + "vol-1 has a single replica"}},
		{"degraded", []dataplane.Volume{degraded}, nil,
			Result{VolumesHealthy, false, ReasonVolumeUnhealthy, mustBe + "degraded is degraded"}},
		{"healthy but one healthy replica left", []dataplane.Volume{lonely}, nil,
			Result{VolumesHealthy, false, ReasonVolumeUnhealthy, mustBe + "lonely has 1 healthy replica(s) out of 3"}},
		{"unknown robustness", []dataplane.Volume{noRobustness}, nil,
			Result{VolumesHealthy, false, ReasonVolumeUnhealthy, mustBe + "blank is unknown"}},
		{"no replica at all", []dataplane.Volume{none}, nil,
			Result{VolumesHealthy, false, ReasonVolumeUnhealthy, mustBe + "none has no replica"}},
		{"every offender named, by volume name, with every reason", []dataplane.Volume{vol("z-single", "node-3", "node-3"), faultedSingle, vol("ok", "node-1", "node-1", "node-2"), degraded}, nil,
			Result{VolumesHealthy, false, ReasonVolumeUnhealthy, mustBe + "degraded is degraded; faulted is faulted and has a single replica; z-single has a single replica"}},
		{"v1 and detached volumes ignored", []dataplane.Volume{v1, detachedSingle}, nil,
			Result{VolumesHealthy, true, ReasonChecksPassed, "no attached v2 volume has a replica or target on the nodes to upgrade"}},
		{"volumes away from the nodes to upgrade ignored", []dataplane.Volume{vol("elsewhere", "node-3", "node-3"), vol("here", "node-1", "node-1", "node-2")}, []string{"node-1"},
			Result{VolumesHealthy, true, ReasonChecksPassed, "every attached v2 volume on the nodes to upgrade is healthy and has more than one replica (1)"}},
		{"a replica on a node to upgrade is enough to concern the volume", []dataplane.Volume{vol("vol-1", "node-3", "node-1")}, []string{"node-1"},
			Result{VolumesHealthy, false, ReasonSingleReplica, mustBe + "vol-1 has a single replica"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, CheckVolumesHealthy(input(cluster(3, tt.vols...), tt.requested...)))
		})
	}
}
