package longhorn

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

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
		{StateUpgrading, false, dataplane.IMStarting},
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

// The instance counts are Longhorn's own test before it removes an old IM:
// instances running or starting in its status maps.
func TestInstanceManagerInstances(t *testing.T) {
	proc := func(state string) InstanceProcess {
		return InstanceProcess{Status: InstanceProcessStatus{State: state}}
	}
	im := &InstanceManager{Status: InstanceManagerStatus{
		CurrentState:            StateRunning,
		InstanceEngines:         map[string]InstanceProcess{"v-e-1": proc(StateRunning), "v-e-2": proc(StateStopped)},
		InstanceEngineFrontends: map[string]InstanceProcess{"v-ef-0": proc(StateStarting)},
		InstanceReplicas:        map[string]InstanceProcess{"v-r-1": proc(StateRunning), "v-r-2": proc(StateRunning), "v-r-3": proc(StateError)},
	}}
	got := toInstanceManager(im)
	assert.Equal(t, []int{1, 1, 2}, []int{got.Engines, got.Frontends, got.Replicas})
	assert.True(t, got.Busy())
	now := metav1.Now()
	im.DeletionTimestamp = &now
	assert.False(t, toInstanceManager(im).Busy(), "an IM being deleted runs nothing worth counting")
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
		{"attached, engine switching over", VolumeSpec{NodeID: "n1", DataEngine: "v2", EngineNodeID: "n2", NumberOfReplicas: 3, Frontend: "blockdev"},
			VolumeStatus{State: VolumeAttached, CurrentNodeID: "n1", CurrentEngineNodeID: "n3", SwitchoverState: "preparing", Robustness: "degraded"},
			func(t *testing.T, v dataplane.Volume) {
				assert.Equal(t, "n1", v.AttachedNode)
				assert.Equal(t, "n3", v.TargetNode, "where it runs")
				assert.Equal(t, "n2", v.EngineNode, "where it is asked to go")
				assert.Equal(t, dataplane.SwitchoverPreparing, v.Switchover)
				assert.False(t, v.TargetReady, "two engines")
				assert.Equal(t, dataplane.RobustnessDegraded, v.Robustness, "Longhorn's word while attached")
				assert.True(t, v.CanSwitchTarget())
			}},
		{"attached, engine node not reported yet: the active engine's node", VolumeSpec{NodeID: "n1", DataEngine: "v2"},
			VolumeStatus{State: VolumeAttached, Robustness: "healthy"},
			func(t *testing.T, v dataplane.Volume) {
				assert.Equal(t, "n1", v.TargetNode)
				assert.Empty(t, v.EngineNode, "follows the attached node")
			}},
		{"spec.nodeID cleared, still attached: currentNodeID", VolumeSpec{DataEngine: "v2"},
			VolumeStatus{State: VolumeAttached, CurrentNodeID: "n2"},
			func(t *testing.T, v dataplane.Volume) {
				assert.Equal(t, "n2", v.AttachedNode)
				assert.Equal(t, dataplane.RobustnessUnknown, v.Robustness, "not reported")
			}},
		{"detached: no target, no switch-over, robustness from the replicas", VolumeSpec{DataEngine: "v2", NumberOfReplicas: 3, EngineNodeID: "n2"},
			VolumeStatus{State: VolumeDetached, CurrentNodeID: "n1", CurrentEngineNodeID: "n1", SwitchoverState: "preparing", Robustness: "unknown"},
			func(t *testing.T, v dataplane.Volume) {
				assert.False(t, v.Attached())
				assert.Empty(t, v.TargetNode)
				assert.Equal(t, "n2", v.EngineNode, "persists across detach")
				assert.Equal(t, dataplane.SwitchoverNone, v.Switchover, "a stale state is not reported")
				assert.Equal(t, dataplane.RobustnessHealthy, v.Robustness, "three healthy copies at rest")
			}},
		{"frontend disabled", VolumeSpec{NodeID: "n1", DataEngine: "v2", Frontend: "blockdev", DisableFrontend: true}, VolumeStatus{State: VolumeAttached},
			func(t *testing.T, v dataplane.Volume) { assert.False(t, v.CanSwitchTarget()) }},
		{"ublk cannot switch", VolumeSpec{NodeID: "n1", DataEngine: "v2", Frontend: "ublk"}, VolumeStatus{State: VolumeAttached},
			func(t *testing.T, v dataplane.Volume) { assert.False(t, v.CanSwitchTarget()) }},
		{"no data engine is v1", VolumeSpec{NodeID: "n1"}, VolumeStatus{State: VolumeAttached},
			func(t *testing.T, v dataplane.Volume) { assert.Equal(t, "v1", v.DataEngine) }},
		{"rwx through a share-manager", VolumeSpec{NodeID: "n1", DataEngine: "v2", AccessMode: "rwx"}, VolumeStatus{State: VolumeAttached},
			func(t *testing.T, v dataplane.Volume) {
				assert.True(t, v.ShareManager)
				assert.False(t, v.Migratable || v.StrictLocal)
			}},
		{"rwx and migratable: live migration, no share-manager", VolumeSpec{NodeID: "n1", DataEngine: "v2", AccessMode: "rwx", Migratable: true},
			VolumeStatus{State: VolumeAttached},
			func(t *testing.T, v dataplane.Volume) {
				assert.False(t, v.ShareManager)
				assert.True(t, v.Migratable)
			}},
		{"strict-local", VolumeSpec{NodeID: "n1", DataEngine: "v2", AccessMode: "rwo", DataLocality: "strict-local"}, VolumeStatus{State: VolumeAttached},
			func(t *testing.T, v dataplane.Volume) {
				assert.True(t, v.StrictLocal)
				assert.False(t, v.ShareManager)
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vol := &Volume{ObjectMeta: metav1.ObjectMeta{Name: "v"}, Spec: tt.spec, Status: tt.st}
			// Given in reverse order: the result is sorted by name.
			got := toVolume(vol, []*Replica{r3, gone, r2, r1}, engines, nil, nil, defaultRebuild)
			var names []string
			for _, r := range got.Replicas {
				names = append(names, r.Name)
			}
			assert.Equal(t, []string{"v-r-1", "v-r-2", "v-r-3"}, names, "sorted, the replica being deleted left out")
			tt.want(t, got)
		})
	}
	attached := toVolume(&Volume{Spec: VolumeSpec{NodeID: "n1", DataEngine: "v2"}}, []*Replica{r1, r2, r3}, engines, nil, nil, defaultRebuild)
	assert.Equal(t, []dataplane.ReplicaState{dataplane.ReplicaRunning, dataplane.ReplicaRebuilding, dataplane.ReplicaRunning},
		[]dataplane.ReplicaState{attached.Replicas[0].State, attached.Replicas[1].State, attached.Replicas[2].State},
		"modes from the active engine")
}

