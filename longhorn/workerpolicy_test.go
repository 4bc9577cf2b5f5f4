package longhorn_test

import (
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/longhorn"
	"github.com/switchback-dev/switchback/sim"
	"github.com/switchback-dev/switchback/test/harness/enginetest"
)

// The workers' node scope (deploy/rbac/worker-admission-policy.yaml) on the
// real apiserver. Every worker identity is a token of the TokenRequest API,
// bound to a Pod of the worker service account on a node, as the kubelet
// gets it for the DaemonSet's pods: the node comes from the token itself,
// never from impersonation.

// workerUserPattern is how deploy/rbac's policies match the worker's user:
// its ServiceAccount by name in any namespace.
const workerUserPattern = "'^system:serviceaccount:[^:]+:switchback-worker$'"

// workerUserIn is workerUserPattern held to namespace, which each test's
// copy of the policies matches so that tests in other namespaces, some
// without the policies, are not under it.
func workerUserIn(namespace string) string {
	return "'^system:serviceaccount:" + regexp.QuoteMeta(namespace) + ":switchback-worker$'"
}

// TestWorkerPolicyMatchesTheWorkerInAnyNamespace evaluates the pattern the
// policies match the user with (CEL's matches is RE2, as Go's regexp):
// the worker's ServiceAccount wherever kustomize's namespace puts it, no
// other name and no user that only ends like it.
func TestWorkerPolicyMatchesTheWorkerInAnyNamespace(t *testing.T) {
	re := regexp.MustCompile(strings.Trim(workerUserPattern, "'"))
	for user, want := range map[string]bool{
		"system:serviceaccount:longhorn-system:switchback-worker": true,
		"system:serviceaccount:storage:switchback-worker":         true,
		"system:serviceaccount:storage:switchback-worker-x":       false,
		"system:serviceaccount:storage:switchback-controller":     false,
		"system:serviceaccount:a:b:switchback-worker":             false,
		"system:serviceaccount::switchback-worker":                false,
		"x-system:serviceaccount:storage:switchback-worker":       false,
		"system:node:n1": false,
		"system:serviceaccount:longhorn-system:switchback-worker\n": false,
	} {
		assert.Equal(t, want, re.MatchString(user), user)
	}
	assert.True(t, regexp.MustCompile(strings.Trim(workerUserIn("a.b"), "'")).MatchString("system:serviceaccount:a.b:switchback-worker"))
	assert.False(t, regexp.MustCompile(strings.Trim(workerUserIn("a.b"), "'")).MatchString("system:serviceaccount:axb:switchback-worker"))
}

// policyRef is the manager of these tests' upgrades, with a UID as the
// apiserver gives one: its first 8 characters name the upgrade's snapshots.
var policyRef = events.ManagerRef{Namespace: "longhorn-system", Name: "policy", UID: "5d1e0c9a-3b7f-4e21-9a0c-1f2e3d4c5b6a"}

// upgradeSnapshot is the name the upgrade of policyRef gives its snapshots
// on node (nodeworker: switchback-<UID[:8]>-<node>).
func upgradeSnapshot(node string) string { return "switchback-5d1e0c9a-" + node }

