package projector_test

import (
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/projector"
)

// assertObjectsMatchLive checks that the objects ReplayObjects renders from
// the stream (what `switchback replay -o json` prints) are the live ones:
// the same names, labels, owner, spec and status, but for what only the
// apiserver sets.
func (h *harness) assertObjectsMatchLive(ref events.ManagerRef) {
	h.t.Helper()
	objs, err := projector.ReplayObjects(h.ctx, h.e.Store, ref, 0)
	require.NoError(h.t, err)
	live, err := h.kc.Managers(h.ns).Get(h.ctx, ref.Name)
	require.NoError(h.t, err)
	assert.Equal(h.t, "DataEngineUpgradeManager", objs.Manager.Kind)
	assert.Equal(h.t, live.UID, objs.Manager.UID)
	assert.Equal(h.t, live.Spec, objs.Manager.Spec)
	wm := objs.Manager.Status
	wm.ObservedGeneration = live.Generation
	wm.Conditions = withGeneration(wm.Conditions, live.Generation)
	assert.JSONEq(h.t, toJSON(live.Status), toJSON(wm))

	nodes := h.nodeUpgrades(ref.Name)
	require.Len(h.t, objs.NodeUpgrades, len(nodes))
	for _, want := range objs.NodeUpgrades {
		got, err := h.kc.NodeUpgrades(h.ns).Get(h.ctx, want.Name)
		if !assert.NoError(h.t, err, "node upgrade %s", want.Name) {
			continue
		}
		assert.Equal(h.t, "NodeDataEngineUpgrade", want.Kind)
		assert.Equal(h.t, got.Labels, want.Labels)
		assert.Equal(h.t, got.OwnerReferences, want.OwnerReferences)
		assert.Equal(h.t, got.Spec, want.Spec)
		ws := want.Status
		ws.ObservedGeneration = got.Generation
		ws.Conditions = withGeneration(ws.Conditions, got.Generation)
		assert.JSONEq(h.t, toJSON(got.Status), toJSON(ws), "node upgrade %s", want.Name)
	}
}
