package orchestrator_test

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/aggregate/nodeupgrade"
	"github.com/switchback-dev/switchback/api/v1beta2"
	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/sim"
	"github.com/switchback-dev/switchback/test/harness/enginetest"
	"github.com/switchback-dev/switchback/workloadmove"
)

// TestMoveWorkloadsMovesEachWorkloadOnce: on Longhorn v1.12 with
// move-workloads, s1 (storage only) is upgraded first and then w1 and w2,
// whose pods hold their initiators. s1 is busier than w2 (pods that use no
// v2 volume), so the scheduler's spreading alone would send w1's pod to w2,
// to be moved again when w2 comes. The marks of the nodes still to come
// rank w2 lower: every workload moves once, the marks are in place before
// the first eviction and all gone at the end. An RWX volume served from w2
// has its share-manager restarted once, on an upgraded node, and its NFS
// clients (on w1 and w2) are not moved.
func TestMoveWorkloadsMovesEachWorkloadOnce(t *testing.T) {
	s := sim.New(sim.Config{Profile: dataplane.ProfileV112})
	for _, n := range []string{"s1", "w1", "w2"} {
		require.NoError(t, s.AddNode(n))
	}
	for _, v := range []sim.VolumeSpec{
		{Name: "a", AttachedTo: "w1", ReplicasOn: []string{"s1", "w1"}},
		{Name: "b", AttachedTo: "w2", ReplicasOn: []string{"s1", "w2"}},
		{Name: "c", AttachedTo: "w2", ReplicasOn: []string{"w1", "w2"}},
	} {
		require.NoError(t, s.AddVolumeSpec(v))
	}
	// An RWX volume served from w2, with an NFS client on w2 and one on w1.
	require.NoError(t, s.AddVolumeSpec(sim.VolumeSpec{Name: "shared", ReplicasOn: []string{"s1", "w2"}, ShareManager: true}))
	for _, c := range []struct{ name, node string }{{"shared-0", "w2"}, {"shared-1", "w1"}} {
		require.NoError(t, s.AddPod(sim.PodSpec{Namespace: "app", Name: c.name, Node: c.node, Claims: []string{"shared"}}))
	}
	require.NoError(t, s.AddPods())
	for i := range 4 {
		require.NoError(t, s.AddPod(sim.PodSpec{Namespace: "batch", Name: fmt.Sprintf("job-%d", i), Node: "s1"}))
	}
	e := enginetest.Start(t, s, enginetest.Options{})
	m := ref("move-once")
	e.RequestSpec(m, v1beta2.DataEngineUpgradeManagerSpec{DataEngine: v1beta2.DataEngineTypeV2, InitiatorPolicy: v1beta2.InitiatorPolicyMoveWorkloads})
	st := e.Completes(m)
	require.Equal(t, []string{"s1", "w1", "w2"}, st.Plan)

	assert.Equal(t, map[string]int{"app/a-0": 1, "app/b-0": 1, "app/c-0": 1, sim.ShareManagerNamespace + "/share-manager-shared": 1}, s.Restarts(),
		"each workload moved once, the share-manager restarted once, its NFS clients left alone")
	shared, err := s.Volume(e.Context(), "shared")
	require.NoError(t, err)
	assert.Contains(t, []string{"s1", "w1"}, shared.AttachedNode, "the RWX volume followed its share-manager to an upgraded node")
	for _, p := range s.Pods() {
		if p.Namespace == "app" && !strings.HasPrefix(p.Name, "shared-") {
			assert.Contains(t, []string{"s1", "w1"}, p.Node, "pod %s landed on a node already upgraded", p)
		}
	}
	calls, _ := s.ActionLog()
	firstEviction := slices.IndexFunc(calls, func(c sim.ActionRecord) bool { return c.Action == string(dataplane.CallEvictPod) })
	require.Positive(t, firstEviction)
	marked := map[string]bool{}
	for _, c := range calls[:firstEviction] {
		if c.Action == "MarkUpgradePending" && !c.NoOp {
			marked[c.Object] = c.Arg != ""
		}
	}
	assert.Equal(t, map[string]bool{"s1": false, "w1": true, "w2": true}, marked,
		"every node marked, and s1 unmarked once upgraded, before the first eviction")
	for _, n := range []string{"s1", "w1", "w2"} {
		nd, err := s.Node(e.Context(), n)
		require.NoError(t, err)
		assert.Empty(t, nd.UpgradePendingMark, "node %s left marked", n)
		assert.False(t, nd.WorkloadTainted, "node %s left tainted", n)
	}
	assert.Zero(t, s.IOStats().Failed, "no I/O failed")
}