// TestWorkerPolicyScopesWritesToTheTokensNode runs the writes of node n1's
// steps, in their order, as n1's worker, each next to the writes the policy
// refuses: the same on another node's objects, other fields, another
// volume, and tokens bound to no node. Admitted writes go through the
// adapter, as the steps make them; refused ones, unless the adapter could
// make them, are raw patches and deletes (dry-run where admitting them by
// mistake would change the world).
func TestWorkerPolicyScopesWritesToTheTokensNode(t *testing.T) {
	// Every IM runs the default image: Longhorn replaces none itself, so
	// the worker's delete of its idle IM is the one that happens.
	s := sim.New(sim.Config{IMImage: sim.NewIMImage})
	for _, n := range []string{"c1", "n1", "n2", "n3"} {
		require.NoError(t, s.AddNodeSpec(sim.NodeSpec{Name: n}))
	}
	// vol-1 is n1's: its target and a replica there. vol-2 has nothing on
	// n1: attached to n2, its engine follows (spec.engineNodeID "").
	require.NoError(t, s.AddVolumeSpec(sim.VolumeSpec{Name: "vol-1", ReplicasOn: []string{"n1", "n2"}, AttachedTo: "c1", EngineOn: "n1"}))
	require.NoError(t, s.AddVolumeSpec(sim.VolumeSpec{Name: "vol-2", ReplicasOn: []string{"n2", "n3"}, AttachedTo: "n2"}))
	require.NoError(t, s.AddVolume("legacy-v1", sim.EngineV1, []string{"n1", "n2"}, "c1"))
	c := newCluster(t, s)
	sc := underWorkerPolicy(t, c)
	ctx := c.ctx

	as := map[string]worker{}
	for _, n := range []string{"n1", "n2"} {
		tok := sc.podToken(t, n)
		as[n] = worker{plane: sc.plane(t, tok, testLog()), dyn: sc.dynamic(t, tok)}
	}
	// The controller, with the test's own credentials: it writes the
	// records of targets away.
	as["controller"] = worker{plane: c.plane, dyn: c.dyn}
	as["secret"] = worker{dyn: sc.dynamic(t, sc.secretToken(t))}
	as["unbound"] = worker{dyn: sc.dynamic(t, sc.token(t, nil))}

	// A grant beyond deploy/rbac: the policy refuses what no step writes.
	_, err := sc.kube.RbacV1().Roles(c.ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "wider"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create"}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = sc.kube.RbacV1().RoleBindings(c.ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "wider"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "wider"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "switchback-worker", Namespace: c.ns}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	// createConfigMap waits out the grant (RBAC takes effect asynchronously:
	// until then the apiserver refuses before admission).
	createConfigMap := func(w worker) error {
		cm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "x"}}}
		for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			_, err := w.dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace(c.ns).
				Create(ctx, cm, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			if err == nil || !strings.Contains(err.Error(), "cannot create resource") || time.Now().After(deadline) {
				return err
			}
		}
	}

	replicaOn := func(volume, node string) string {
		v, err := c.plane.Volume(ctx, volume)
		require.NoError(t, err)
		for _, r := range v.Replicas {
			if r.Node == node {
				return r.Name
			}
		}
		t.Fatalf("volume %s has no replica on %s", volume, node)
		return ""
	}
	imOf := func(node string) string {
		ims, err := c.plane.InstanceManagers(ctx, node)
		require.NoError(t, err)
		require.Len(t, ims, 1, "the IMs of %s", node)
		return ims[0].Name
	}
	r1, r2, rV1 := replicaOn("vol-1", "n1"), replicaOn("vol-2", "n2"), replicaOn("legacy-v1", "n1")
	im1, im2 := imOf("n1"), imOf("n2")
	snap1 := upgradeSnapshot("n1")

	// patch dry-runs a merge patch: admission decides, nothing changes.
	patch := func(gvr schema.GroupVersionResource, name, body string) func(worker) error {
		return func(w worker) error {
			_, err := w.dyn.Resource(gvr).Namespace(c.ns).Patch(ctx, name, types.MergePatchType, []byte(body),
				metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
			return err
		}
	}
	// createSnapshot dry-runs the create of the Snapshot object the adapter
	// would create (annotation: the snapshot's name): volume need not
	// exist, nothing is taken.
	createSnapshot := func(volume, name, annotation string) func(worker) error {
		return func(w worker) error {
			u := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": longhorn.GroupVersion.String(), "kind": longhorn.KindSnapshot,
				"metadata": map[string]any{"name": longhorn.SnapshotObjectName(volume, name),
					"labels":      map[string]any{longhorn.VolumeLabel: volume},
					"annotations": map[string]any{longhorn.SnapshotNameAnnotation: annotation}},
				"spec": map[string]any{"volume": volume, "createSnapshot": true},
			}}
			_, err := w.dyn.Resource(longhorn.SnapshotsResource).Namespace(c.ns).Create(ctx, u, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			return err
		}
	}
	// Over 63 characters, the object name is cut and hashed.
	longVolume := "pvc-" + strings.Repeat("0123456789", 5)
	require.Greater(t, len(snap1+"-"+longVolume), 63)
	del := func(gvr schema.GroupVersionResource, name string) func(worker) error {
		return func(w worker) error {
			return w.dyn.Resource(gvr).Namespace(c.ns).Delete(ctx, name, metav1.DeleteOptions{})
		}
	}
	settled := func(volume, node string) bool {
		v, err := c.plane.Volume(ctx, volume)
		return err == nil && v.TargetNode == node && v.TargetReady && v.Switchover == dataplane.SwitchoverNone
	}
	// n1Runs reports whether n1's only IM runs idle, and is im1 or not.
	n1Runs := func(isIM1 bool) bool {
		ims, err := c.plane.InstanceManagers(ctx, "n1")
		return err == nil && len(ims) == 1 && (ims[0].Name == im1) == isIM1 && ims[0].State == dataplane.IMRunning && !ims[0].Busy()
	}
	noNode := "the token is bound to no pod on a node"
	// recordAway is the controller's write of a record of a target away.
	recordAway := func(volume string, away *dataplane.TargetAway) func(worker) error {
		return func(w worker) error { return w.plane.RecordTargetAway(ctx, volume, away) }
	}

	for _, tc := range []struct {
		name string
		as   string
		do   func(worker) error
		// denied is what the refusal names besides the worker's node; ""
		// means admitted.
		denied string
		// until, after an admitted write, is what Longhorn (simulated) does
		// before the next step.
		until func() bool
	}{
		{name: "n1 turns off its node's replica scheduling", as: "n1",
			do: func(w worker) error { return w.plane.SetReplicaScheduling(ctx, "n1", false) }},
		{name: "n1 may not turn off n2's", as: "n1",
			do:     func(w worker) error { return w.plane.SetReplicaScheduling(ctx, "n2", false) },
			denied: `changes only the Longhorn node of its own node ("n1")`},
		{name: "n1 may not change another field of its node", as: "n1",
			do:     patch(longhorn.NodesResource, "n1", `{"spec":{"evictionRequested":true}}`),
			denied: "it changes spec.evictionRequested; a worker changes only spec.allowScheduling"},
		{name: "n1 may not label its node", as: "n1",
			do:     patch(longhorn.NodesResource, "n1", `{"metadata":{"labels":{"x":"y"}}}`),
			denied: "it changes metadata.labels"},
		{name: "n1 reports its kernel's nvme_core.multipath on its node", as: "n1",
			do: func(w worker) error { return w.plane.ReportNVMeMultipath(ctx, "n1", dataplane.MultipathOff) }},
		{name: "and reports it again once it changed", as: "n1",
			do: func(w worker) error { return w.plane.ReportNVMeMultipath(ctx, "n1", dataplane.MultipathOn) }},
		{name: "n1 may not report n2's", as: "n1",
			do:     func(w worker) error { return w.plane.ReportNVMeMultipath(ctx, "n2", dataplane.MultipathOff) },
			denied: `changes only the Longhorn node of its own node ("n1")`},
		{name: "n1 may not report anything but Y or N", as: "n1",
			do:     patch(longhorn.NodesResource, "n1", `{"metadata":{"annotations":{"`+longhorn.MultipathAnnotation+`":"maybe"}}}`),
			denied: "holds Y or N"},
		{name: "n1 may not annotate its node otherwise", as: "n1",
			do:     patch(longhorn.NodesResource, "n1", `{"metadata":{"annotations":{"x":"y"}}}`),
			denied: "it changes metadata.annotations"},
		{name: "n1 may not report on a volume", as: "n1",
			do:     patch(longhorn.VolumesResource, "vol-1", `{"metadata":{"annotations":{"`+longhorn.MultipathAnnotation+`":"N"}}}`),
			denied: "it changes metadata.annotations"},
		{name: "a token bound to a Secret names no node", as: "secret",
			do:     patch(longhorn.NodesResource, "n1", `{"spec":{"allowScheduling":false}}`),
			denied: noNode},
		{name: "an unbound token names no node", as: "unbound",
			do:     patch(longhorn.NodesResource, "n1", `{"spec":{"allowScheduling":false}}`),
			denied: noNode},

		{name: "n1 may not write what no step writes, whatever RBAC grants", as: "n1",
			do:     createConfigMap,
			denied: "not a write of the node steps"},

		{name: "n1 snapshots vol-1", as: "n1",
			do: func(w worker) error { return w.plane.CreateSnapshot(ctx, "vol-1", snap1) }},
		{name: "n1 may not take n2's upgrade snapshot", as: "n1",
			do:     func(w worker) error { return w.plane.CreateSnapshot(ctx, "vol-2", upgradeSnapshot("n2")) },
			denied: `is not named as an upgrade snapshot of node "n1"`},
		{name: "n1 may not take a snapshot of another name", as: "n1",
			do:     func(w worker) error { return w.plane.CreateSnapshot(ctx, "vol-2", "backup-before-upgrade") },
			denied: `is not named as an upgrade snapshot of node "n1"`},

		{name: "n1 snapshots a volume whose object name is hashed", as: "n1",
			do: createSnapshot(longVolume, snap1, snap1)},
		{name: "n2 may not take n1's snapshot of it", as: "n2",
			do:     createSnapshot(longVolume, snap1, snap1),
			denied: `is not named as an upgrade snapshot of node "n2"`},
		{name: "n1 may not take a snapshot the annotation names otherwise", as: "n1",
			do:     createSnapshot("vol-9", snap1, "user-snapshot"),
			denied: `an upgrade snapshot carries its name in the annotation switchback.dev/snapshot-name ("` + snap1 + `")`},

		{name: "n1 may not delete its IM while it runs vol-1's engine", as: "n1",
			do:     del(longhorn.InstanceManagersResource, im1),
			denied: "it still runs instances (status.instanceEngines"},
		{name: "n1 fails its replica of vol-1", as: "n1",
			do: func(w worker) error { return w.plane.FailReplica(ctx, "vol-1", r1) },
			until: func() bool {
				v, err := c.plane.Volume(ctx, "vol-1")
				// Out of the engine too: StopReplica waits for it.
				return err == nil && !v.Rebuilding() && v.HealthyReplicas() == v.NumberOfReplicas &&
					!slices.ContainsFunc(v.Replicas, func(r dataplane.Replica) bool { return r.Name == r1 && r.InEngine })
			}},
		{name: "n1 may not stop n2's replica of vol-2", as: "n1",
			do:     patch(longhorn.ReplicasResource, r2, `{"spec":{"desireState":"stopped"}}`),
			denied: `it is on node "n2"`},
		{name: "n1 stops its failed replica, out of its engine", as: "n1",
			do: func(w worker) error { return w.plane.StopReplica(ctx, "vol-1", r1) },
			until: func() bool {
				v, err := c.plane.Volume(ctx, "vol-1")
				return err == nil && slices.ContainsFunc(v.Replicas, func(r dataplane.Replica) bool { return r.Name == r1 && !r.Running })
			}},
		{name: "n1 may not fail n2's replica of vol-2", as: "n1",
			do:     func(w worker) error { return w.plane.FailReplica(ctx, "vol-2", r2) },
			denied: `it is on node "n2" (spec.nodeID); a worker writes only the replicas and instance managers of its own node`},
		{name: "n1 may not fail its replica of a v1 volume", as: "n1",
			do:     patch(longhorn.ReplicasResource, rV1, `{"spec":{"desireState":"stopped"}}`),
			denied: `spec.dataEngine is "v1"; the upgrade touches v2 objects only`},
		{name: "n1 may not change another field of its replica", as: "n1",
			do:     patch(longhorn.ReplicasResource, r1, `{"spec":{"evictionRequested":true}}`),
			denied: "a worker only fails a replica"},

		{name: "n1 may not move vol-1's target off n1 before the controller recorded the move", as: "n1",
			do:     func(w worker) error { return w.plane.SetEngineNode(ctx, "vol-1", "n3") },
			denied: `moving its engine from "n1" to "n3": the volume has no record of its target away from node "n1"`},
		{name: "n1 may not pull vol-2's target onto n1", as: "n1",
			do:     patch(longhorn.VolumesResource, "vol-2", `{"spec":{"engineNodeID":"n1"}}`),
			denied: `moving its engine from "" to "n1": the volume has no record of its target away from node "n1"`},
		{name: "n1 may not move vol-2's target between two other nodes in two writes (onto n1, then off n1)", as: "n1",
			do: func(w worker) error {
				for _, to := range []string{"n1", "n3"} {
					if _, err := w.dyn.Resource(longhorn.VolumesResource).Namespace(c.ns).Patch(ctx, "vol-2", types.MergePatchType,
						[]byte(`{"spec":{"engineNodeID":"`+to+`"}}`), metav1.PatchOptions{}); err != nil {
						return err
					}
				}
				return nil
			},
			denied: `moving its engine from "" to "n1": the volume has no record of its target away from node "n1"`},
		{name: "n1 may not write the record of vol-1's target away itself", as: "n1",
			do:     patch(longhorn.VolumesResource, "vol-1", `{"metadata":{"annotations":{"`+longhorn.TargetAwayAnnotation+`":"n1,n1,n3"}}}`),
			denied: "it changes the annotation " + longhorn.TargetAwayAnnotation + ", the record of a target away that only the controller writes"},
		{name: "the controller records vol-1's target away from n1 to n3", as: "controller",
			do: recordAway("vol-1", &dataplane.TargetAway{Node: "n1", EngineNodeBefore: "n1", Temporary: "n3"})},
		{name: "n1 may not remove the record", as: "n1",
			do:     patch(longhorn.VolumesResource, "vol-1", `{"metadata":{"annotations":{"`+longhorn.TargetAwayAnnotation+`":null}}}`),
			denied: "it changes the annotation " + longhorn.TargetAwayAnnotation},
		{name: "n1 may not move vol-1's target elsewhere than the recorded temporary node", as: "n1",
			do:     patch(longhorn.VolumesResource, "vol-1", `{"spec":{"engineNodeID":"n2"}}`),
			denied: `moving its engine from "n1" to "n2" is not what the record of its target away says (annotation switchback.dev/target-away "n1,n1,n3")`},
		{name: "n1 moves vol-1's target off n1", as: "n1",
			do:    func(w worker) error { return w.plane.SetEngineNode(ctx, "vol-1", "n3") },
			until: func() bool { return settled("vol-1", "n3") && n1Runs(true) }},
		{name: "n1 may not move vol-2's target (on n2, attached to n2)", as: "n1",
			do:     func(w worker) error { return w.plane.SetEngineNode(ctx, "vol-2", "n3") },
			denied: `moving its engine from "" to "n3" (attached to "n2", target on "n2") concerns neither side of node "n1"`},
		{name: "n1 may not pull vol-2's target onto n1 under a record of another node", as: "n1",
			do: func(w worker) error {
				if err := recordAway("vol-2", &dataplane.TargetAway{Node: "n2", Temporary: "n1"})(as["controller"]); err != nil {
					return err
				}
				return patch(longhorn.VolumesResource, "vol-2", `{"spec":{"engineNodeID":"n1"}}`)(w)
			},
			denied: `the volume has no record of its target away from node "n1" (annotation switchback.dev/target-away "n2,,n1")`},
		{name: "the controller records vol-2's target away from n2 to n3", as: "controller",
			do: recordAway("vol-2", &dataplane.TargetAway{Node: "n2", Temporary: "n3"})},
		{name: "n2 may move vol-2's target off n2, its engine following the attachment", as: "n2",
			do: patch(longhorn.VolumesResource, "vol-2", `{"spec":{"engineNodeID":"n3"}}`)},
		{name: "n1 may not move vol-1's target between two other nodes", as: "n1",
			do:     patch(longhorn.VolumesResource, "vol-1", `{"spec":{"engineNodeID":"n2"}}`),
			denied: `moving its engine from "n3" to "n2"`},
		{name: "n1 may not send vol-1's target to its attachment on c1", as: "n1",
			do:     patch(longhorn.VolumesResource, "vol-1", `{"spec":{"engineNodeID":""}}`),
			denied: "concerns neither side of node"},
		{name: "n1 may not change another field of its volume", as: "n1",
			do:     patch(longhorn.VolumesResource, "vol-1", `{"spec":{"numberOfReplicas":3}}`),
			denied: "it changes spec.numberOfReplicas; a worker changes only spec.engineNodeID"},

		{name: "n1 may not delete n2's IM", as: "n1",
			do:     del(longhorn.InstanceManagersResource, im2),
			denied: `it is on node "n2"`},
		{name: "n1 may not change another field of its IM", as: "n1",
			do:     patch(longhorn.InstanceManagersResource, im1, `{"spec":{"nodeID":"n2"}}`),
			denied: "it changes spec.nodeID; a worker changes only spec.image"},
		{name: "n1 deletes its idle IM", as: "n1",
			do:    func(w worker) error { return w.plane.DeleteInstanceManager(ctx, im1) },
			until: func() bool { return n1Runs(false) }},

		{name: "n1 brings vol-1's target home", as: "n1",
			do:    func(w worker) error { return w.plane.SetEngineNode(ctx, "vol-1", "n1") },
			until: func() bool { return settled("vol-1", "n1") }},
		{name: "the controller removes vol-1's record once its target is home", as: "controller",
			do: recordAway("vol-1", nil)},
		{name: "n1 may not move vol-1's target off n1 again without a record", as: "n1",
			do:     patch(longhorn.VolumesResource, "vol-1", `{"spec":{"engineNodeID":"n3"}}`),
			denied: `the volume has no record of its target away from node "n1" (annotation switchback.dev/target-away "")`},
		{name: "n2 may not delete n1's upgrade snapshot", as: "n2",
			do:     del(longhorn.SnapshotsResource, longhorn.SnapshotObjectName("vol-1", snap1)),
			denied: `is not named as an upgrade snapshot of node "n2"`},
		{name: "n1 deletes its snapshot of vol-1", as: "n1",
			do: func(w worker) error { return w.plane.DeleteSnapshot(ctx, "vol-1", snap1) }},
		{name: "n1 restores its node's replica scheduling", as: "n1",
			do: func(w worker) error { return w.plane.SetReplicaScheduling(ctx, "n1", true) }},
	} {
		err := tc.do(as[tc.as])
		if tc.denied == "" {
			require.NoError(t, err, tc.name)
			if tc.until != nil {
				eventually(t, 15*time.Second, tc.name+": Longhorn's reaction", tc.until)
			}
			continue
		}
		require.Error(t, err, tc.name)
		assert.True(t, apierrors.IsForbidden(err), "%s: a denial is Forbidden: %v", tc.name, err)
		assert.ErrorContains(t, err, "ValidatingAdmissionPolicy", tc.name)
		if tc.denied != noNode {
			assert.ErrorContains(t, err, `switchback-worker of node "`+tc.as+`"`, "%s: the denial names the node", tc.name)
		}
		assert.ErrorContains(t, err, tc.denied, tc.name)
	}
}

