package longhorn

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/switchback-dev/switchback/dataplane"
)

func TestReplicaState(t *testing.T) {
	const at = "2026-01-01T00:00:00Z"
	tests := []struct {
		name      string
		current   string
		failedAt  string
		healthyAt string
		mode      string
		attached  bool
		want      dataplane.ReplicaState
	}{
		{"failed, still running: stopped (being stopped)", StateRunning, at, at, ModeRW, true, dataplane.ReplicaStopped},
		{"failed and stopped", StateStopped, at, at, "", true, dataplane.ReplicaStopped},
		{"failed in error", StateError, at, at, "", true, dataplane.ReplicaError},
		{"failed, detached, healthy before: still not healthy", StateStopped, at, at, "", false, dataplane.ReplicaStopped},
		{"attached, RW", StateRunning, "", at, ModeRW, true, dataplane.ReplicaRunning},
		{"attached, WO: rebuilding", StateRunning, "", "", ModeWO, true, dataplane.ReplicaRebuilding},
		{"attached, WO though healthy before", StateRunning, "", at, ModeWO, true, dataplane.ReplicaRebuilding},
		{"attached, ERR in the engine", StateRunning, "", at, ModeERR, true, dataplane.ReplicaError},
		{"attached, not in the engine yet, healthy before", StateRunning, "", at, "", true, dataplane.ReplicaRunning},
		{"attached, not in the engine yet, never healthy", StateRunning, "", "", "", true, dataplane.ReplicaRebuilding},
		{"attached, stopped", StateStopped, "", at, "", true, dataplane.ReplicaStopped},
		{"attached, no state yet", "", "", "", "", true, dataplane.ReplicaStopped},
		{"detached, stopped, healthy copy at rest", StateStopped, "", at, "", false, dataplane.ReplicaRunning},
		{"detached, stopped, never healthy", StateStopped, "", "", "", false, dataplane.ReplicaStopped},
		{"detached, running, healthy before", StateRunning, "", at, "", false, dataplane.ReplicaRunning},
		{"detached, running, never healthy: rebuilding", StateRunning, "", "", "", false, dataplane.ReplicaRebuilding},
		{"starting", StateStarting, "", "", "", true, dataplane.ReplicaRebuilding},
		{"stopping", StateStopping, "", at, ModeRW, true, dataplane.ReplicaStopped},
		{"error", StateError, "", at, ModeRW, true, dataplane.ReplicaError},
		{"unknown (lost contact)", StateUnknown, "", at, ModeRW, true, dataplane.ReplicaError},
		{"a state this adapter does not know", "hibernating", "", at, ModeRW, true, dataplane.ReplicaError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &Replica{Spec: ReplicaSpec{FailedAt: tt.failedAt, HealthyAt: tt.healthyAt}, Status: ReplicaStatus{CurrentState: tt.current}}
			assert.Equal(t, tt.want, replicaState(r, tt.mode, tt.attached))
		})
	}
}

func TestIMState(t *testing.T) {
	now := metav1.Now()
	tests := []struct {
		current  string
		deleting bool
		want     dataplane.IMState
	}{
		{StateRunning, false, dataplane.IMRunning},
		{StateStarting, false, dataplane.IMStarting},
		{StateStopped, false, dataplane.IMStopped},
		{StateError, false, dataplane.IMError},
		{StateUnknown, false, dataplane.IMStarting},
		{"", false, dataplane.IMStarting},
		{"hibernating", false, dataplane.IMStarting},
		{StateRunning, true, dataplane.IMStopped},
		{StateError, true, dataplane.IMStopped},
	}
	for _, tt := range tests {
		im := &InstanceManager{Status: InstanceManagerStatus{CurrentState: tt.current}}
		if tt.deleting {
			im.DeletionTimestamp = &now
		}
		assert.Equal(t, tt.want, imState(im), "state %q deleting %v", tt.current, tt.deleting)
	}
}

func rep(name, node string) *Replica {
	return &Replica{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: ReplicaSpec{NodeID: node, HealthyAt: "t"}, Status: ReplicaStatus{CurrentState: StateRunning}}
}

