package longhorn_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/longhorn"
)

// TestFieldMissingFromLonghornIsReported: an apiserver with released
// Longhorn's schema prunes the design's fields on write. The adapter must
// say so, not loop on a write that never sticks. The fake client stands in
// for that apiserver: its patches change nothing.
func TestFieldMissingFromLonghornIsReported(t *testing.T) {
	const ns = "longhorn-system"
	obj := func(gvr schema.GroupVersionResource, kind, name string, spec map[string]any) runtime.Object {
		u := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": name, "namespace": ns}, "spec": spec}}
		u.SetAPIVersion(gvr.GroupVersion().String())
		u.SetKind(kind)
		return u
	}
	lists := map[schema.GroupVersionResource]string{
		longhorn.NodesResource: "NodeList", longhorn.VolumesResource: "VolumeList", longhorn.EnginesResource: "EngineList",
		longhorn.ReplicasResource: "ReplicaList", longhorn.InstanceManagersResource: "InstanceManagerList",
		longhorn.SettingsResource: "SettingList", longhorn.KubeNodesResource: "NodeList",
	}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), lists,
		obj(longhorn.NodesResource, longhorn.KindNode, "n1", map[string]any{"name": "n1"}),
		obj(longhorn.NodesResource, longhorn.KindNode, "n2", map[string]any{"name": "n2"}),
		obj(longhorn.VolumesResource, longhorn.KindVolume, "pvc-1", map[string]any{"dataEngine": "v2", "nodeID": "n1"}),
	)
	unchanged := func(a k8stesting.Action) (bool, runtime.Object, error) {
		p := a.(k8stesting.PatchAction)
		o, err := dyn.Tracker().Get(p.GetResource(), p.GetNamespace(), p.GetName())
		return true, o, err
	}
	dyn.PrependReactor("patch", "nodes", unchanged)
	dyn.PrependReactor("patch", "volumes", unchanged)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	plane, err := longhorn.New(ctx, dyn, longhorn.Options{Namespace: ns, WriteSyncTimeout: 50 * time.Millisecond})
	require.NoError(t, err)

	err = plane.SetNodeUpgradeRequested(ctx, "n1", true)
	assert.ErrorIs(t, err, longhorn.ErrFieldUnsupported)
	assert.ErrorIs(t, err, dataplane.ErrRefused, "retrying cannot help")
	assert.ErrorContains(t, err, "spec.dataEngineUpgradeRequested")
	assert.ErrorContains(t, err, `"n1"`)
	assert.NoError(t, plane.SetNodeUpgradeRequested(ctx, "n1", false), "clearing an absent flag is a no-op")

	err = plane.SetTargetNode(ctx, "pvc-1", "n2")
	assert.ErrorIs(t, err, longhorn.ErrFieldUnsupported)
	assert.ErrorContains(t, err, "spec.targetNodeID")
	assert.NoError(t, plane.SetTargetNode(ctx, "pvc-1", ""))

	v, err := plane.Volume(ctx, "pvc-1")
	require.NoError(t, err)
	assert.Equal(t, "n1", v.TargetNode, "no currentTargetNodeID: the target is on the attached node")
}
