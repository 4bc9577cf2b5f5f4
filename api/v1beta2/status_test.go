package v1beta2_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/switchback-dev/switchback/api/v1beta2"
)

func newDEUM(name string, nodes ...string) *v1beta2.DataEngineUpgradeManager {
	return &v1beta2.DataEngineUpgradeManager{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v1beta2.DataEngineUpgradeManagerSpec{DataEngine: v1beta2.DataEngineTypeV2, Nodes: nodes},
	}
}

func newNDEU(name, node string) *v1beta2.NodeDataEngineUpgrade {
	return &v1beta2.NodeDataEngineUpgrade{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1beta2.NodeDataEngineUpgradeSpec{
			NodeID:                   node,
			DataEngine:               v1beta2.DataEngineTypeV2,
			InstanceManagerImage:     imageV1,
			DataEngineUpgradeManager: "m",
		},
	}
}

// TestStatusOnlyThroughSubresource checks the split the projector relies on:
// users own the object, the controller owns /status, and neither write can
// change the other's part.
func TestStatusOnlyThroughSubresource(t *testing.T) {
	f := newFixture(t)

	t.Run("create drops status", func(t *testing.T) {
		in := newDEUM("create-with-status", "node-1")
		in.Status.State = v1beta2.UpgradeStateCompleted
		in.Status.Message = "forged"
		var out v1beta2.DataEngineUpgradeManager
		require.NoError(t, f.create(in, &out))
		assert.Empty(t, out.Status.State)
		assert.Empty(t, out.Status.Message)
	})

	t.Run("update of the object leaves status alone", func(t *testing.T) {
		var created, updated, got v1beta2.DataEngineUpgradeManager
		require.NoError(t, f.create(newDEUM("update-main", "node-1"), &created))
		in := created.DeepCopy()
		in.Labels = map[string]string{"team": "storage"}
		in.Status.State = v1beta2.UpgradeStateCompleted
		in.Status.UpgradingNode = "node-1"
		require.NoError(t, f.update(in, &updated))
		require.NoError(t, f.get("update-main", &got))
		assert.Equal(t, "storage", got.Labels["team"], "the metadata change is kept")
		assert.Empty(t, got.Status.State, "status must not change through the main resource")
		assert.Empty(t, got.Status.UpgradingNode)
	})

	t.Run("status update changes status only", func(t *testing.T) {
		var created, got v1beta2.NodeDataEngineUpgrade
		require.NoError(t, f.create(newNDEU("status-only", "node-1"), &created))
		in := created.DeepCopy()
		in.Status.State = v1beta2.NodeUpgradeStateSwitchingOver
		in.Status.Volumes = map[string]v1beta2.VolumeUpgradeStatus{
			"vol-1": {State: v1beta2.VolumeUpgradeStateSwitchedOver},
			"vol-2": {State: v1beta2.VolumeUpgradeStateSwitchingOver, Message: "waiting for the target on node-2"},
		}
		in.Status.VolumeCount = 2
		// These spec and metadata changes are ignored by /status; they would
		// otherwise be refused as immutable.
		in.Spec.InstanceManagerImage = imageV2
		in.Labels = map[string]string{"ignored": "yes"}
		var updated v1beta2.NodeDataEngineUpgrade
		require.NoError(t, f.updateStatus(in, &updated))
		require.NoError(t, f.get("status-only", &got))
		assert.Equal(t, v1beta2.NodeUpgradeStateSwitchingOver, got.Status.State)
		assert.Equal(t, in.Status.Volumes, got.Status.Volumes)
		assert.Equal(t, int32(2), got.Status.VolumeCount)
		assert.Equal(t, imageV1, got.Spec.InstanceManagerImage, "spec must not change through /status")
		assert.NotContains(t, got.Labels, "ignored")
		assert.Equal(t, created.Generation, got.Generation, "a status write does not bump the generation")
	})

	t.Run("status is validated", func(t *testing.T) {
		tests := []struct {
			name  string
			patch string
			want  []string
		}{
			{"unknown manager state", `{"status":{"state":"paused"}}`, []string{`status.state: Unsupported value: "paused"`}},
			{"unknown node state", `{"status":{"upgradeNodes":{"node-1":{"state":"halfway"}}}}`, []string{`status.upgradeNodes.node-1.state: Unsupported value: "halfway"`}},
			{"negative count", `{"status":{"completedNodes":-1}}`, []string{"status.completedNodes: Invalid value: -1"}},
			{"condition reason not CamelCase", `{"status":{"conditions":[{"type":"Ready","status":"False","reason":"not a reason","message":"","lastTransitionTime":"2026-01-01T00:00:00Z"}]}}`, []string{"status.conditions[0].reason: Invalid value"}},
			{"condition type twice", `{"status":{"conditions":[` +
				`{"type":"Ready","status":"False","reason":"Pending","message":"","lastTransitionTime":"2026-01-01T00:00:00Z"},` +
				`{"type":"Ready","status":"True","reason":"Completed","message":"","lastTransitionTime":"2026-01-01T00:00:00Z"}]}}`,
				[]string{"status.conditions[1]: Duplicate value"}},
		}
		var created v1beta2.DataEngineUpgradeManager
		require.NoError(t, f.create(newDEUM("status-validated"), &created))
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				_, stderr, err := f.kubectl("", "-n", f.ns, "patch", "lhum", "status-validated",
					"--subresource=status", "--type=merge", "-p", tt.patch)
				require.Error(t, err)
				t.Logf("kubectl: %s", strings.TrimSpace(stderr))
				for _, w := range tt.want {
					assert.Contains(t, stderr, w)
				}
			})
		}
	})
}