func TestToVolume(t *testing.T) {
	now := metav1.Now()
	r1, r2, r3 := rep("v-r-1", "n1"), rep("v-r-2", "n2"), rep("v-r-3", "n3")
	gone := rep("v-r-0", "n4")
	gone.DeletionTimestamp = &now
	engines := []*Engine{
		{Spec: EngineSpec{NodeID: "n9"}, Status: EngineStatus{ReplicaModeMap: map[string]string{"v-r-1": ModeERR, "v-r-2": ModeERR, "v-r-3": ModeERR}}},
		{Spec: EngineSpec{NodeID: "n1", Active: true}, Status: EngineStatus{ReplicaModeMap: map[string]string{"v-r-1": ModeRW, "v-r-2": ModeWO, "v-r-3": ModeRW}}},
	}
	tests := []struct {
		name string
		spec VolumeSpec
		st   VolumeStatus
		want func(*testing.T, dataplane.Volume)
	}{
		{"attached, target switched over", VolumeSpec{NodeID: "n1", DataEngine: "v2", TargetNodeID: "n2", NumberOfReplicas: 3},
			VolumeStatus{State: VolumeAttached, CurrentNodeID: "n1", CurrentTargetNodeID: "n3", Robustness: "degraded"},
			func(t *testing.T, v dataplane.Volume) {
				assert.Equal(t, "n1", v.AttachedNode)
				assert.Equal(t, "n3", v.TargetNode, "where it runs")
				assert.Equal(t, "n2", v.DesiredTargetNode, "where it is asked to go")
				assert.Equal(t, dataplane.RobustnessDegraded, v.Robustness, "Longhorn's word while attached")
			}},
		{"attached, target not reported (released Longhorn): on the attached node", VolumeSpec{NodeID: "n1", DataEngine: "v2"},
			VolumeStatus{State: VolumeAttached, Robustness: "healthy"},
			func(t *testing.T, v dataplane.Volume) {
				assert.Equal(t, "n1", v.TargetNode)
				assert.Empty(t, v.DesiredTargetNode)
			}},
		{"spec.nodeID cleared, still attached: currentNodeID", VolumeSpec{DataEngine: "v2"},
			VolumeStatus{State: VolumeAttached, CurrentNodeID: "n2"},
			func(t *testing.T, v dataplane.Volume) {
				assert.Equal(t, "n2", v.AttachedNode)
				assert.Equal(t, dataplane.RobustnessUnknown, v.Robustness, "not reported")
			}},
		{"detached: no target, robustness from the replicas", VolumeSpec{DataEngine: "v2", NumberOfReplicas: 3},
			VolumeStatus{State: VolumeDetached, CurrentNodeID: "n1", CurrentTargetNodeID: "n1", Robustness: "unknown"},
			func(t *testing.T, v dataplane.Volume) {
				assert.False(t, v.Attached())
				assert.Empty(t, v.TargetNode)
				assert.Equal(t, dataplane.RobustnessHealthy, v.Robustness, "three healthy copies at rest")
			}},
		{"no data engine is v1", VolumeSpec{NodeID: "n1"}, VolumeStatus{State: VolumeAttached},
			func(t *testing.T, v dataplane.Volume) { assert.Equal(t, "v1", v.DataEngine) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vol := &Volume{ObjectMeta: metav1.ObjectMeta{Name: "v"}, Spec: tt.spec, Status: tt.st}
			// Given in reverse order: the result is sorted by name.
			got := toVolume(vol, []*Replica{r3, gone, r2, r1}, engines)
			var names []string
			for _, r := range got.Replicas {
				names = append(names, r.Name)
			}
			assert.Equal(t, []string{"v-r-1", "v-r-2", "v-r-3"}, names, "sorted, the replica being deleted left out")
			tt.want(t, got)
		})
	}
	attached := toVolume(&Volume{Spec: VolumeSpec{NodeID: "n1", DataEngine: "v2"}}, []*Replica{r1, r2, r3}, engines)
	assert.Equal(t, []dataplane.ReplicaState{dataplane.ReplicaRunning, dataplane.ReplicaRebuilding, dataplane.ReplicaRunning},
		[]dataplane.ReplicaState{attached.Replicas[0].State, attached.Replicas[1].State, attached.Replicas[2].State},
		"modes from the active engine")
}

func TestComputedRobustness(t *testing.T) {
	for _, tt := range []struct {
		healthy, want int
		r             dataplane.Robustness
	}{{0, 2, dataplane.RobustnessFaulted}, {1, 2, dataplane.RobustnessDegraded}, {2, 2, dataplane.RobustnessHealthy}} {
		v := dataplane.Volume{NumberOfReplicas: tt.want}
		for range tt.healthy {
			v.Replicas = append(v.Replicas, dataplane.Replica{State: dataplane.ReplicaRunning})
		}
		v.Replicas = append(v.Replicas, dataplane.Replica{State: dataplane.ReplicaStopped})
		assert.Equal(t, tt.r, computedRobustness(v))
	}
}

