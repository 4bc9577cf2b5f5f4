package precheck

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/switchback-dev/switchback/dataplane"
)

const schedulingOff = "nodes to upgrade do not allow replica scheduling (spec.allowScheduling is false) and hold replicas of attached v2 volumes: "

const schedulingRemedy = "; Longhorn would not reuse those replicas after the upgrade but rebuild each on another node once replica-replenishment-wait-interval has passed: " +
	"allow scheduling on them, or set spec.allowNodesWithoutReplicaScheduling in a new manager"

func TestCheckReplicaSchedulingAllowed(t *testing.T) {
	v1 := vol("v1-vol", "node-2", "node-2", "node-3")
	v1.DataEngine = "v1"
	detached := vol("detached", "", "node-2", "node-3")
	detached.TargetNode = ""

	tests := []struct {
		name      string
		off       []string // nodes whose spec.allowScheduling is false
		vols      []dataplane.Volume
		requested []string
		allow     bool
		want      Result
	}{
		{"every node schedules", nil, []dataplane.Volume{vol("a", "node-1", "node-1", "node-2")}, nil, false,
			Result{ReplicaSchedulingAllowed, true, ReasonChecksPassed, "every node to upgrade that holds replicas of attached v2 volumes allows replica scheduling"}},
		{"a node off with replicas of attached volumes is refused, each volume named sorted", []string{"node-2"},
			[]dataplane.Volume{vol("b", "node-1", "node-1", "node-2"), vol("a", "node-3", "node-3", "node-2"), vol("c", "node-1", "node-1", "node-3")}, nil, false,
			Result{ReplicaSchedulingAllowed, false, ReasonReplicaSchedulingDisabled, schedulingOff + "node-2 (replicas of a, b)" + schedulingRemedy}},
		{"a target alone on a node off does not count: no replica there to reuse", []string{"node-1"},
			[]dataplane.Volume{vol("a", "node-1", "node-2", "node-3")}, nil, false,
			Result{ReplicaSchedulingAllowed, true, ReasonChecksPassed, "every node to upgrade that holds replicas of attached v2 volumes allows replica scheduling"}},
		{"v1 and detached volumes do not count", []string{"node-2"}, []dataplane.Volume{v1, detached}, nil, false,
			Result{ReplicaSchedulingAllowed, true, ReasonChecksPassed, "every node to upgrade that holds replicas of attached v2 volumes allows replica scheduling"}},
		{"a node off that is not upgraded does not count", []string{"node-2"},
			[]dataplane.Volume{vol("a", "node-1", "node-1", "node-2")}, []string{"node-1", "node-3"}, false,
			Result{ReplicaSchedulingAllowed, true, ReasonChecksPassed, "every node to upgrade that holds replicas of attached v2 volumes allows replica scheduling"}},
		{"every node off named, in plan order", []string{"node-3", "node-1"},
			[]dataplane.Volume{vol("a", "node-2", "node-1", "node-3")}, nil, false,
			Result{ReplicaSchedulingAllowed, false, ReasonReplicaSchedulingDisabled, schedulingOff + "node-1 (replicas of a); node-3 (replicas of a)" + schedulingRemedy}},
		{"accepted by the spec: passes, still naming them", []string{"node-2"},
			[]dataplane.Volume{vol("a", "node-1", "node-1", "node-2")}, nil, true,
			Result{ReplicaSchedulingAllowed, true, ReasonChecksPassed, "spec.allowNodesWithoutReplicaScheduling accepts nodes that do not allow replica scheduling: node-2 (replicas of a); " +
				"Longhorn rebuilds their replicas on other nodes instead of reusing them"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := cluster(3, tt.vols...)
			for i := range c.Nodes {
				for _, off := range tt.off {
					if c.Nodes[i].Name == off {
						c.Nodes[i].AllowScheduling = false
					}
				}
			}
			in := input(c, tt.requested...)
			in.AllowNodesWithoutReplicaScheduling = tt.allow
			assert.Equal(t, tt.want, CheckReplicaSchedulingAllowed(in))
		})
	}
}

func TestCheckFailedReplicasReusable(t *testing.T) {
	noReuse := func(v dataplane.Volume) dataplane.Volume { v.NoReplicaReuse = true; return v }
	detached := noReuse(vol("detached", "", "node-2", "node-3"))
	detached.TargetNode = ""
	reused := Result{FailedReplicasReusable, true, ReasonChecksPassed, "Longhorn reuses the replicas the upgrade fails (fast-replica-rebuild-enabled is true for v2)"}
	refused := func(vols string) Result {
		return Result{FailedReplicasReusable, false, ReasonFastReplicaRebuildDisabled, "Longhorn's setting fast-replica-rebuild-enabled is not true for v2, " +
			"so it would reuse none of the replicas the upgrade fails (attached v2 volumes " + vols + ") and would build each again on another node at once, " +
			`a full copy that also reverts its target's move: set it to {"v1":"true","v2":"true"} (its default)`}
	}
	tests := []struct {
		name      string
		vols      []dataplane.Volume
		requested []string
		want      Result
	}{
		{"Longhorn reuses them", []dataplane.Volume{vol("a", "node-1", "node-1", "node-2")}, nil, reused},
		{"it would not: every attached volume with a replica to fail named, sorted",
			[]dataplane.Volume{noReuse(vol("b", "node-1", "node-1", "node-2")), noReuse(vol("a", "node-3", "node-3", "node-2"))}, nil, refused("a, b")},
		{"a detached volume's replicas are not failed", []dataplane.Volume{detached}, nil, reused},
		{"replicas only on nodes not upgraded", []dataplane.Volume{noReuse(vol("a", "node-1", "node-2", "node-3"))}, []string{"node-1"}, reused},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := input(cluster(3, tt.vols...))
			in.RequestedNodes = tt.requested
			assert.Equal(t, tt.want, CheckFailedReplicasReusable(in))
		})
	}
}
