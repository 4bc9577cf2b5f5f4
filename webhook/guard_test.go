package webhook_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"

	"github.com/switchback-dev/switchback/api/v1beta2"
	"github.com/switchback-dev/switchback/longhorn"
	"github.com/switchback-dev/switchback/sim"
	"github.com/switchback-dev/switchback/webhook"
)

const worker = "system:serviceaccount:longhorn-system:switchback-worker"

// upgradingFunc adapts a function to webhook.UpgradingNodes.
type upgradingFunc func(context.Context) (map[string]webhook.NodeUpgrade, error)

func (f upgradingFunc) UpgradingNodes(ctx context.Context) (map[string]webhook.NodeUpgrade, error) {
	return f(ctx)
}

func n2Upgrading(context.Context) (map[string]webhook.NodeUpgrade, error) {
	return map[string]webhook.NodeUpgrade{"n2": {Manager: "longhorn-system/upgrade", State: v1beta2.NodeUpgradeStateSwitchingOver}}, nil
}

func guardCluster(t testing.TB) *sim.Sim {
	s := threeNodes(t)
	require.NoError(t, s.AddVolume("pvc-v2", sim.EngineV2, []string{"n1", "n3"}, ""))
	require.NoError(t, s.AddVolume("pvc-v1", sim.EngineV1, []string{"n1", "n3"}, ""))
	require.NoError(t, s.AddVolume("pvc-on-n2", sim.EngineV2, []string{"n1", "n3"}, "n2"))
	return s
}

func va(volume string, tickets ...longhorn.AttachmentTicket) *longhorn.VolumeAttachment {
	out := &longhorn.VolumeAttachment{
		TypeMeta:   metav1.TypeMeta{APIVersion: longhorn.GroupVersion.String(), Kind: "VolumeAttachment"},
		ObjectMeta: metav1.ObjectMeta{Name: volume, Namespace: "longhorn-system"},
		Spec:       longhorn.VolumeAttachmentSpec{Volume: volume, AttachmentTickets: map[string]longhorn.AttachmentTicket{}},
	}
	for _, tk := range tickets {
		out.Spec.AttachmentTickets[tk.ID] = tk
	}
	return out
}

func vol(name, engine, engineNode string) *longhorn.Volume {
	return &longhorn.Volume{
		TypeMeta:   metav1.TypeMeta{APIVersion: longhorn.GroupVersion.String(), Kind: longhorn.KindVolume},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "longhorn-system"},
		Spec:       longhorn.VolumeSpec{DataEngine: engine, EngineNodeID: engineNode},
	}
}

func guardRequest(t *testing.T, op admissionv1.Operation, user string, old, obj any) *admissionv1.AdmissionRequest {
	t.Helper()
	raw := func(o any) runtime.RawExtension {
		if o == nil {
			return runtime.RawExtension{}
		}
		b, err := json.Marshal(o)
		require.NoError(t, err)
		return runtime.RawExtension{Raw: b}
	}
	kind := metav1.GroupVersionKind{Group: "longhorn.io", Version: "v1beta2", Kind: "VolumeAttachment"}
	if _, ok := obj.(*longhorn.Volume); ok {
		kind.Kind = longhorn.KindVolume
	}
	return &admissionv1.AdmissionRequest{UID: "guard-uid", Kind: kind, Namespace: "longhorn-system", Operation: op,
		UserInfo: authenticationv1.UserInfo{Username: user}, Object: raw(obj), OldObject: raw(old)}
}

