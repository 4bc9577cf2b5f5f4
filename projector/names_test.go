package projector_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/switchback-dev/switchback/api/v1beta2"
	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/projector"
	"github.com/switchback-dev/switchback/sim"
	"github.com/switchback-dev/switchback/test/harness/enginetest"
)

// TestFormerNamesAreAdoptedAndOthersLeftAlone: an upgrade in flight whose
// NodeDataEngineUpgrades were created under the former "<manager>-<node>"
// names keeps them (adopted, not duplicated), and an object under one of
// the new names that is another manager's or node's is never deleted.
func TestFormerNamesAreAdoptedAndOthersLeftAlone(t *testing.T) {
	h := newHarness(t, threeNodes(t, sim.Config{Profile: dataplane.ProfileInPlace}), enginetest.Options{StallAfter: 10 * time.Second})
	ref := h.createManager("adopt")
	yes := true
	former := func(node string) *v1beta2.NodeDataEngineUpgrade {
		return &v1beta2.NodeDataEngineUpgrade{
			ObjectMeta: metav1.ObjectMeta{Name: ref.Name + "-" + node, Namespace: ref.Namespace,
				Labels: map[string]string{v1beta2.LabelDataEngineUpgradeManager: ref.Name, v1beta2.LabelNode: node},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: v1beta2.SchemeGroupVersion.String(), Kind: "DataEngineUpgradeManager",
					Name: ref.Name, UID: types.UID(ref.UID), Controller: &yes, BlockOwnerDeletion: &yes}}},
			Spec: v1beta2.NodeDataEngineUpgradeSpec{NodeID: node, DataEngine: v1beta2.DataEngineTypeV2, InstanceManagerImage: sim.NewIMImage, DataEngineUpgradeManager: ref.Name},
		}
	}
	for _, n := range []string{"n1", "n2"} {
		_, err := h.kc.NodeUpgrades(h.ns).Create(h.ctx, former(n))
		require.NoError(t, err)
	}
	// Under n3's new name: an object of another manager (it cannot be made
	// by a collision of names any more; it stands for any stranger).
	stranger := former("n3")
	stranger.Name = projector.NodeUpgradeName(ref.Name, "n3")
	stranger.Spec.DataEngineUpgradeManager, stranger.Labels[v1beta2.LabelDataEngineUpgradeManager] = "someone-else", "someone-else"
	stranger.OwnerReferences = nil
	_, err := h.kc.NodeUpgrades(h.ns).Create(h.ctx, stranger)
	require.NoError(t, err)

	h.startProjector(nil)
	h.e.Request(ref, "n1", "n2", "n3")
	obj := h.waitCaughtUp(ref, 30*time.Second)
	require.Equal(t, v1beta2.UpgradeStateCompleted, obj.Status.State)

	nodes := eventually(t, 30*time.Second, "both adopted objects completed", func() ([]v1beta2.NodeDataEngineUpgrade, error) {
		return h.nodeUpgrades(ref.Name), nil
	}, func(items []v1beta2.NodeDataEngineUpgrade) bool {
		done := 0
		for _, o := range items {
			if o.Status.State == v1beta2.NodeUpgradeStateCompleted {
				done++
			}
		}
		return done == 2 // n3's is the stranger's name: not written
	})
	var names []string
	for _, o := range nodes {
		names = append(names, o.Name)
	}
	assert.ElementsMatch(t, []string{"adopt-n1", "adopt-n2"}, names, "the former objects, no duplicate under the new names")
	got, err := h.kc.NodeUpgrades(h.ns).Get(h.ctx, stranger.Name)
	require.NoError(t, err, "the stranger is left alone")
	assert.Equal(t, "someone-else", got.Spec.DataEngineUpgradeManager)
	for _, n := range []string{"n1", "n2"} {
		o, err := projector.GetNodeUpgrade(h.ctx, h.kc.NodeUpgrades(h.ns), ref, n)
		require.NoError(t, err)
		assert.Equal(t, "adopt-"+n, o.Name, "replay --verify finds the adopted object")
	}
	evs, err := h.k8sEvents()
	require.NoError(t, err)
	regarding := map[string]bool{}
	for _, e := range evs {
		if e.Regarding.Kind == "NodeDataEngineUpgrade" {
			regarding[e.Regarding.Name] = true
		}
	}
	assert.True(t, regarding["adopt-n1"], "Events regard the adopted object: %v", regarding)
	rejected := false
	for _, e := range evs {
		rejected = rejected || e.Reason == projector.ReasonStatusRejected && strings.Contains(e.Note, stranger.Name) && strings.Contains(e.Note, "not ours")
	}
	assert.True(t, rejected, "the refusal to touch the stranger is reported")
}