// TargetReady is Longhorn's own end of a switch-over: one engine, active,
// running where the volume says, and the active EngineFrontend running,
// connected to it, with no path switch under way.
func TestTargetReady(t *testing.T) {
	engine := func(name, node string, active bool, state string) *Engine {
		return &Engine{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: EngineSpec{NodeID: node, Active: active},
			Status: EngineStatus{CurrentState: state, StorageIP: "10.0.0." + node[1:], Port: 20001}}
	}
	ef := func(engine, ip, phase, state string) *EngineFrontend {
		return &EngineFrontend{Spec: EngineFrontendSpec{NodeID: "n1", Active: true, EngineName: engine},
			Status: EngineFrontendStatus{CurrentState: state, TargetIP: ip, TargetPort: 20001, SwitchoverPhase: phase}}
	}
	now := metav1.Now()
	deleting := engine("v-e-a", "n2", false, StateRunning)
	deleting.DeletionTimestamp = &now
	vol := &Volume{Spec: VolumeSpec{NodeID: "n1", DataEngine: "v2"}, Status: VolumeStatus{State: VolumeAttached, CurrentEngineNodeID: "n3"}}
	for _, tt := range []struct {
		name    string
		engines []*Engine
		efs     []*EngineFrontend
		want    bool
	}{
		{"done", []*Engine{engine("v-e-b", "n3", true, StateRunning)}, []*EngineFrontend{ef("v-e-b", "10.0.0.3", "", StateRunning)}, true},
		{"the old engine being deleted does not count", []*Engine{deleting, engine("v-e-b", "n3", true, StateRunning)}, []*EngineFrontend{ef("v-e-b", "10.0.0.3", "", StateRunning)}, true},
		{"two engines", []*Engine{engine("v-e-a", "n2", false, StateRunning), engine("v-e-b", "n3", true, StateRunning)}, []*EngineFrontend{ef("v-e-b", "10.0.0.3", "", StateRunning)}, false},
		{"engine not active yet", []*Engine{engine("v-e-b", "n3", false, StateRunning)}, []*EngineFrontend{ef("v-e-b", "10.0.0.3", "", StateRunning)}, false},
		{"engine not running", []*Engine{engine("v-e-b", "n3", true, StateError)}, []*EngineFrontend{ef("v-e-b", "10.0.0.3", "", StateRunning)}, false},
		{"initiator still on the old target", []*Engine{engine("v-e-b", "n3", true, StateRunning)}, []*EngineFrontend{ef("v-e-b", "10.0.0.2", "", StateRunning)}, false},
		{"path switch under way", []*Engine{engine("v-e-b", "n3", true, StateRunning)}, []*EngineFrontend{ef("v-e-b", "10.0.0.3", "switching", StateRunning)}, false},
		{"initiator in error", []*Engine{engine("v-e-b", "n3", true, StateRunning)}, []*EngineFrontend{ef("v-e-b", "10.0.0.3", "", StateError)}, false},
		{"no engine frontend", []*Engine{engine("v-e-b", "n3", true, StateRunning)}, nil, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, toVolume(vol, nil, tt.engines, tt.efs, nil, defaultRebuild).TargetReady)
		})
	}
}

