package webhook_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/switchback-dev/switchback/api/v1beta2"
	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/precheck"
	"github.com/switchback-dev/switchback/sim"
	"github.com/switchback-dev/switchback/webhook"
)

// TestAdmitThroughHandler sends each case as the apiserver would, through the
// HTTP handler, and checks the decision, its code and its message.
func TestAdmitThroughHandler(t *testing.T) {
	type want struct {
		allowed bool
		code    int32
		reason  metav1.StatusReason
		// message parts, each required verbatim.
		message []string
		// causes are the fields blamed, in order ("" for none).
		causes []string
	}
	allowed := want{allowed: true}
	denied := func(causes []string, message ...string) want {
		return want{code: http.StatusForbidden, reason: metav1.StatusReasonForbidden, message: message, causes: causes}
	}
	badRequest := func(message string) want {
		return want{code: http.StatusBadRequest, reason: metav1.StatusReasonBadRequest, message: []string{message}}
	}

	degradedVolume := func(t *testing.T) dataplane.Reader {
		s := threeNodes(t)
		require.NoError(t, s.AddVolumeSpec(sim.VolumeSpec{Name: "vol-1", ReplicasOn: []string{"n1"}, AttachedTo: "n1", NumberOfReplicas: 3}))
		return s
	}
	imageMissing := func(t *testing.T) dataplane.Reader {
		s := threeNodes(t)
		require.NoError(t, s.SetNodeImages("n2", []string{sim.OldIMImage}))
		return s
	}
	tests := []struct {
		name    string
		cluster func(t *testing.T) dataplane.Reader
		active  webhook.ActiveUpgrades
		req     func(t *testing.T) *admissionv1.AdmissionRequest
		want    want
	}{
		{
			name: "every v2 node: accepted",
			req:  func(t *testing.T) *admissionv1.AdmissionRequest { return request(t, manager("v2")) },
			want: allowed,
		},
		{
			name: "a subset, the rest on the same old image: accepted",
			req:  func(t *testing.T) *admissionv1.AdmissionRequest { return request(t, manager("v2", "n1", "n2")) },
			want: allowed,
		},
		{
			name: "Longhorn's own upgrader on: refused, saying what to turn off",
			cluster: func(t *testing.T) dataplane.Reader {
				s := threeNodes(t)
				s.SetLonghornUpgrader(dataplane.LonghornUpgrader{Settings: map[string]string{dataplane.SettingIMAutoUpgrade: `{"v2":"true"}`}})
				return s
			},
			req: func(t *testing.T) *admissionv1.AdmissionRequest { return request(t, manager("v2")) },
			want: denied([]string{""},
				`DataEngineUpgradeManager "longhorn-system/upgrade" refused: NoOtherUpgrader (OtherUpgraderActive): Longhorn's own instance-manager upgrader would race this upgrade: setting allow-instance-manager-automatic-upgrade is "{\"v2\":\"true\"}": set "v2" to "false" in it`),
		},
		{
			name: "unknown nodes: refused, naming them",
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				return request(t, manager("v2", "n1", "ghost-b", "ghost-a"))
			},
			want: denied([]string{"spec.nodes"},
				`DataEngineUpgradeManager "longhorn-system/upgrade" refused: spec.nodes: NodesKnown (UnknownNodes): spec.nodes names unknown nodes: ghost-a, ghost-b`),
		},
		{
			name: "a node without the v2 engine: refused",
			cluster: func(t *testing.T) dataplane.Reader {
				return newCluster(t, sim.NodeSpec{Name: "n1"}, sim.NodeSpec{Name: "n2"}, sim.NodeSpec{Name: "v1-only", NoV2: true})
			},
			req:  func(t *testing.T) *admissionv1.AdmissionRequest { return request(t, manager("v2", "n1", "v1-only")) },
			want: denied([]string{"spec.nodes"}, "spec.nodes: NodesKnown (NodesWithoutV2Engine): spec.nodes names nodes without the v2 data engine: v1-only"),
		},
		{
			name:   "another active upgrade: refused, naming it",
			active: activeNamed("other-ns/first"),
			req:    func(t *testing.T) *admissionv1.AdmissionRequest { return request(t, manager("v2")) },
			want: denied([]string{""},
				`DataEngineUpgradeManager "longhorn-system/upgrade" refused: SingleActiveUpgrade (AnotherUpgradeActive): another upgrade is active: other-ns/first`),
		},
		{
			name:    "a single v2 node: refused",
			cluster: func(t *testing.T) dataplane.Reader { return newCluster(t, sim.NodeSpec{Name: "solo"}) },
			req:     func(t *testing.T) *admissionv1.AdmissionRequest { return request(t, manager("v2")) },
			want:    denied([]string{"spec.nodes"}, "spec.nodes: AtLeastTwoNodes (TooFewNodes): 1 node(s) run the v2 data engine (solo); at least 2 are needed"),
		},
		{
			name: "version drift: a node left on an older image outside the subset",
			cluster: func(t *testing.T) dataplane.Reader {
				return newCluster(t,
					sim.NodeSpec{Name: "n1", IMImage: sim.NewIMImage},
					sim.NodeSpec{Name: "n2"},
					sim.NodeSpec{Name: "n3", IMImage: olderImage})
			},
			req: func(t *testing.T) *admissionv1.AdmissionRequest { return request(t, manager("v2", "n2")) },
			want: denied([]string{"spec.nodes"},
				"spec.nodes: NoVersionDrift (VersionDrift): nodes to upgrade run n2="+sim.OldIMImage+
					" while the nodes outside this upgrade run "+olderImage+" (n3); finish the earlier upgrade first"),
		},
		{
			name: "data engine v1: refused on spec.dataEngine",
			req:  func(t *testing.T) *admissionv1.AdmissionRequest { return request(t, manager("v1")) },
			want: denied([]string{"spec.dataEngine"}, `spec.dataEngine: DataEngineSupported (UnsupportedDataEngine): data engine "v1" is not supported`),
		},
		{
			name:   "several failures: every one listed",
			active: activeNamed("longhorn-system/first"),
			req:    func(t *testing.T) *admissionv1.AdmissionRequest { return request(t, manager("v1", "ghost")) },
			want: denied([]string{"spec.dataEngine", "spec.nodes", ""},
				`DataEngineUpgradeManager "longhorn-system/upgrade" refused, 3 admission checks failed:`,
				"\n- spec.dataEngine: DataEngineSupported (UnsupportedDataEngine): ",
				"\n- spec.nodes: NodesKnown (UnknownNodes): spec.nodes names unknown nodes: ghost;",
				"\n- SingleActiveUpgrade (AnotherUpgradeActive): another upgrade is active: longhorn-system/first"),
		},
		{
			name: "add-first with no node to take a temporary replica: refused on spec.replicaPolicy",
			cluster: func(t *testing.T) dataplane.Reader {
				s := newCluster(t, sim.NodeSpec{Name: "n1"}, sim.NodeSpec{Name: "n2"})
				require.NoError(t, s.AddVolume("vol-1", sim.EngineV2, []string{"n1", "n2"}, "n1"))
				return s
			},
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				m := manager("v2")
				m.Spec.ReplicaPolicy = v1beta2.ReplicaPolicyAddFirst
				return request(t, m)
			},
			want: denied([]string{"spec.replicaPolicy"},
				"spec.replicaPolicy: TemporaryReplicasFit (NoRoomForTemporaryReplica): no node outside n2 can take a temporary replica of volume vol-1: every other node holds a replica of it;",
				"or create the manager with spec.replicaPolicy rebuild"),
		},
		{
			name:    "a degraded volume is left to the controller: accepted",
			cluster: degradedVolume,
			req:     func(t *testing.T) *admissionv1.AdmissionRequest { return request(t, manager("v2")) },
			want:    allowed,
		},
		{
			name:    "a target image not pulled yet is left to the controller: accepted",
			cluster: imageMissing,
			req:     func(t *testing.T) *admissionv1.AdmissionRequest { return request(t, manager("v2")) },
			want:    allowed,
		},
		{
			name:    "cluster unreadable: refused (fail closed)",
			cluster: func(t *testing.T) dataplane.Reader { return failingReader{threeNodes(t)} },
			req:     func(t *testing.T) *admissionv1.AdmissionRequest { return request(t, manager("v2")) },
			want: want{code: http.StatusInternalServerError, reason: metav1.StatusReasonInternalError,
				message: []string{"the admission checks could not run (read the cluster: plan: read nodes: longhorn API unavailable); the webhook fails closed"}},
		},
		{
			name: "active upgrades unreadable: refused (fail closed)",
			active: webhook.ActiveFunc(func(context.Context, types.UID) ([]string, error) {
				return nil, errors.New("apiserver unavailable")
			}),
			req: func(t *testing.T) *admissionv1.AdmissionRequest { return request(t, manager("v2")) },
			want: want{code: http.StatusInternalServerError, reason: metav1.StatusReasonInternalError,
				message: []string{"list active upgrades: apiserver unavailable"}},
		},
		{
			name: "an UPDATE is not checked (CEL keeps the spec immutable)",
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				r := request(t, manager("v2", "ghost"))
				r.Operation = admissionv1.Update
				return r
			},
			want: allowed,
		},
		{
			name: "wrong kind: refused",
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				r := request(t, map[string]any{"apiVersion": "apps/v1", "kind": "Deployment"})
				r.Kind = metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
				return r
			},
			want: badRequest("this webhook validates longhorn.io/v1beta2 DataEngineUpgradeManager only, got apps/v1 Deployment"),
		},
		{
			name: "missing object: refused",
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				r := request(t, manager("v2"))
				r.Object.Raw = nil
				return r
			},
			want: badRequest("the admission request carries no object"),
		},
		{
			name: "undecodable object: refused",
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				return request(t, map[string]any{"kind": "DataEngineUpgradeManager", "spec": map[string]any{"nodes": "n1"}})
			},
			want: badRequest("cannot decode the DataEngineUpgradeManager: json: cannot unmarshal"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var cluster dataplane.Reader = threeNodes(t)
			if tt.cluster != nil {
				cluster = tt.cluster(t)
			}
			active := webhook.ActiveUpgrades(noActive)
			if tt.active != nil {
				active = tt.active
			}
			h := webhook.NewHandler(webhook.ServerConfig{Admitter: newAdmitter(t, cluster, active)})

			resp := decodeAnswer(t, post(h, reviewBody(t, tt.req(t))))

			assert.Equal(t, tt.want.allowed, resp.Allowed)
			if tt.want.allowed {
				assert.Nil(t, resp.Result)
				return
			}
			require.NotNil(t, resp.Result)
			assert.Equal(t, metav1.StatusFailure, resp.Result.Status)
			assert.Equal(t, tt.want.code, resp.Result.Code)
			assert.Equal(t, tt.want.reason, resp.Result.Reason)
			for _, part := range tt.want.message {
				assert.Contains(t, resp.Result.Message, part)
			}
			if tt.want.causes == nil {
				assert.Nil(t, resp.Result.Details)
				return
			}
			require.NotNil(t, resp.Result.Details)
			var fields []string
			for _, c := range resp.Result.Details.Causes {
				fields = append(fields, c.Field)
				assert.NotEmpty(t, c.Type)
				assert.Contains(t, resp.Result.Message, c.Message)
			}
			assert.Equal(t, tt.want.causes, fields)
		})
	}
}

