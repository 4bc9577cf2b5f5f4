package sim_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/sim"
)

// workloadCluster is three Ready v2 nodes, n2 already on the default
// image (the scheduler does not care), and two volumes the pods of n1 use;
// n3 runs a pod already, so a pod moved lands on n2 unless it is tainted.
func workloadCluster(t *testing.T) *sim.Sim {
	t.Helper()
	s := sim.New(sim.Config{Clock: sim.NewFakeClock(time.Time{})})
	require.NoError(t, s.AddNode("n1"))
	require.NoError(t, s.AddNodeSpec(sim.NodeSpec{Name: "n2", IMImage: sim.NewIMImage}))
	require.NoError(t, s.AddNode("n3"))
	for _, v := range []string{"web", "db", "cache"} {
		require.NoError(t, s.AddVolume(v, sim.EngineV2, []string{"n2", "n3"}, ""))
	}
	s.Settle()
	require.NoError(t, s.AddPod(sim.PodSpec{Namespace: "app", Name: "cache-0", Node: "n3", Claims: []string{"cache"}}))
	return s
}

func TestWorkloadsAndEvictions(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name       string
		controller string
		taintN2    bool
		markN2     bool
		tolerates  bool
		wantName   string
		wantNode   string
	}{
		{"a ReplicaSet's pod comes back under a new name on the least busy node", "", false, false, false, "web-3", "n2"},
		{"a StatefulSet's pod comes back under its name", "StatefulSet", false, false, false, "web-0", "n2"},
		{"a tainted node is passed over", "", true, false, false, "web-3", "n3"},
		{"a node marked still to come is ranked below a busier one", "", false, true, false, "web-3", "n3"},
		{"a pod that tolerates the taints ignores the mark", "", false, true, true, "web-3", "n2"},
		{"a pod nothing recreates is gone", sim.ControllerNone, false, false, false, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := workloadCluster(t)
			require.NoError(t, s.AddPod(sim.PodSpec{Namespace: "app", Name: "web-0", Node: "n1", Controller: tc.controller,
				Claims: []string{"web"}, ToleratesTaint: tc.tolerates}))
			if tc.taintN2 {
				require.NoError(t, s.TaintNode(ctx, "n2"))
			}
			if tc.markN2 {
				require.NoError(t, s.MarkUpgradePending(ctx, "n2", "uid"))
				n2, err := s.Node(ctx, "n2")
				require.NoError(t, err)
				assert.Equal(t, "uid", n2.UpgradePendingMark)
			}
			require.NoError(t, s.TaintNode(ctx, "n1"))
			w, err := s.Workloads(ctx, "n1")
			require.NoError(t, err)
			require.Len(t, w.Pods, 1)
			pod := w.Pods[0]
			before := len(s.Pods())
			assert.Equal(t, []dataplane.Claim{{ObjectRef: dataplane.ObjectRef{Namespace: "app", Name: "web"}, Volume: "web"}}, w.Claims)
			require.Len(t, w.Volumes, 1)
			assert.Equal(t, "n1", w.Volumes[0].AttachedNode, "the pod's volume is attached where it runs")
			assert.Equal(t, []dataplane.Ticket{{ID: "csi-web", Type: dataplane.AttacherCSI, Node: "n1"}}, w.Volumes[0].Tickets)
			n1, err := s.Node(ctx, "n1")
			require.NoError(t, err)
			assert.True(t, n1.WorkloadTainted)

			require.NoError(t, s.EvictPod(ctx, "app/web-0", "another-uid"), "a pod of another uid is a no-op")
			require.Len(t, s.Pods(), before)
			require.NoError(t, s.EvictPod(ctx, pod.String(), pod.UID))
			v, err := s.Volume(ctx, "web")
			require.NoError(t, err)
			var pods []dataplane.Pod
			for _, p := range s.Pods() {
				if p.Name != "cache-0" {
					pods = append(pods, p)
				}
			}
			if tc.wantName == "" {
				assert.Empty(t, pods)
				assert.False(t, v.Attached())
				return
			}
			require.Len(t, pods, 1)
			assert.Equal(t, tc.wantName, pods[0].Name)
			assert.Equal(t, tc.wantNode, pods[0].Node)
			assert.NotEqual(t, pod.UID, pods[0].UID)
			assert.Equal(t, tc.wantNode, v.AttachedNode, "the volume followed its pod")
			w, err = s.Workloads(ctx, "n1")
			require.NoError(t, err)
			assert.Empty(t, w.Pods)
			assert.Empty(t, w.Volumes)
		})
	}
}

