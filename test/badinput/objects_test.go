package badinput_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/switchback-dev/switchback/api/v1beta2"
	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/projector"
	"github.com/switchback-dev/switchback/sim"
	"github.com/switchback-dev/switchback/test/harness/enginetest"
	"github.com/switchback-dev/switchback/topology"
)

// TestNodeUpgradeDeletedByHand: a user deletes a NodeDataEngineUpgrade.
// The history is the truth, so nothing is lost: the projector creates the
// object again, with its whole status, at the node's next event; once the
// node has finished there is no next event, and the manager's status keeps
// the node's outcome.
func TestNodeUpgradeDeletedByHand(t *testing.T) {
	w, ref := stalledUpgrade(t, "hand-deleted")
	name := projector.NodeUpgradeName(ref.Name, "n1")
	get := func() (*v1beta2.NodeDataEngineUpgrade, error) { return w.kc.NodeUpgrades(w.ns).Get(w.ctx, name) }

	t.Run("in flight", func(t *testing.T) {
		c := newCase(t, "objects: NodeDataEngineUpgrade of the node in flight deleted by hand",
			"recreated with its full status at the node's next event; manager status shows the node meanwhile")
		old := waitFor(t, 20*time.Second, "n1's object shows the stall", get, func(o *v1beta2.NodeDataEngineUpgrade) bool {
			return strings.Contains(o.Status.Message, "stalled") || meta.IsStatusConditionTrue(o.Status.Conditions, v1beta2.ConditionStalled)
		})
		require.NoError(t, w.kc.NodeUpgrades(w.ns).Delete(w.ctx, name, metav1.DeleteOptions{}))
		mgr, err := w.kc.Managers(w.ns).Get(w.ctx, ref.Name)
		require.NoError(t, err)
		assert.Equal(t, v1beta2.NodeUpgradeStateSwitchingOver, mgr.Status.UpgradeNodes["n1"].State, "the manager still shows the node")
		require.NoError(t, w.sim.HealTargetMoveFailure("vol-0"))
		again := waitFor(t, 20*time.Second, "n1's object recreated with a status", get, func(o *v1beta2.NodeDataEngineUpgrade) bool {
			return o.UID != old.UID && o.Status.State != ""
		})
		w.finish(ref, 30*time.Second)
		want, err := projector.Replay(w.ctx, w.e.Store, ref)
		require.NoError(t, err)
		final := waitFor(t, 20*time.Second, "n1's object completed", get, func(o *v1beta2.NodeDataEngineUpgrade) bool {
			return o.Status.State == v1beta2.NodeUpgradeStateCompleted
		})
		assert.Equal(t, want.NodeUpgrades["n1"].Volumes, final.Status.Volumes, "the recreated object has the whole volume history")
		assert.Equal(t, want.NodeUpgrades["n1"].StreamSequence, final.Status.StreamSequence)
		c.Got("recreated (new uid) at the next event, state %s; final %s with %d volume(s)", again.Status.State, final.Status.State, len(final.Status.Volumes))
	})

	t.Run("finished", func(t *testing.T) {
		c := newCase(t, "objects: NodeDataEngineUpgrade of a finished node deleted by hand",
			"not recreated (no further event); the manager's status keeps the node's outcome; replay has it")
		w.finish(ref, 30*time.Second)
		require.NoError(t, w.kc.NodeUpgrades(w.ns).Delete(w.ctx, projector.NodeUpgradeName(ref.Name, "n2"), metav1.DeleteOptions{}))
		_, err := w.kc.NodeUpgrades(w.ns).Get(w.ctx, projector.NodeUpgradeName(ref.Name, "n2"))
		require.True(t, isNotFound(err))
		mgr, err := w.kc.Managers(w.ns).Get(w.ctx, ref.Name)
		require.NoError(t, err)
		assert.Equal(t, v1beta2.NodeUpgradeStateCompleted, mgr.Status.UpgradeNodes["n2"].State)
		want, err := projector.Replay(w.ctx, w.e.Store, ref)
		require.NoError(t, err)
		assert.Equal(t, v1beta2.NodeUpgradeStateCompleted, want.NodeUpgrades["n2"].State, "replay rebuilds it")
		w.assertStatusIsReplay(ref)
		c.Got("stays deleted; manager status.upgradeNodes[n2]=%s; replay has n2 %s", mgr.Status.UpgradeNodes["n2"].State, want.NodeUpgrades["n2"].State)
	})
}

