package v1beta2_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/switchback-dev/switchback/api/v1beta2"
	"github.com/switchback-dev/switchback/events"
)

func TestIsTerminal(t *testing.T) {
	tests := []struct {
		manager  v1beta2.UpgradeState
		terminal bool
	}{
		{v1beta2.UpgradeStatePending, false},
		{v1beta2.UpgradeStateInitializing, false},
		{v1beta2.UpgradeStateUpgrading, false},
		{v1beta2.UpgradeStateCompleted, true},
		{v1beta2.UpgradeStateError, true},
		{v1beta2.UpgradeStateCancelled, true},
	}
	for _, tt := range tests {
		// One definition of an active upgrade: the manager aggregate's
		// states, which the status spells the same.
		assert.Equal(t, tt.terminal, events.ManagerState(tt.manager).Terminal(), tt.manager)
	}
	for i, s := range v1beta2.NodeUpgradeStates {
		assert.Equal(t, i == len(v1beta2.NodeUpgradeStates)-1, s.IsTerminal(), s)
	}
	assert.True(t, v1beta2.NodeUpgradeStateError.IsTerminal())
	assert.True(t, v1beta2.NodeUpgradeStateCancelled.IsTerminal())
}

// TestServedEnumsMatchConstants reads the enums the apiserver enforces and
// compares them with the Go constants, so that a constant added without its
// marker (or the reverse) is caught.
func TestServedEnumsMatchConstants(t *testing.T) {
	f := newFixture(t)
	client, err := dynamic.NewForConfig(f.env.Config)
	require.NoError(t, err)
	crds := client.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})

	// enum returns the enum at path below the version's openAPIV3Schema.
	enum := func(crd string, path ...string) []string {
		t.Helper()
		u, err := crds.Get(f.ctx, crd, metav1.GetOptions{})
		require.NoError(t, err)
		versions, _, _ := unstructured.NestedSlice(u.Object, "spec", "versions")
		require.Len(t, versions, 1)
		schemaPath := append([]string{"schema", "openAPIV3Schema"}, path...)
		vals, found, err := unstructured.NestedSlice(versions[0].(map[string]any), append(schemaPath, "enum")...)
		require.NoError(t, err)
		require.True(t, found, "no enum at %v", path)
		out := make([]string, 0, len(vals))
		for _, v := range vals {
			out = append(out, v.(string))
		}
		return out
	}
	strs := func(vals ...any) []string {
		out := make([]string, 0, len(vals))
		for _, v := range vals {
			switch s := v.(type) {
			case v1beta2.UpgradeState:
				out = append(out, string(s))
			case v1beta2.NodeUpgradeState:
				out = append(out, string(s))
			case v1beta2.VolumeUpgradeState:
				out = append(out, string(s))
			}
		}
		return out
	}
	const deum, ndeu = "dataengineupgrademanagers.longhorn.io", "nodedataengineupgrades.longhorn.io"

	assert.ElementsMatch(t, strs(v1beta2.UpgradeStatePending, v1beta2.UpgradeStateInitializing, v1beta2.UpgradeStateUpgrading,
		v1beta2.UpgradeStateCompleted, v1beta2.UpgradeStateError, v1beta2.UpgradeStateCancelled),
		enum(deum, "properties", "status", "properties", "state"))

	nodeStates := []any{v1beta2.NodeUpgradeStateError, v1beta2.NodeUpgradeStateCancelled}
	for _, s := range v1beta2.NodeUpgradeStates {
		nodeStates = append(nodeStates, s)
	}
	assert.ElementsMatch(t, strs(nodeStates...), enum(ndeu, "properties", "status", "properties", "state"))

	assert.ElementsMatch(t, strs(v1beta2.VolumeUpgradeStatePending, v1beta2.VolumeUpgradeStateSwitchingOver,
		v1beta2.VolumeUpgradeStateSwitchedOver, v1beta2.VolumeUpgradeStateSwitchingBack, v1beta2.VolumeUpgradeStateSwitchedBack,
		v1beta2.VolumeUpgradeStateCompleted, v1beta2.VolumeUpgradeStateError),
		enum(ndeu, "properties", "status", "properties", "volumes", "additionalProperties", "properties", "state"))
}
