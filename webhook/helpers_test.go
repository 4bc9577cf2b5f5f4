package webhook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/switchback-dev/switchback/api/v1beta2"
	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/sim"
	"github.com/switchback-dev/switchback/webhook"
)

const (
	ns          = "longhorn-system"
	olderImage  = "longhornio/longhorn-instance-manager:v1.7.0"
	managerName = "upgrade"
	requestUID  = "7d4a1f52-7c1e-4a43-9b8e-0c2f3f6b1e11"
	objectUID   = "0b8d2c9e-5a4f-4f7e-8f0e-3c1d2b4a5e6f"
)

// newCluster is a simulated cluster with the given nodes (sim defaults: Ready,
// v2, IM on sim.OldIMImage, target sim.NewIMImage pulled).
func newCluster(t testing.TB, nodes ...sim.NodeSpec) *sim.Sim {
	t.Helper()
	s := sim.New(sim.Config{Profile: dataplane.ProfileInPlace})
	for _, n := range nodes {
		require.NoError(t, s.AddNodeSpec(n))
	}
	return s
}

// threeNodes is a clean cluster of n1, n2, n3.
func threeNodes(t testing.TB) *sim.Sim {
	return newCluster(t, sim.NodeSpec{Name: "n1"}, sim.NodeSpec{Name: "n2"}, sim.NodeSpec{Name: "n3"})
}

// noActive reports no other active upgrade.
var noActive = webhook.ActiveFunc(func(context.Context, types.UID) ([]string, error) { return nil, nil })

// activeNamed reports the given managers as active.
func activeNamed(names ...string) webhook.ActiveFunc {
	return func(context.Context, types.UID) ([]string, error) { return names, nil }
}

func newAdmitter(t testing.TB, cluster dataplane.Reader, active webhook.ActiveUpgrades) *webhook.Admitter {
	t.Helper()
	a, err := webhook.NewAdmitter(webhook.AdmitterConfig{Namespace: ns, Cluster: cluster, Active: active})
	require.NoError(t, err)
	return a
}

// manager is a DataEngineUpgradeManager as kubectl would send it.
func manager(engine string, nodes ...string) *v1beta2.DataEngineUpgradeManager {
	return &v1beta2.DataEngineUpgradeManager{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1beta2.SchemeGroupVersion.String(), Kind: "DataEngineUpgradeManager"},
		ObjectMeta: metav1.ObjectMeta{Name: managerName, Namespace: ns, UID: objectUID},
		Spec:       v1beta2.DataEngineUpgradeManagerSpec{DataEngine: v1beta2.DataEngineType(engine), Nodes: nodes},
	}
}

// request is the admission request the apiserver sends for the CREATE of obj.
func request(t testing.TB, obj any) *admissionv1.AdmissionRequest {
	t.Helper()
	raw, err := json.Marshal(obj)
	require.NoError(t, err)
	dryRun := false
	return &admissionv1.AdmissionRequest{
		UID:       requestUID,
		Kind:      metav1.GroupVersionKind{Group: v1beta2.GroupName, Version: v1beta2.Version, Kind: "DataEngineUpgradeManager"},
		Resource:  metav1.GroupVersionResource{Group: v1beta2.GroupName, Version: v1beta2.Version, Resource: v1beta2.DataEngineUpgradeManagerResource},
		Name:      managerName,
		Namespace: ns,
		Operation: admissionv1.Create,
		Object:    runtime.RawExtension{Raw: raw},
		DryRun:    &dryRun,
	}
}

// reviewBody wraps req in an admission.k8s.io/v1 AdmissionReview.
func reviewBody(t testing.TB, req *admissionv1.AdmissionRequest) []byte {
	t.Helper()
	body, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request:  req,
	})
	require.NoError(t, err)
	return body
}

// post sends body to the handler's validate path as the apiserver does.
func post(h http.Handler, body []byte) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, webhook.ValidatePath, bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// decodeAnswer parses a 200 answer and checks the envelope every answer
// must have.
func decodeAnswer(t testing.TB, w *httptest.ResponseRecorder) *admissionv1.AdmissionResponse {
	t.Helper()
	require.Equal(t, http.StatusOK, w.Code, "body: %s", w.Body.String())
	require.Equal(t, "application/json", w.Header().Get("Content-Type"))
	var review admissionv1.AdmissionReview
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &review))
	require.Equal(t, "admission.k8s.io/v1", review.APIVersion)
	require.Equal(t, "AdmissionReview", review.Kind)
	require.NotNil(t, review.Response)
	require.Equal(t, types.UID(requestUID), review.Response.UID)
	return review.Response
}

// failingReader is a cluster whose node list fails.
type failingReader struct{ dataplane.Reader }

var errClusterDown = errors.New("longhorn API unavailable")

func (failingReader) Nodes(context.Context) ([]dataplane.Node, error) { return nil, errClusterDown }

// mgr is a stored manager in state st.
func mgr(namespace, name string, st v1beta2.UpgradeState, uid types.UID) *v1beta2.DataEngineUpgradeManager {
	m := manager("v2")
	m.Namespace, m.Name, m.UID = namespace, name, uid
	m.Status.State = st
	return m
}

// newManagerStore is an informer store holding ms.
func newManagerStore(t testing.TB, ms ...*v1beta2.DataEngineUpgradeManager) cache.Store {
	t.Helper()
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	for _, m := range ms {
		require.NoError(t, store.Add(m))
	}
	return store
}