// TestStatusForgedBySubresource: somebody with access to the status
// subresource writes the manager's status by hand, claiming a far stream
// sequence. The next events must overwrite it: the status is the fold of
// the history, not whatever was written last.
func TestStatusForgedBySubresource(t *testing.T) {
	c := newCase(t, "objects: manager status forged via the status subresource",
		"overwritten by the projector at the next event; status = fold of history")
	w, ref := stalledUpgrade(t, "forged")
	waitFor(t, 20*time.Second, "status shows n1 upgrading", w.getManager(ref.Name), func(o *v1beta2.DataEngineUpgradeManager) bool {
		return o.Status.UpgradingNode == "n1"
	})
	out, errOut, err := w.env.Kubectl(w.ctx, nil, "patch", "-n", w.ns, "lhum/"+ref.Name, "--subresource=status", "--type=merge",
		"-p", `{"status":{"state":"error","message":"forged by hand","streamSequence":1099511627776}}`)
	require.NoError(t, err, errOut)
	t.Logf("kubectl: %s", strings.TrimSpace(out))
	require.NoError(t, w.sim.HealTargetMoveFailure("vol-0"))
	st := w.e.WaitManager(ref, 30*time.Second, "a terminal state", terminal)
	require.Equal(t, events.ManagerCompleted, st.State)
	// Wait until the projector has handled the upgrade's last event, then
	// look at what it left.
	last := w.lastSeq(ref)
	waitFor(t, 20*time.Second, "the projector handled the last event", func() (uint64, error) { return w.proj.Metrics().LastSequence, nil },
		func(seq uint64) bool { return seq >= last })
	obj, err := w.kc.Managers(w.ns).Get(w.ctx, ref.Name)
	require.NoError(t, err)
	if obj.Status.State != v1beta2.UpgradeStateCompleted {
		c.Got("upgrade completed; after the projector handled its last event the status still says %s %q (streamSequence %d)",
			obj.Status.State, obj.Status.Message, obj.Status.StreamSequence)
		c.Bug("the projector treats status.streamSequence as its high-water mark and skips every event at or below it, so a " +
			"hand-written streamSequence beyond the stream's end freezes the status forever. Fix (projector write/writeNode): " +
			"treat a streamSequence above the stream's last sequence as foreign and rewrite the status from the fold (and " +
			"report a StatusRejected-style Warning); RBAC should keep .../status writes to the controller")
	}
	w.assertStatusIsReplay(ref)
	c.Got("overwritten: %s", obj.Status.State)
}

// TestDottedNodeNames: node names with dots are valid Kubernetes names but
// not valid NATS subject tokens; they are encoded, and a whole upgrade of
// such nodes works, down to its NodeDataEngineUpgrade objects.
func TestDottedNodeNames(t *testing.T) {
	c := newCase(t, "CR+engine: dotted node names (node-1.example.com)",
		"accepted; subjects use node-1_example_com; the upgrade completes")
	nodes := []string{"node-1.example.com", "node-2.example.com", "node-3.example.com"}
	s := sim.New(sim.Config{Profile: dataplane.ProfileInPlace})
	for _, n := range nodes {
		require.NoError(t, s.AddNode(n))
	}
	for i := range nodes {
		require.NoError(t, s.AddVolume(fmt.Sprintf("vol-%d", i), sim.EngineV2, []string{nodes[i], nodes[(i+1)%3]}, nodes[i]))
	}
	w := newWorld(t, s, enginetest.Options{})
	out, err := w.apply(w.ctx, manifest("dotted", "  dataEngine: v2\n  nodes: ["+strings.Join(nodes, ", ")+"]\n", ""))
	require.NoError(t, err, out)
	obj, err := w.kc.Managers(w.ns).Get(w.ctx, "dotted")
	require.NoError(t, err)
	ref := events.ManagerRef{Namespace: w.ns, Name: "dotted", UID: string(obj.UID)}
	w.startProjector()
	w.e.Request(ref, nodes...)
	st := w.finish(ref, 30*time.Second)
	require.Equal(t, events.ManagerCompleted, st.State, st.Message)
	w.onceEach(ref)
	subject := events.NodeAggregate(ref, nodes[0]).Subject()
	assert.True(t, strings.HasSuffix(subject, ".node.node-1_example_com"), subject)
	assert.Equal(t, "sb.cmd.node.node-1_example_com", topology.CommandSubject(nodes[0]))
	for _, n := range nodes {
		nu, err := w.kc.NodeUpgrades(w.ns).Get(w.ctx, projector.NodeUpgradeName("dotted", n))
		require.NoError(t, err)
		assert.Equal(t, n, nu.Spec.NodeID)
		assert.Equal(t, v1beta2.NodeUpgradeStateCompleted, nu.Status.State)
	}
	w.assertStatusIsReplay(ref)
	c.Got("accepted; subject …%s; upgrade %s", subject[strings.LastIndex(subject, ".node."):], st.State)
}
