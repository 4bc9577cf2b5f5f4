package precheck

import (
	"fmt"
	"slices"
	"strings"

	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/plan"
)

// CheckVolumesHealthy passes when every attached v2 volume with a replica or
// target on a node to upgrade is healthy and has more than one replica. A
// node upgrade fails the node's replicas: a volume whose only healthy replica
// is there, or that is already degraded, would lose its data path. v1 and
// detached volumes do not count (v1 is not touched; detached volumes serve no
// I/O). The message names each offending volume and why, by volume name.
//
// The reason is ReasonVolumeUnhealthy when any offending volume is unhealthy,
// else ReasonSingleReplica.
func CheckVolumesHealthy(in Input) Result {
	nodes := upgradeNodes(in)
	vols := slices.Clone(in.Cluster.Volumes)
	slices.SortStableFunc(vols, func(a, b dataplane.Volume) int { return strings.Compare(a.Name, b.Name) })
	var (
		problems  []string
		unhealthy bool
		checked   int
	)
	for _, v := range vols {
		if !v.Attached() || !slices.ContainsFunc(nodes, func(n string) bool { return plan.Concerned(v, n) }) {
			continue
		}
		checked++
		why, bad := volumeProblems(v)
		if len(why) > 0 {
			problems = append(problems, v.Name+" "+strings.Join(why, " and "))
			unhealthy = unhealthy || bad
		}
	}
	if len(problems) > 0 {
		reason := ReasonSingleReplica
		if unhealthy {
			reason = ReasonVolumeUnhealthy
		}
		return fail(VolumesHealthy, reason,
			"attached v2 volumes on the nodes to upgrade must be healthy and have more than one replica: %s",
			strings.Join(problems, "; "))
	}
	if checked == 0 {
		return pass(VolumesHealthy, "no attached v2 volume has a replica or target on the nodes to upgrade")
	}
	return pass(VolumesHealthy, "every attached v2 volume on the nodes to upgrade is healthy and has more than one replica (%d)", checked)
}

// volumeProblems says what is wrong with v; unhealthy is true when a problem
// is more than a single-replica setting.
func volumeProblems(v dataplane.Volume) (why []string, unhealthy bool) {
	if v.Robustness != dataplane.RobustnessHealthy {
		r := string(v.Robustness)
		if r == "" {
			r = string(dataplane.RobustnessUnknown)
		}
		why = append(why, "is "+r)
		unhealthy = true
	}
	// numberOfReplicas 0 means the reader did not report it: count the
	// replicas the volume has instead.
	want := v.NumberOfReplicas
	if want == 0 {
		want = len(v.Replicas)
	}
	healthy := v.HealthyReplicas()
	switch {
	case want == 0:
		why = append(why, "has no replica")
		unhealthy = true
	case want == 1:
		why = append(why, "has a single replica")
	case healthy <= 1:
		why = append(why, fmt.Sprintf("has %d healthy replica(s) out of %d", healthy, want))
		unhealthy = true
	}
	return why, unhealthy
}