// A failed switch-over is reported only as a Warning on the EngineFrontend;
// a later success, or no switch-over under way, clears it.
func TestSwitchoverError(t *testing.T) {
	at := func(sec int) metav1.Time { return metav1.NewTime(time.Date(2026, 1, 1, 0, 0, sec, 0, time.UTC)) }
	failed := &Event{Reason: ReasonFailedSwitchover, Message: "Failed to switch over target to 10.0.0.3:20001: boom", LastTimestamp: at(10)}
	older := &Event{Reason: ReasonFailedSwitchover, Message: "older", LastTimestamp: at(5)}
	ok := func(sec int) *Event { return &Event{Reason: ReasonSwitchover, LastTimestamp: at(sec)} }
	switching := &Volume{Status: VolumeStatus{SwitchoverState: "reverting"}}
	assert.Equal(t, failed.Message, switchoverError(switching, []*Event{older, failed, ok(1)}))
	assert.Empty(t, switchoverError(switching, []*Event{failed, ok(11)}), "succeeded since")
	assert.Empty(t, switchoverError(&Volume{}, []*Event{failed}), "no switch-over under way")
	assert.Empty(t, switchoverError(switching, nil))
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
	ln := func(conds []Condition, allow bool) *LonghornNode {
		return &LonghornNode{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: LonghornNodeSpec{AllowScheduling: allow}, Status: LonghornNodeStatus{Conditions: conds}}
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
			n := toNode(tt.ln, tt.kn, tt.v2IM, nil)
			assert.Equal(t, tt.ready, n.Ready)
			assert.Equal(t, tt.v2, n.V2)
		})
	}
	n := toNode(ln(ready, true), kn(ready, nil, "docker.io/longhornio/longhorn-instance-manager:v1.9.0", "docker.io/library/busybox:1"), true, nil)
	assert.True(t, n.AllowScheduling)
	assert.False(t, toNode(ln(ready, false), kn(ready, nil), true, nil).AllowScheduling)
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
		{patchAllowScheduling(false), `{"spec":{"allowScheduling":false}}`},
		{patchEngineNode("", "42"), `{"metadata":{"resourceVersion":"42"},"spec":{"engineNodeID":""}}`},
		{patchEngineNode("n2", "42"), `{"metadata":{"resourceVersion":"42"},"spec":{"engineNodeID":"n2"}}`},
		{patchIMImage("im:v2", "9"), `{"metadata":{"resourceVersion":"9"},"spec":{"image":"im:v2"}}`},
		{patchFailReplica("2026-01-01T00:00:00Z", "7"), `{"metadata":{"resourceVersion":"7"},"spec":{"failedAt":"2026-01-01T00:00:00Z","lastFailedAt":"2026-01-01T00:00:00Z"}}`},
		{patchStopReplica("7"), `{"metadata":{"resourceVersion":"7"},"spec":{"desireState":"stopped"}}`},
	}
	for _, tt := range tests {
		assert.JSONEq(t, tt.want, string(tt.got))
		assert.True(t, json.Valid(tt.got))
	}
}