func TestAddPodRefusesAVolumeAttachedElsewhere(t *testing.T) {
	s := workloadCluster(t)
	require.NoError(t, s.AddPod(sim.PodSpec{Name: "a", Node: "n1", Claims: []string{"web"}}))
	assert.ErrorIs(t, s.AddPod(sim.PodSpec{Name: "b", Node: "n3", Claims: []string{"web"}}), sim.ErrVolumeAttached)
	assert.Error(t, s.AddPod(sim.PodSpec{Name: "c", Node: "n1", Claims: []string{"missing"}}))
}

// TestShareManagerRestart: an RWX volume is attached where its first
// client starts, its share-manager pod runs there and holds the
// attachment's ticket, the other clients reach it over NFS; a restart of
// another uid is a no-op, one of its uid moves the volume with a new pod
// to a node the scheduler would pick, and no client moves.
func TestShareManagerRestart(t *testing.T) {
	ctx := context.Background()
	s := workloadCluster(t)
	require.NoError(t, s.AddVolumeSpec(sim.VolumeSpec{Name: "shared", ReplicasOn: []string{"n2", "n3"}, ShareManager: true}))
	require.NoError(t, s.AddPod(sim.PodSpec{Namespace: "app", Name: "nfs-0", Node: "n1", Claims: []string{"shared"}}))
	require.NoError(t, s.AddPod(sim.PodSpec{Namespace: "app", Name: "nfs-1", Node: "n3", Claims: []string{"shared"}}), "a second client elsewhere")
	w, err := s.Workloads(ctx, "n1")
	require.NoError(t, err)
	var sm *dataplane.Pod
	for i := range w.Pods {
		if w.Pods[i].ShareManagerOf == "shared" {
			sm = &w.Pods[i]
		}
	}
	require.NotNil(t, sm, "the share-manager pod runs where the volume is attached")
	assert.Equal(t, "n1", sm.Node)
	require.Len(t, w.Volumes, 1)
	assert.Equal(t, []dataplane.Ticket{
		{ID: "share-manager-controller-shared", Type: dataplane.AttacherShareManager, Node: "n1"},
		{ID: "csi-shared-n1", Type: dataplane.AttacherCSI, Node: "n1"},
		{ID: "csi-shared-n3", Type: dataplane.AttacherCSI, Node: "n3"},
	}, w.Volumes[0].Tickets)

	require.NoError(t, s.RestartShareManager(ctx, sm.String(), "another-uid"))
	v, err := s.Volume(ctx, "shared")
	require.NoError(t, err)
	assert.Equal(t, "n1", v.AttachedNode, "a restart of another uid is a no-op")
	require.NoError(t, s.TaintNode(ctx, "n1"))
	require.NoError(t, s.RestartShareManager(ctx, sm.String(), sm.UID))
	v, err = s.Volume(ctx, "shared")
	require.NoError(t, err)
	assert.Equal(t, "n2", v.AttachedNode, "the new share-manager on the least busy untainted node, the volume with it")
	assert.Equal(t, 1, s.Restarts()[sm.String()])
	for _, p := range s.Pods() {
		if p.Name == "nfs-0" {
			assert.Equal(t, "n1", p.Node, "an NFS client stays")
		}
	}
	w, err = s.Workloads(ctx, "n2")
	require.NoError(t, err)
	assert.True(t, slices.ContainsFunc(w.Pods, func(p dataplane.Pod) bool { return p.ShareManagerOf == "shared" && p.UID != sm.UID }), "a new pod")
}