// TestWorkerPolicyAdmitsWholeUpgrades runs whole upgrades with one adapter
// per node, each with the token of a worker pod on its node, under the
// policy: every write the steps make is admitted (a refused one would stall
// the node), and everything is as before once it completed. The
// orchestrator reads with the test's own client. On the in-place profile
// the writes are exactly those of testdata/inplace-writes.golden (the same
// cluster, its snapshots named for policyRef), the switch-back to "" of a
// volume whose engine follows its attachment included.
func TestWorkerPolicyAdmitsWholeUpgrades(t *testing.T) {
	for _, tc := range []struct {
		name  string
		build func(t *testing.T) (*cluster, []string)
		// golden, when set, is the file of the exact writes expected.
		golden string
	}{
		{name: "v1.12", build: func(t *testing.T) (*cluster, []string) {
			s, storage := storageLayout(t, latencies)
			return newCluster(t, s), storage
		}},
		{name: "in-place", golden: filepath.Join("testdata", "inplace-writes.golden"), build: func(t *testing.T) (*cluster, []string) {
			// The cluster of TestInPlaceWriteSequence.
			return newClusterWith(t, inPlaceLayout(t), clusterOptions{platform: &dataplane.Platform{Profile: dataplane.ProfileInPlace, Evidence: "told by the test"}, guard: true}), []string{"n1"}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, nodes := tc.build(t)
			was := recordBefore(t, c)
			sc := underWorkerPolicy(t, c)
			writes := newWriteLog()
			e := enginetest.Start(t, c.plane, enginetest.Options{NoWorkers: true})
			for _, n := range nodes {
				e.Plane = sc.plane(t, sc.podToken(t, n), slog.New(writes))
				e.StartWorker(n)
			}
			e.Plane = c.plane
			e.RequestSpec(policyRef, storageSpec(nodes))
			st := e.WaitManager(policyRef, 30*time.Second, "a terminal state", terminal)
			require.Equal(t, events.ManagerCompleted, st.State, st.Message)
			was.restored(t, c)
			for _, env := range e.History(policyRef) {
				if d, ok := env.Data.(events.NodeStalled); ok {
					assert.NotEqual(t, "DataPlaneError", d.Reason, "a write was refused: %s", d.Message)
				}
			}
			if tc.golden != "" {
				want, err := os.ReadFile(tc.golden)
				require.NoError(t, err)
				// The workers' writes only: those after the header of
				// the controller's are its own, through the test's adapter.
				workers, _, _ := strings.Cut(string(want), "# and the controller's")
				assert.Equal(t, strings.ReplaceAll(workers, "switchback-uid-in-p-", upgradeSnapshot("")), writes.String(),
					"the writes of the in-place steps, each admitted")
			}
		})
	}
}