func TestToUpgrader(t *testing.T) {
	setting := func(name, value string) *Setting {
		return &Setting{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value}
	}
	control := func(name, current string, nodes map[string]string) *InstanceManagerUpgradeControl {
		c := &InstanceManagerUpgradeControl{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: InstanceManagerUpgradeControlStatus{CurrentNode: current}}
		for n, st := range nodes {
			if c.Status.Nodes == nil {
				c.Status.Nodes = map[string]UpgradeControlNode{}
			}
			c.Status.Nodes[n] = UpgradeControlNode{State: st}
		}
		return c
	}
	imu := func(name, node, state string) *InstanceManagerUpgrade {
		return &InstanceManagerUpgrade{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: InstanceManagerUpgradeSpec{NodeID: node, TargetImage: "im:v2"}, Status: InstanceManagerUpgradeStatus{State: state}}
	}
	deleting := imu("upgrade-n3-20261130123000", "n3", "restoring-engines")
	now := metav1.Now()
	deleting.DeletionTimestamp = &now
	tests := []struct {
		name     string
		settings []*Setting
		controls []*InstanceManagerUpgradeControl
		upgrades []*InstanceManagerUpgrade
		want     dataplane.LonghornUpgrader
	}{
		{name: "nothing (Longhorn v1.12.1): the zero value"},
		{name: "settings keep their raw value",
			settings: []*Setting{setting(dataplane.SettingIMAutoUpgrade, `{"v1":"false","v2":"true"}`), setting(dataplane.SettingV2IMAutoUpgrade, " True ")},
			want: dataplane.LonghornUpgrader{Settings: map[string]string{
				dataplane.SettingIMAutoUpgrade: `{"v1":"false","v2":"true"}`, dataplane.SettingV2IMAutoUpgrade: " True "}}},
		{name: "an empty value is a setting that exists",
			settings: []*Setting{setting(dataplane.SettingV2IMAutoUpgrade, "")},
			want:     dataplane.LonghornUpgrader{Settings: map[string]string{dataplane.SettingV2IMAutoUpgrade: ""}}},
		{name: "the control: current node and each node's state",
			controls: []*InstanceManagerUpgradeControl{control(InstanceManagerUpgradeControlName, "n2",
				map[string]string{"n1": "completed", "n2": "in-progress", "n3": "pending"})},
			want: dataplane.LonghornUpgrader{Controls: []dataplane.UpgradeControl{{Name: InstanceManagerUpgradeControlName, CurrentNode: "n2",
				Nodes: map[string]string{"n1": "completed", "n2": "in-progress", "n3": "pending"}}}}},
		{name: "a control with no node yet",
			controls: []*InstanceManagerUpgradeControl{control(InstanceManagerUpgradeControlName, "", nil)},
			want:     dataplane.LonghornUpgrader{Controls: []dataplane.UpgradeControl{{Name: InstanceManagerUpgradeControlName}}}},
		{name: "controls and upgrades sorted by name; one being deleted keeps its state; no state yet stays empty",
			controls: []*InstanceManagerUpgradeControl{control("b", "", nil), control("a", "", nil)},
			upgrades: []*InstanceManagerUpgrade{deleting, imu("upgrade-n2-20261130121500", "n2", "relocating-engines"),
				imu("upgrade-n1-20261130120000", "n1", "completed"), imu("upgrade-n4-20261130124500", "n4", "")},
			want: dataplane.LonghornUpgrader{
				Controls: []dataplane.UpgradeControl{{Name: "a"}, {Name: "b"}},
				Upgrades: []dataplane.IMUpgrade{
					{Name: "upgrade-n1-20261130120000", Node: "n1", State: "completed"},
					{Name: "upgrade-n2-20261130121500", Node: "n2", State: "relocating-engines"},
					{Name: "upgrade-n3-20261130123000", Node: "n3", State: "restoring-engines"},
					{Name: "upgrade-n4-20261130124500", Node: "n4"},
				}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := slices.Clone(tt.upgrades)
			assert.Equal(t, tt.want, toUpgrader(tt.settings, tt.controls, tt.upgrades))
			assert.Equal(t, in, tt.upgrades, "the caller's slice is not reordered")
		})
	}
}