// TestEvaluatePassesTheObjectUIDToActive checks that the manager being
// admitted is excluded from the active ones by its UID.
func TestEvaluatePassesTheObjectUIDToActive(t *testing.T) {
	var got types.UID
	a := newAdmitter(t, threeNodes(t), webhook.ActiveFunc(func(_ context.Context, except types.UID) ([]string, error) {
		got = except
		return nil, nil
	}))
	results, err := a.Evaluate(context.Background(), manager("v2"))
	require.NoError(t, err)
	assert.Equal(t, types.UID(objectUID), got)
	require.Len(t, results, len(webhook.AdmissionChecks()))
	for i, r := range results {
		assert.Equal(t, webhook.AdmissionChecks()[i], r.Check)
		assert.True(t, r.Passed, "%+v", r)
	}
}

// TestEveryPrecheckIsDecided fails when a precheck is added without deciding
// whether admission enforces it.
func TestEveryPrecheckIsDecided(t *testing.T) {
	decided := append(webhook.AdmissionChecks(), webhook.DeferredChecks()...)
	assert.ElementsMatch(t, precheck.Names(), decided)
	assert.Equal(t, []string{precheck.DefaultImageOnAllNodesReady, precheck.VolumesHealthy}, webhook.DeferredChecks())
}

func TestNewAdmitterRequiresNamespaceClusterAndActive(t *testing.T) {
	for _, cfg := range []webhook.AdmitterConfig{
		{Namespace: ns, Active: noActive},
		{Namespace: ns, Cluster: threeNodes(t)},
		{Cluster: threeNodes(t), Active: noActive},
	} {
		_, err := webhook.NewAdmitter(cfg)
		require.Error(t, err)
	}
}