func TestGuard(t *testing.T) {
	csi := func(node string) longhorn.AttachmentTicket {
		return longhorn.AttachmentTicket{ID: "csi-" + node, Type: "csi-attacher", NodeID: node}
	}
	const refusedAttach = "attaching v2 volume pvc-v2 is refused while its node is upgraded: ticket csi-n2 (csi-attacher) for node n2, " +
		"whose v2 data engine is being upgraded by DataEngineUpgradeManager longhorn-system/upgrade (switching-over); it is retried and passes once that node's upgrade is over"
	const refusedMove = "moving the engine of v2 volume pvc-v2 to node n2 (spec.engineNodeID) is refused: that node's v2 data engine is being upgraded by " +
		"DataEngineUpgradeManager longhorn-system/upgrade (switching-over); set it once that node's upgrade is over"
	tests := []struct {
		name      string
		op        admissionv1.Operation
		user      string
		old, obj  any
		upgrading upgradingFunc
		disabled  bool
		denied    string
	}{
		{name: "a CSI attach to the node being upgraded", op: admissionv1.Update, user: "system:serviceaccount:longhorn-system:longhorn-service-account",
			old: va("pvc-v2"), obj: va("pvc-v2", csi("n2")), denied: refusedAttach},
		{name: "the same on create", op: admissionv1.Create, obj: va("pvc-v2", csi("n2")), denied: refusedAttach},
		{name: "a ticket moved to the node", op: admissionv1.Update, old: va("pvc-v2", csi("n1")),
			obj: va("pvc-v2", longhorn.AttachmentTicket{ID: "csi-n1", Type: "csi-attacher", NodeID: "n2"}),
			denied: "attaching v2 volume pvc-v2 is refused while its node is upgraded: ticket csi-n1 (csi-attacher) for node n2, " +
				"whose v2 data engine is being upgraded by DataEngineUpgradeManager longhorn-system/upgrade (switching-over); it is retried and passes once that node's upgrade is over"},
		{name: "an attach elsewhere", op: admissionv1.Update, old: va("pvc-v2"), obj: va("pvc-v2", csi("n1"))},
		{name: "an existing ticket kept (Longhorn bumps its generation)", op: admissionv1.Update, old: va("pvc-v2", csi("n2")), obj: va("pvc-v2", csi("n2"))},
		{name: "a detach", op: admissionv1.Update, old: va("pvc-v2", csi("n2")), obj: va("pvc-v2")},
		{name: "a v1 volume", op: admissionv1.Update, old: va("pvc-v1"), obj: va("pvc-v1", csi("n2"))},
		{name: "a volume the cache does not have yet is guarded (the retry passes once it does, or Longhorn refuses)", op: admissionv1.Update,
			old: va("ghost"), obj: va("ghost", csi("n2")),
			denied: "attaching v2 volume ghost is refused while its node is upgraded: ticket csi-n2 (csi-attacher) for node n2, " +
				"whose v2 data engine is being upgraded by DataEngineUpgradeManager longhorn-system/upgrade (switching-over); it is retried and passes once that node's upgrade is over"},
		{name: "Longhorn's snapshot ticket for a volume already attached to the node", op: admissionv1.Update,
			old: va("pvc-on-n2", csi("n2")), obj: va("pvc-on-n2", csi("n2"), longhorn.AttachmentTicket{ID: "snapshot-controller-s1", Type: "snapshot-controller", NodeID: "n2"})},
		{name: "a ticket for the node a volume is attached to, not asked there before", op: admissionv1.Update,
			old: va("pvc-on-n2"), obj: va("pvc-on-n2", longhorn.AttachmentTicket{ID: "volume-rebuilding-controller-pvc-on-n2", Type: "volume-rebuilding-controller", NodeID: "n2"})},
		{name: "a detach and a new attach to the node in one update: the attach is refused", op: admissionv1.Update,
			old: va("pvc-v2", csi("n1")), obj: va("pvc-v2", csi("n2")), denied: refusedAttach},
		{name: "no upgrade in progress", op: admissionv1.Update, old: va("pvc-v2"), obj: va("pvc-v2", csi("n2")),
			upgrading: func(context.Context) (map[string]webhook.NodeUpgrade, error) { return nil, nil }},
		{name: "the upgrading nodes cannot be read: fails open", op: admissionv1.Update, old: va("pvc-v2"), obj: va("pvc-v2", csi("n2")),
			upgrading: func(context.Context) (map[string]webhook.NodeUpgrade, error) {
				return nil, errors.New("informer not synced")
			}},
		{name: "guard disabled", op: admissionv1.Update, old: va("pvc-v2"), obj: va("pvc-v2", csi("n2")), disabled: true},
		{name: "a delete", op: admissionv1.Delete, old: va("pvc-v2", csi("n2"))},

		{name: "an engine moved onto the node being upgraded", op: admissionv1.Update, user: "admin",
			old: vol("pvc-v2", "v2", ""), obj: vol("pvc-v2", "v2", "n2"), denied: refusedMove},
		{name: "a volume created with its engine there", op: admissionv1.Create, obj: vol("pvc-v2", "v2", "n2"), denied: refusedMove},
		{name: "Switchback's switch-back restores the engine onto the node", op: admissionv1.Update, user: worker,
			old: vol("pvc-v2", "v2", "n1"), obj: vol("pvc-v2", "v2", "n2")},
		{name: "an engine moved elsewhere", op: admissionv1.Update, old: vol("pvc-v2", "v2", ""), obj: vol("pvc-v2", "v2", "n3")},
		{name: "an engine left there (any other update)", op: admissionv1.Update, old: vol("pvc-v2", "v2", "n2"), obj: vol("pvc-v2", "v2", "n2")},
		{name: "an engine moved off the node", op: admissionv1.Update, old: vol("pvc-v2", "v2", "n2"), obj: vol("pvc-v2", "v2", "")},
		{name: "a v1 volume's engine", op: admissionv1.Update, old: vol("pvc-v1", "", ""), obj: vol("pvc-v1", "", "n2")},
	}
	cluster := guardCluster(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := tt.upgrading
			if up == nil {
				up = n2Upgrading
			}
			g, err := webhook.NewGuard(webhook.GuardConfig{Upgrading: up, Cluster: cluster, Trusted: []string{worker}, Disabled: tt.disabled})
			require.NoError(t, err)
			obj := tt.obj
			if obj == nil {
				obj = tt.old
			}
			resp := g.Admit(context.Background(), guardRequest(t, tt.op, tt.user, tt.old, obj))
			if tt.denied == "" {
				assert.True(t, resp.Allowed, "%+v", resp.Result)
				return
			}
			require.False(t, resp.Allowed)
			require.NotNil(t, resp.Result)
			assert.Equal(t, int32(http.StatusForbidden), resp.Result.Code)
			assert.Equal(t, tt.denied, resp.Result.Message)
		})
	}
}

