package longhorn

import (
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/switchback-dev/switchback/dataplane"
)

// The cases of longhorn-manager v1.12.1's own controller tests about a v2
// switch-over, carried over as facts (their inputs and what they expect,
// not their code): the adapter must read each state as Longhorn's
// controllers judge it. docs/longhorn-evidence.md §8.1 cites the tests.

// switchoverBase is the objects of upstream's switch-over test base
// (setupSwitchoverTestInfra): a v2 volume attached on n1 asked to run its
// engine on n2, its old engine active on n1 (storage 10.1.0.1:8501), the
// migration engine on n2 (storage 10.1.0.2:8502) running, one replica on
// n1, the EngineFrontend on n1 asked to connect to the migration engine.
func switchoverBase() (*Volume, []*Engine, []*EngineFrontend) {
	v := &Volume{ObjectMeta: metav1.ObjectMeta{Name: "vol"},
		Spec:   VolumeSpec{NodeID: "n1", EngineNodeID: "n2", DataEngine: "v2", NumberOfReplicas: 1, Frontend: "blockdev"},
		Status: VolumeStatus{State: VolumeAttached, CurrentNodeID: "n1", CurrentEngineNodeID: "n1", Robustness: "healthy"}}
	old := &Engine{ObjectMeta: metav1.ObjectMeta{Name: "vol-e-0"}, Spec: EngineSpec{NodeID: "n1", Active: true},
		Status: EngineStatus{CurrentState: StateRunning, IP: "10.0.0.1", StorageIP: "10.1.0.1", Port: 8501, ReplicaModeMap: map[string]string{"vol-r": ModeRW}}}
	migration := &Engine{ObjectMeta: metav1.ObjectMeta{Name: "vol-e-1"}, Spec: EngineSpec{NodeID: "n2"},
		Status: EngineStatus{CurrentState: StateRunning, IP: "10.0.0.2", StorageIP: "10.1.0.2", Port: 8502}}
	ef := &EngineFrontend{ObjectMeta: metav1.ObjectMeta{Name: "vol-ef-0"}, Spec: EngineFrontendSpec{NodeID: "n1", Active: true, EngineName: "vol-e-1"},
		Status: EngineFrontendStatus{CurrentState: StateRunning}}
	return v, []*Engine{old, migration}, []*EngineFrontend{ef}
}

// moving is a switch-over under way as Longhorn's isV2EngineSwitchoverInProgress
// judges it, from what the adapter reports.
func moving(v dataplane.Volume) bool {
	return v.Attached() && (v.Switchover != dataplane.SwitchoverNone || v.EngineHome(v.EngineNode) != v.TargetNode || !v.TargetReady)
}

func TestUpstreamSwitchoverCases(t *testing.T) {
	rep := &Replica{ObjectMeta: metav1.ObjectMeta{Name: "vol-r"}, Spec: ReplicaSpec{NodeID: "n1", HealthyAt: "t"}, Status: ReplicaStatus{CurrentState: StateRunning}}
	tests := []struct {
		name string
		// shape turns the base into the case's state.
		shape func(v *Volume, es []*Engine, efs []*EngineFrontend) ([]*Engine, []*EngineFrontend)
		// want: where the target runs, whether the move is done, whether it is
		// under way.
		target string
		ready  bool
		moving bool
	}{
		{name: "KeepsOldEngineRunningUntilTargetStatusMoves: the initiator still on the old target",
			shape: func(v *Volume, es []*Engine, efs []*EngineFrontend) ([]*Engine, []*EngineFrontend) {
				v.Status.SwitchoverState = "switching-over"
				efs[0].Status.TargetIP, efs[0].Status.TargetPort = "10.1.0.1", 8501
				return es, efs
			},
			target: "n1", ready: false, moving: true},
		{name: "StopsOldEngineAfterSwitchoverComplete: the initiator on the new target, the old engine not gone yet",
			shape: func(v *Volume, es []*Engine, efs []*EngineFrontend) ([]*Engine, []*EngineFrontend) {
				v.Status.SwitchoverState, v.Status.CurrentEngineNodeID = "finalizing", "n2"
				es[0].Spec.Active, es[1].Spec.Active = false, true
				efs[0].Status.TargetIP, efs[0].Status.TargetPort = "10.1.0.2", 8502
				return es, efs
			},
			target: "n2", ready: false, moving: true},
		{name: "CleanupUsesActiveEngine, and IsV2EngineSwitchoverInProgress (b): only the migration engine left, active, where it is asked",
			shape: func(v *Volume, es []*Engine, efs []*EngineFrontend) ([]*Engine, []*EngineFrontend) {
				v.Status.CurrentEngineNodeID = "n2"
				es[1].Spec.Active = true
				efs[0].Status.TargetIP, efs[0].Status.TargetPort = "10.1.0.2", 8502
				return es[1:], efs
			},
			target: "n2", ready: true, moving: false},
		{name: "IsV2EngineSwitchoverInProgress (a): engine node asked elsewhere, the engine still at home",
			shape: func(v *Volume, es []*Engine, efs []*EngineFrontend) ([]*Engine, []*EngineFrontend) {
				es[0].Spec.Active = true
				efs[0].Spec.EngineName = "vol-e-0"
				efs[0].Status.TargetIP, efs[0].Status.TargetPort = "10.1.0.1", 8501
				return es[:1], efs
			},
			target: "n1", ready: true, moving: true},
		{name: "IsV2EngineSwitchoverInProgress (c): the current engine node moved, the engine still on the old one (the transition window)",
			shape: func(v *Volume, es []*Engine, efs []*EngineFrontend) ([]*Engine, []*EngineFrontend) {
				v.Status.CurrentEngineNodeID = "n2"
				efs[0].Spec.EngineName = "vol-e-0"
				efs[0].Status.TargetIP, efs[0].Status.TargetPort = "10.1.0.1", 8501
				return es[:1], efs
			},
			target: "n2", ready: false, moving: true},
		{name: "IsV2EngineSwitchoverInProgress (e): not attached",
			shape: func(v *Volume, es []*Engine, efs []*EngineFrontend) ([]*Engine, []*EngineFrontend) {
				v.Spec.NodeID = ""
				v.Status.State, v.Status.CurrentNodeID, v.Status.CurrentEngineNodeID = VolumeDetached, "", ""
				return es[:1], nil
			},
			target: "", ready: false, moving: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, es, efs := switchoverBase()
			es, efs = tt.shape(v, es, efs)
			got := toVolume(v, []*Replica{rep}, es, efs, nil, defaultRebuild)
			assert.Equal(t, tt.target, got.TargetNode, "where the target runs")
			assert.Equal(t, tt.ready, got.TargetReady, "Longhorn's own end of the move")
			assert.Equal(t, tt.moving, moving(got), "a switch-over under way")
		})
	}
}

// IsEngineFrontendTargetInitialized: an initiator is connected to an
// engine only with both its address and its port.
func TestUpstreamFrontendTargetInitialized(t *testing.T) {
	e := &Engine{Status: EngineStatus{StorageIP: "10.1.0.2", Port: 8502}}
	for _, tt := range []struct {
		ip   string
		port int
		want bool
	}{{"", 0, false}, {"10.1.0.2", 0, false}, {"", 8502, false}, {"10.1.0.2", 8502, true}} {
		ef := &EngineFrontend{Status: EngineFrontendStatus{TargetIP: tt.ip, TargetPort: tt.port}}
		assert.Equal(t, tt.want, connectedTo(ef, e), "%q:%d", tt.ip, tt.port)
	}
}