// TestConditionsRoundTrip sets conditions with meta.SetStatusCondition, as
// the projector does, and checks they come back from the apiserver intact,
// observedGeneration included, and that SetStatusCondition's transition-time
// rule survives a round trip.
func TestConditionsRoundTrip(t *testing.T) {
	f := newFixture(t)
	var obj v1beta2.DataEngineUpgradeManager
	require.NoError(t, f.create(newDEUM("conditions", "node-1", "node-2"), &obj))
	require.Equal(t, int64(1), obj.Generation)

	set := []metav1.Condition{
		{Type: v1beta2.ConditionNodesKnown, Status: metav1.ConditionTrue, Reason: v1beta2.ReasonChecksPassed, Message: "node-1, node-2 run the v2 engine"},
		{Type: v1beta2.ConditionDefaultImageOnAllNodesReady, Status: metav1.ConditionFalse, Reason: v1beta2.ReasonImageNotReady, Message: "image not pulled on node-2"},
		{Type: v1beta2.ConditionProgressing, Status: metav1.ConditionTrue, Reason: v1beta2.ReasonUpgrading, Message: "upgrading node-1"},
	}
	for _, c := range set {
		c.ObservedGeneration = obj.Generation
		meta.SetStatusCondition(&obj.Status.Conditions, c)
	}
	obj.Status.ObservedGeneration = obj.Generation
	obj.Status.State = v1beta2.UpgradeStateUpgrading
	// Above 2^53: a float64 anywhere on the way would round it.
	obj.Status.StreamSequence = 1<<60 + 7
	obj.Status.UpgradeNodes = map[string]v1beta2.UpgradeNodeStatus{
		"node-1": {State: v1beta2.NodeUpgradeStateSwitchingOver},
		"node-2": {State: v1beta2.NodeUpgradeStatePending},
	}

	var got v1beta2.DataEngineUpgradeManager
	require.NoError(t, f.updateStatus(&obj, &got))
	require.NoError(t, f.get("conditions", &got))

	assert.Equal(t, obj.Generation, got.Status.ObservedGeneration)
	assert.Equal(t, uint64(1<<60+7), got.Status.StreamSequence)
	assert.Equal(t, obj.Status.UpgradeNodes, got.Status.UpgradeNodes)
	require.Len(t, got.Status.Conditions, len(set))
	for _, want := range set {
		c := meta.FindStatusCondition(got.Status.Conditions, want.Type)
		require.NotNil(t, c, want.Type)
		assert.Equal(t, want.Status, c.Status, want.Type)
		assert.Equal(t, want.Reason, c.Reason, want.Type)
		assert.Equal(t, want.Message, c.Message, want.Type)
		assert.Equal(t, obj.Generation, c.ObservedGeneration, want.Type)
		sent := meta.FindStatusCondition(obj.Status.Conditions, want.Type)
		// metav1.Time travels as RFC 3339 with whole seconds.
		assert.True(t, sent.LastTransitionTime.Time.Truncate(time.Second).Equal(c.LastTransitionTime.Time), want.Type)
	}

	// Same status, new message: the transition time must stay, so the
	// projector's re-folds do not pretend a change.
	firstTransition := meta.FindStatusCondition(got.Status.Conditions, v1beta2.ConditionDefaultImageOnAllNodesReady).LastTransitionTime
	next := got.DeepCopy()
	meta.SetStatusCondition(&next.Status.Conditions, metav1.Condition{
		Type: v1beta2.ConditionDefaultImageOnAllNodesReady, Status: metav1.ConditionFalse,
		Reason: v1beta2.ReasonImageNotReady, Message: "image still pulling on node-2", ObservedGeneration: next.Generation,
	})
	var again v1beta2.DataEngineUpgradeManager
	require.NoError(t, f.updateStatus(next, &again))
	c := meta.FindStatusCondition(again.Status.Conditions, v1beta2.ConditionDefaultImageOnAllNodesReady)
	require.NotNil(t, c)
	assert.Equal(t, "image still pulling on node-2", c.Message)
	assert.True(t, firstTransition.Equal(&c.LastTransitionTime), "unchanged status keeps its transition time")

	// A flip to True is a transition: SetStatusCondition stamps a new time
	// that the server keeps.
	flip := again.DeepCopy()
	flipTime := metav1.NewTime(firstTransition.Add(90 * time.Second))
	meta.SetStatusCondition(&flip.Status.Conditions, metav1.Condition{
		Type: v1beta2.ConditionDefaultImageOnAllNodesReady, Status: metav1.ConditionTrue,
		Reason: v1beta2.ReasonChecksPassed, ObservedGeneration: flip.Generation, LastTransitionTime: flipTime,
	})
	require.NoError(t, f.updateStatus(flip, &again))
	c = meta.FindStatusCondition(again.Status.Conditions, v1beta2.ConditionDefaultImageOnAllNodesReady)
	require.NotNil(t, c)
	assert.Equal(t, metav1.ConditionTrue, c.Status)
	assert.True(t, flipTime.Equal(&c.LastTransitionTime), "want %v, got %v", flipTime, c.LastTransitionTime)
	assert.True(t, meta.IsStatusConditionTrue(again.Status.Conditions, v1beta2.ConditionNodesKnown))
}