func TestNewGuardNeedsItsSources(t *testing.T) {
	_, err := webhook.NewGuard(webhook.GuardConfig{Upgrading: upgradingFunc(n2Upgrading)})
	require.Error(t, err)
	_, err = webhook.NewGuard(webhook.GuardConfig{Disabled: true})
	require.NoError(t, err, "a disabled guard needs nothing")
}

func TestUpgradingFromStore(t *testing.T) {
	nu := func(ns, name, node string, st v1beta2.NodeUpgradeState) *v1beta2.NodeDataEngineUpgrade {
		return &v1beta2.NodeDataEngineUpgrade{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec:   v1beta2.NodeDataEngineUpgradeSpec{NodeID: node, DataEngineUpgradeManager: "upgrade"},
			Status: v1beta2.NodeDataEngineUpgradeStatus{State: st}}
	}
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	for _, o := range []*v1beta2.NodeDataEngineUpgrade{
		nu("longhorn-system", "upgrade-n1", "n1", v1beta2.NodeUpgradeStateCompleted),
		nu("longhorn-system", "upgrade-n2", "n2", v1beta2.NodeUpgradeStateSwitchingOver),
		nu("longhorn-system", "upgrade-n3", "n3", ""),
		nu("longhorn-system", "upgrade-n5", "n5", v1beta2.NodeUpgradeStatePending),
		nu("team-b", "upgrade-n4", "n4", v1beta2.NodeUpgradeStateInitializing),
	} {
		require.NoError(t, store.Add(o))
	}
	synced := false
	s := webhook.UpgradingFromStore{Store: store, Namespace: "longhorn-system", HasSynced: func() bool { return synced }}
	_, err := s.UpgradingNodes(context.Background())
	require.Error(t, err, "an unsynced informer is not trusted")
	synced = true
	got, err := s.UpgradingNodes(context.Background())
	require.NoError(t, err)
	assert.Equal(t, map[string]webhook.NodeUpgrade{
		"n2": {Manager: "longhorn-system/upgrade", State: v1beta2.NodeUpgradeStateSwitchingOver},
	}, got, "only node upgrades at work count: not completed ones, not ones that never started "+
		"(pending, no status: also those of an upgrade that ended before them), not other namespaces")
}