// A manager outside the managed namespace is refused before any check: the
// controller would never take it in, and it would sit there without a state.
func TestAdmitRefusesAnotherNamespace(t *testing.T) {
	m := manager("v2")
	m.Namespace = "team-b"
	req := request(t, m)
	req.Namespace = m.Namespace
	resp := newAdmitter(t, threeNodes(t), noActive).Admit(context.Background(), req)
	assert.False(t, resp.Allowed)
	require.NotNil(t, resp.Result)
	assert.Equal(t, int32(http.StatusForbidden), resp.Result.Code)
	assert.Equal(t, `DataEngineUpgradeManager "team-b/upgrade" refused: metadata.namespace: Switchback manages upgrades in namespace "longhorn-system" only (its controller takes in no other): create it there`, resp.Result.Message)
	require.NotNil(t, resp.Result.Details)
	require.Len(t, resp.Result.Details.Causes, 1)
	assert.Equal(t, "metadata.namespace", resp.Result.Details.Causes[0].Field)
}

// TestAdmitTimeout checks that a cluster read that hangs is cut at the
// configured timeout and refused, before the apiserver's own deadline.
func TestAdmitTimeout(t *testing.T) {
	a, err := webhook.NewAdmitter(webhook.AdmitterConfig{
		Namespace: ns, Cluster: hangingReader{threeNodes(t)}, Active: noActive, Timeout: 50 * time.Millisecond,
	})
	require.NoError(t, err)
	resp := a.Admit(context.Background(), request(t, manager("v2")))
	assert.False(t, resp.Allowed)
	require.NotNil(t, resp.Result)
	assert.Contains(t, resp.Result.Message, context.DeadlineExceeded.Error())
}