// TestWorkerPolicySetsOnlyTheDefaultImageOnAnIdleIM: a worker sets its
// instance manager's spec.image (the in-place profile's step) only to the
// value of Longhorn's setting default-instance-manager-image, the policy's
// parameter, and only while the IM runs no engine or replica (its engine
// frontends may run: the in-place profile's initiators survive the
// restart). Each write is a dry run: admission decides, nothing changes.
func TestWorkerPolicySetsOnlyTheDefaultImageOnAnIdleIM(t *testing.T) {
	// In place: Longhorn replaces no idle IM of an old image by itself.
	s := sim.New(sim.Config{Profile: dataplane.ProfileInPlace})
	for _, n := range []string{"c1", "n1", "n2", "n3", "n4"} {
		require.NoError(t, s.AddNodeSpec(sim.NodeSpec{Name: n}))
	}
	// n1's IM runs vol-1's engine (replicas elsewhere); n4's runs nothing;
	// n3's runs the engine frontend of vol-3 only (attached to n3, its
	// engine on n2).
	require.NoError(t, s.AddVolumeSpec(sim.VolumeSpec{Name: "vol-1", ReplicasOn: []string{"n2", "c1"}, AttachedTo: "c1", EngineOn: "n1"}))
	require.NoError(t, s.AddVolumeSpec(sim.VolumeSpec{Name: "vol-3", ReplicasOn: []string{"n2", "c1"}, AttachedTo: "n3", EngineOn: "n2"}))
	c := newClusterWith(t, s, clusterOptions{platform: &dataplane.Platform{Profile: dataplane.ProfileInPlace, Evidence: "told by the test"}})
	sc := underWorkerPolicy(t, c)
	ctx := c.ctx
	image, err := c.plane.DefaultInstanceManagerImage(ctx)
	require.NoError(t, err)
	require.NotEqual(t, sim.OldIMImage, image, "the IMs run another image than Longhorn's default")

	imOf := func(node string) string {
		ims, err := c.plane.InstanceManagers(ctx, node)
		require.NoError(t, err)
		require.Len(t, ims, 1, "the IMs of %s", node)
		require.Equal(t, sim.OldIMImage, ims[0].Image)
		return ims[0].Name
	}
	as := map[string]dynamic.Interface{}
	for _, n := range []string{"n1", "n2", "n3", "n4"} {
		as[n] = sc.dynamic(t, sc.podToken(t, n))
	}
	// The image policy loads asynchronously: wait until it refuses an image
	// the node scope admits (n4's idle IM, another image).
	attack := func() error {
		_, err := as["n4"].Resource(longhorn.InstanceManagersResource).Namespace(c.ns).Patch(ctx, imOf("n4"), types.MergePatchType,
			[]byte(`{"spec":{"image":"probe"}}`), metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	}
	eventually(t, 30*time.Second, "the image policy refuses another image", func() bool {
		err := attack()
		return apierrors.IsForbidden(err) && strings.Contains(err.Error(), `it sets spec.image to "probe"`)
	})
	for _, tc := range []struct {
		name, as, node, image string
		// denied is what the refusal names; "" means admitted.
		denied string
	}{
		{name: "n4 sets its idle IM to Longhorn's default image", as: "n4", node: "n4", image: image},
		{name: "n3 sets its IM running only an engine frontend to Longhorn's default image", as: "n3", node: "n3", image: image},
		{name: "n4 may not set its idle IM to another image", as: "n4", node: "n4", image: "attacker/instance-manager:v1",
			denied: `it sets spec.image to "attacker/instance-manager:v1"; a worker sets only the image of Longhorn's setting default-instance-manager-image ("` + image + `")`},
		{name: "n1 may not set its IM running vol-1's engine, even to the default image", as: "n1", node: "n1", image: image,
			denied: "it still runs instances (status.instanceEngines); a worker sets the image only of an instance manager that runs no engine or replica"},
		{name: "n2 may not set its IM running replicas and an engine to the default image", as: "n2", node: "n2", image: image,
			denied: "it still runs instances (status.instanceEngines, status.instanceReplicas)"},
		{name: "n4 may not set n1's IM to the default image", as: "n4", node: "n1", image: image,
			denied: `it is on node "n1" (spec.nodeID)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := `{"spec":{"image":"` + tc.image + `"}}`
			_, err := as[tc.as].Resource(longhorn.InstanceManagersResource).Namespace(c.ns).Patch(ctx, imOf(tc.node), types.MergePatchType, []byte(body),
				metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
			if tc.denied == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.True(t, apierrors.IsForbidden(err), "a denial is Forbidden: %v", err)
			assert.ErrorContains(t, err, `switchback-worker of node "`+tc.as+`"`)
			assert.ErrorContains(t, err, tc.denied)
		})
	}
}