// TestGuardKeepsSnapshotsWhileTargetsMove: a Snapshot object of an
// attached v2 volume whose target moves is not deleted, by anyone; once
// the move ended, or for a detached or v1 volume, it is.
func TestGuardKeepsSnapshotsWhileTargetsMove(t *testing.T) {
	s := sim.New(sim.Config{Clock: sim.NewFakeClock(time.Time{}), TargetMoveLatency: time.Minute})
	for _, n := range []string{"n1", "n2", "n3"} {
		require.NoError(t, s.AddNode(n))
	}
	require.NoError(t, s.AddVolume("pvc-v2", sim.EngineV2, []string{"n1", "n3"}, ""))
	require.NoError(t, s.AddVolume("pvc-v1", sim.EngineV1, []string{"n1", "n3"}, "n1"))
	require.NoError(t, s.AddVolumeSpec(sim.VolumeSpec{Name: "pvc-moving", ReplicasOn: []string{"n1", "n3"}, AttachedTo: "n1"}))
	g, err := webhook.NewGuard(webhook.GuardConfig{Cluster: s, Upgrading: upgradingFunc(n2Upgrading), Trusted: []string{worker}})
	require.NoError(t, err)
	snap := func(volume string) *longhorn.Snapshot {
		return &longhorn.Snapshot{TypeMeta: metav1.TypeMeta{APIVersion: longhorn.GroupVersion.String(), Kind: longhorn.KindSnapshot},
			ObjectMeta: metav1.ObjectMeta{Name: "snap-" + volume, Namespace: "longhorn-system"}, Spec: longhorn.SnapshotSpec{Volume: volume}}
	}
	deleting := func(volume, user string) *admissionv1.AdmissionResponse {
		req := guardRequest(t, admissionv1.Delete, user, snap(volume), nil)
		req.Kind.Kind = longhorn.KindSnapshot
		return g.Admit(context.Background(), req)
	}
	require.True(t, deleting("pvc-moving", "longhorn").Allowed, "settled on its node")
	require.NoError(t, s.SetEngineNode(context.Background(), "pvc-moving", "n3"))
	for _, user := range []string{"system:serviceaccount:longhorn-system:longhorn-service-account", worker, "admin"} {
		resp := deleting("pvc-moving", user)
		require.False(t, resp.Allowed, user)
		assert.Contains(t, resp.Result.Message, "deleting snapshot snap-pvc-moving of v2 volume pvc-moving is refused while the volume's target moves")
	}
	assert.True(t, deleting("pvc-v2", "longhorn").Allowed, "detached")
	assert.True(t, deleting("pvc-v1", "longhorn").Allowed, "v1")
	assert.True(t, deleting("pvc-gone", "longhorn").Allowed, "no such volume")
	s.Settle()
	assert.True(t, deleting("pvc-moving", "longhorn").Allowed, "the move over")
}