func TestToNode(t *testing.T) {
	ready := []Condition{{Type: ConditionReady, Status: "True"}}
	notReady := []Condition{{Type: ConditionReady, Status: "False"}}
	ln := func(conds []Condition, flag bool) *LonghornNode {
		return &LonghornNode{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: LonghornNodeSpec{DataEngineUpgradeRequested: flag}, Status: LonghornNodeStatus{Conditions: conds}}
	}
	kn := func(conds []Condition, labels map[string]string, images ...string) *KubeNode {
		k := &KubeNode{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: labels}, Status: KubeNodeStatus{Conditions: conds}}
		for _, img := range images {
			k.Status.Images = append(k.Status.Images, ContainerImage{Names: []string{img, img + "@sha256:abc"}})
		}
		return k
	}
	tests := []struct {
		name  string
		ln    *LonghornNode
		kn    *KubeNode
		v2IM  bool
		ready bool
		v2    bool
	}{
		{"both Ready, v2 IM", ln(ready, false), kn(ready, nil), true, true, true},
		{"Longhorn Ready, kubelet not", ln(ready, false), kn(notReady, nil), true, false, true},
		{"kubelet Ready, Longhorn not", ln(notReady, false), kn(ready, nil), true, false, true},
		{"no Kubernetes node", ln(ready, false), nil, true, false, true},
		{"no condition at all", ln(nil, false), kn(nil, nil), true, false, true},
		{"no v2 IM", ln(ready, false), kn(ready, nil), false, true, false},
		{"v2 disabled by label", ln(ready, false), kn(ready, map[string]string{DisableV2Label: "true"}), true, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := toNode(tt.ln, tt.kn, tt.v2IM)
			assert.Equal(t, tt.ready, n.Ready)
			assert.Equal(t, tt.v2, n.V2)
		})
	}
	n := toNode(ln(ready, true), kn(ready, nil, "docker.io/longhornio/longhorn-instance-manager:v1.9.0", "docker.io/library/busybox:1"), true)
	assert.True(t, n.UpgradeRequested)
	assert.Contains(t, n.Images, "longhornio/longhorn-instance-manager:v1.9.0", "the setting's short form matches the kubelet's")
	assert.Contains(t, n.Images, "docker.io/longhornio/longhorn-instance-manager:v1.9.0")
	assert.Contains(t, n.Images, "busybox:1")
	assert.Contains(t, n.Images, "longhornio/longhorn-instance-manager:v1.9.0@sha256:abc")
}

func TestSnapshotObjectName(t *testing.T) {
	assert.Equal(t, "switchback-uid-node-1-pvc-1", SnapshotObjectName("pvc-1", "switchback-uid-node-1"))
	long := strings.Repeat("a", 40)
	a := SnapshotObjectName("pvc-"+long, "switchback-12345678-"+long)
	b := SnapshotObjectName("pvc-"+long+"x", "switchback-12345678-"+long)
	assert.LessOrEqual(t, len(a), 63)
	assert.NotEqual(t, a, b, "distinct volumes, distinct objects")
	assert.Equal(t, a, SnapshotObjectName("pvc-"+long, "switchback-12345678-"+long), "deterministic: a retry finds its own")
}

func TestPatches(t *testing.T) {
	tests := []struct {
		got  []byte
		want string
	}{
		{patchNodeUpgradeRequested(true), `{"spec":{"dataEngineUpgradeRequested":true}}`},
		{patchTargetNode(""), `{"spec":{"targetNodeID":""}}`},
		{patchVolumeImage("im:v2", "42"), `{"metadata":{"resourceVersion":"42"},"spec":{"image":"im:v2"}}`},
		{patchFailReplica("2026-01-01T00:00:00Z", "7"), `{"metadata":{"resourceVersion":"7"},"spec":{"desireState":"stopped","failedAt":"2026-01-01T00:00:00Z"}}`},
		{patchFailReplica("", "7"), `{"metadata":{"resourceVersion":"7"},"spec":{"desireState":"stopped"}}`},
		{patchEngineDropReplica("r-1"), `{"spec":{"replicaAddressMap":{"r-1":null}}}`},
	}
	for _, tt := range tests {
		assert.JSONEq(t, tt.want, string(tt.got))
		assert.True(t, json.Valid(tt.got))
	}
}