// hangingReader's node list blocks until the context ends.
type hangingReader struct{ dataplane.Reader }

func (hangingReader) Nodes(ctx context.Context) ([]dataplane.Node, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func TestActiveFromStore(t *testing.T) {
	store := newManagerStore(t,
		mgr(ns, "pending", "", "uid-a"),
		mgr(ns, "upgrading", v1beta2.UpgradeStateUpgrading, "uid-b"),
		mgr(ns, "done", v1beta2.UpgradeStateCompleted, "uid-c"),
		mgr(ns, "failed", v1beta2.UpgradeStateError, "uid-d"),
		mgr(ns, "cancelled", v1beta2.UpgradeStateCancelled, "uid-e"),
		mgr(ns, "initializing", v1beta2.UpgradeStateInitializing, "uid-f"),
		mgr(ns, "self", "", "uid-self"),
		mgr("team-b", "elsewhere", v1beta2.UpgradeStateUpgrading, "uid-g"), // never taken in: does not count
	)
	synced := false
	active := webhook.ActiveFromStore{Store: store, Namespace: ns, HasSynced: func() bool { return synced }}

	_, err := active.ActiveUpgrades(context.Background(), "uid-self")
	require.Error(t, err, "an unsynced informer must not be trusted")

	synced = true
	got, err := active.ActiveUpgrades(context.Background(), "uid-self")
	require.NoError(t, err)
	assert.Equal(t, []string{ns + "/initializing", ns + "/pending", ns + "/upgrading"}, got)
}