// The wire types read the fields of PR #4676's objects as the apiserver
// returns them, ignoring the rest.
func TestUpgraderWireTypes(t *testing.T) {
	var c InstanceManagerUpgradeControl
	require.NoError(t, FromUnstructured(&unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "longhorn.io/v1beta2", "kind": KindInstanceManagerUpgradeControl,
		"metadata": map[string]any{"name": InstanceManagerUpgradeControlName},
		"spec":     map[string]any{"targetImage": "im:v2", "startAt": ""},
		"status": map[string]any{"ownerID": "n1", "currentNode": "n2", "nodes": map[string]any{
			"n1": map[string]any{"state": "completed", "imuName": "upgrade-n1-1", "retryCount": int64(0)},
			"n2": map[string]any{"state": "in-progress", "imuName": "upgrade-n2-1", "retryCount": int64(2), "errorMsg": "x"},
		}},
	}}, &c))
	assert.Equal(t, dataplane.UpgradeControl{Name: InstanceManagerUpgradeControlName, CurrentNode: "n2",
		Nodes: map[string]string{"n1": "completed", "n2": "in-progress"}}, toUpgradeControl(&c))

	var u InstanceManagerUpgrade
	require.NoError(t, FromUnstructured(&unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "longhorn.io/v1beta2", "kind": KindInstanceManagerUpgrade,
		"metadata": map[string]any{"name": "upgrade-n2-1"},
		"spec":     map[string]any{"nodeID": "n2", "targetImage": "im:v2"},
		"status": map[string]any{"ownerID": "n1", "state": "waiting-for-source-im", "abortRequested": false,
			"engines": map[string]any{"pvc-1": map[string]any{"originalNodeID": "n2", "temporaryNodeID": "n3"}}},
	}}, &u))
	assert.Equal(t, dataplane.IMUpgrade{Name: "upgrade-n2-1", Node: "n2", State: "waiting-for-source-im"}, toIMUpgrade(&u))
}

// TestManagerIMImage: the --instance-manager-image of a node's manager pod,
// in either form of the flag, the newest pod's while a rollout replaces it.
func TestManagerIMImage(t *testing.T) {
	pod := func(age int, line ...string) *Pod {
		return &Pod{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(time.Date(2026, 1, 1, age, 0, 0, 0, time.UTC))},
			Spec: PodSpec{Containers: []Container{{Name: "sidecar", Command: []string{"--instance-manager-image", "wrong"}},
				{Name: ManagerContainer, Command: line[:1], Args: line[1:]}}}}
	}
	for _, tc := range []struct {
		name string
		pods []*Pod
		want string
	}{
		{"none", nil, ""},
		{"separate value", []*Pod{pod(1, "longhorn-manager", "-d", "daemon", "--instance-manager-image", "im:v2", "--manager-image", "m")}, "im:v2"},
		{"joined value", []*Pod{pod(1, "longhorn-manager", "--instance-manager-image=im:v2")}, "im:v2"},
		{"no flag", []*Pod{pod(1, "longhorn-manager", "daemon")}, ""},
		{"a rollout: the newest", []*Pod{pod(1, "m", "--instance-manager-image", "im:v1"), pod(2, "m", "--instance-manager-image", "im:v2")}, "im:v2"},
	} {
		t.Run(tc.name, func(t *testing.T) { assert.Equal(t, tc.want, managerIMImage(tc.pods)) })
	}
}

// defaultRebuild are the rebuild settings at Longhorn's defaults.
var defaultRebuild = rebuildSettings{wait: DefaultReplicaReplenishmentWaitInterval, fastV2: true, zoneSoftAntiAffinity: true}

// TestSettingTrueForV2: fast-replica-rebuild-enabled's v2 value as
// Longhorn's scheduler reads it; what it cannot read counts as false.
func TestSettingTrueForV2(t *testing.T) {
	for value, want := range map[string]bool{
		`{"v1":"true","v2":"true"}`:  true,
		`{"v1":"true","v2":"false"}`: false,
		`{"v1":"false","v2":"1"}`:    true,
		`{"v1":"true"}`:              false,
		`true`:                       false,
		`{"v2":"yes"}`:               false,
		``:                           false,
	} {
		assert.Equal(t, want, settingTrueForV2(value), "%q", value)
	}
}