// TestMoveWorkloadsOnEveryNode: every node of a v1.12 cluster runs
// workloads (ReplicaSet pods, a StatefulSet's, the NFS clients of an RWX
// volume) and one Deployment's template pins its pod to n3: with
// move-workloads nobody is in the loop but to remove the pinned workload.
// n3 is held, before anything is touched, naming its pod; once the pod is
// gone it goes on by itself and the upgrade completes. No I/O fails; the
// pods of the first workload node can only land on nodes still to come and
// move at most twice, every other workload at most once; no taint or mark
// is left and every node's replica scheduling is back.
func TestMoveWorkloadsOnEveryNode(t *testing.T) {
	s := sim.New(sim.Config{Profile: dataplane.ProfileV112})
	nodes := []string{"n1", "n2", "n3"}
	for _, n := range nodes {
		require.NoError(t, s.AddNode(n))
	}
	for i, v := range []string{"web", "db", "cache", "agent"} {
		on := nodes[i%3]
		require.NoError(t, s.AddVolumeSpec(sim.VolumeSpec{Name: v, ReplicasOn: []string{nodes[(i+1)%3], nodes[(i+2)%3]}}))
		if v == "agent" {
			on = "n3"
		}
		spec := sim.PodSpec{Namespace: "app", Name: v + "-0", Node: on, Claims: []string{v}}
		switch v {
		case "db":
			spec.Controller = "StatefulSet"
		case "agent":
			spec.PinnedBy = "its ReplicaSet's pod template sets nodeName n3"
		}
		require.NoError(t, s.AddPod(spec))
	}
	require.NoError(t, s.AddVolumeSpec(sim.VolumeSpec{Name: "shared", ReplicasOn: []string{"n1", "n2"}, ShareManager: true}))
	for i, n := range nodes {
		require.NoError(t, s.AddPod(sim.PodSpec{Namespace: "app", Name: fmt.Sprintf("shared-%d", i), Node: n, Claims: []string{"shared"}}))
	}
	initial := map[string]string{}
	for _, p := range s.Pods() {
		initial[p.String()] = p.Node
	}
	e := enginetest.Start(t, s, enginetest.Options{})
	m := ref("move-every-node")
	e.RequestSpec(m, v1beta2.DataEngineUpgradeManagerSpec{DataEngine: v1beta2.DataEngineTypeV2, InitiatorPolicy: v1beta2.InitiatorPolicyMoveWorkloads})
	held := e.WaitNode(m, "n3", 30*time.Second, "held by its pinned pod", func(n nodeupgrade.State) bool {
		return n.Stalled && n.StallReason == workloadmove.PinPodPinnedToNode
	})
	assert.Equal(t, events.NodeInitializing, held.State)
	assert.Contains(t, held.StallMessage, "app/agent-0")
	assert.Empty(t, held.Moved, "nothing moved off a pinned node")
	require.NoError(t, s.DeletePod("app/agent-0"))
	st := e.Completes(m)

	first := ""
	for _, n := range st.Plan {
		if slices.Contains(slices.Collect(maps.Values(initial)), n) {
			first = n
			break
		}
	}
	// A workload counts under its first pod's name; the share-manager,
	// not among them, moves once.
	for w, n := range s.Restarts() {
		if initial[w] == first {
			assert.LessOrEqual(t, n, 2, "workload %s of the first workload node %s", w, first)
		} else {
			assert.Equal(t, 1, n, "workload %s moved once", w)
		}
	}
	for i := range nodes {
		assert.NotContains(t, s.Restarts(), fmt.Sprintf("app/shared-%d", i), "an NFS client stays")
	}
	for _, n := range nodes {
		nd, err := s.Node(e.Context(), n)
		require.NoError(t, err)
		assert.Empty(t, nd.UpgradePendingMark, "node %s left marked", n)
		assert.False(t, nd.WorkloadTainted, "node %s left tainted", n)
		assert.True(t, nd.AllowScheduling, "node %s's replica scheduling restored", n)
	}
	assert.Zero(t, s.IOStats().Failed, "%s", s.IOStats())
	t.Logf("plan %v, restarts per workload: %v", st.Plan, s.Restarts())
}
