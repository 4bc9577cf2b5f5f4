package longhorn_test

import (
	"cmp"
	"context"
	"maps"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/switchback-dev/switchback/aggregate/nodeupgrade"
	"github.com/switchback-dev/switchback/api/v1beta2"
	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/longhorn"
	"github.com/switchback-dev/switchback/longhorn/longhornsim"
	"github.com/switchback-dev/switchback/sim"
	"github.com/switchback-dev/switchback/test/harness/enginetest"
	"github.com/switchback-dev/switchback/test/harness/kubelets"
	"github.com/switchback-dev/switchback/test/harness/longhorntest"
	"github.com/switchback-dev/switchback/test/harness/testenv"
	"github.com/switchback-dev/switchback/workloadmove"
)

// TestMoveWorkloadsWithTheRealControllers upgrades every node of a v1.12.1
// cluster where the workloads run on the nodes themselves, with
// move-workloads and nobody in the loop, against Kubernetes' own parts:
// kube-controller-manager (the disruption controller writes the budget's
// status the eviction API checks; the StatefulSet and ReplicaSet
// controllers recreate what is evicted), kube-scheduler (places it, seeing
// the move's taint and the marks of the nodes still to come), and a
// stand-in for the kubelets and Longhorn's CSI plugin (a pod runs once
// Longhorn attached its volume where its ticket asks; a deletion finishes
// once it is unmounted). A StatefulSet of three under a budget of
// maxUnavailable 1 never has fewer than two Ready pods, watched at every
// change. An RWX volume's share-manager pod is restarted off its node
// (the volume follows it) and its two NFS clients are left where they are,
// their tickets holding nothing (one runs on every node). A Deployment whose template names n3 pins it: n3 is held before
// it touches anything, naming the pod, until the operator removes the
// Deployment; then it goes on by itself. Each workload moves once (those
// of the first workload node at most twice); the upgrade completes with no
// I/O failed on an attached volume, every node's replica scheduling
// restored, and no taint or mark left.
func TestMoveWorkloadsWithTheRealControllers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel)
	root, err := testenv.RepoRoot()
	require.NoError(t, err)
	env, err := testenv.Start(ctx, testenv.Options{CRDDir: filepath.Join(root, "test", "longhorn-crds")})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, env.Stop()) })
	require.NoError(t, env.StartControllers())
	cs, err := kubernetes.NewForConfig(env.Config)
	require.NoError(t, err)
	dyn := longhorntest.Dynamic(t, env.Config)
	const lhNS, appNS = "longhorn-system", "app"
	for _, ns := range []string{lhNS, appNS} {
		_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}

	nodes := []string{"n1", "n2", "n3", "n4"}
	s := sim.New(sim.Config{Profile: dataplane.ProfileV112, LonghornVersion: "v1.12.1"})
	for _, n := range nodes {
		require.NoError(t, s.AddNode(n))
	}
	volumes := []string{"data-db-0", "data-db-1", "data-db-2", "web", "agent"}
	for i, v := range volumes {
		require.NoError(t, s.AddVolume(v, sim.EngineV2, []string{nodes[i%4], nodes[(i+1)%4]}, ""))
	}
	// An RWX volume: Longhorn attaches it where its share-manager pod runs.
	require.NoError(t, s.AddVolumeSpec(sim.VolumeSpec{Name: "shared", ReplicasOn: []string{"n2", "n4"}, ShareManager: true}))
	mgr, err := longhornsim.Start(ctx, dyn, s, longhornsim.Options{Namespace: lhNS, Log: testLog(), VolumeAttachments: true})
	require.NoError(t, err)
	t.Cleanup(mgr.Close)
	kl, err := kubelets.Start(ctx, env.Config, kubelets.Options{LonghornNamespace: lhNS, Log: testLog()})
	require.NoError(t, err)
	t.Cleanup(kl.Close)

	k := workloadsOn{t: t, ctx: ctx, cs: cs, ns: appNS}
	for _, n := range nodes {
		k.csiPlugin(lhNS, n)
	}
	for _, v := range volumes {
		k.claim(v, corev1.ReadWriteOnce)
	}
	k.claim("shared", corev1.ReadWriteMany)
	k.statefulSet("db", 3)
	k.deployment("web", "web", "", 1)
	// One NFS client on every node: each node that holds initiators of its
	// own also has a client's ticket, which must not hold it.
	k.deployment("shared", "shared", "", int32(len(nodes)))
	// Its template names its node: it pins n3 until an operator removes it.
	k.deployment("agent", "agent", "n3", 1)
	k.budget("db", intstr.FromInt32(1))
	watch := k.watchPods("db", 3)
	lhWatch := workloadsOn{t: t, ctx: ctx, cs: cs, ns: lhNS}.watchPods("", 0)
	k.eventually("every workload runs, the budget's status written", env, func() bool {
		pdb, err := cs.PolicyV1().PodDisruptionBudgets(appNS).Get(ctx, "db", metav1.GetOptions{})
		return err == nil && pdb.Status.ObservedGeneration == pdb.Generation && pdb.Status.CurrentHealthy == 3 &&
			k.readyPods("app=web") == 1 && k.readyPods("app=agent") == 1 && k.readyPods("app=shared") == len(nodes)
	})

	disc, err := discovery.NewDiscoveryClientForConfig(env.Config)
	require.NoError(t, err)
	surface, err := longhorn.ReadSurface(ctx, disc, dyn, lhNS)
	require.NoError(t, err)
	platform, err := surface.Platform(false)
	require.NoError(t, err)
	plane, err := longhorn.New(ctx, dyn, longhorn.Options{Namespace: lhNS, Log: testLog(), SyncTimeout: 30 * time.Second, Platform: platform})
	require.NoError(t, err)
	initial := k.placement()
	e := enginetest.Start(t, plane, enginetest.Options{StallAfter: 300 * time.Millisecond})
	m := ref("move-real")
	e.RequestSpec(m, v1beta2.DataEngineUpgradeManagerSpec{DataEngine: v1beta2.DataEngineTypeV2, InitiatorPolicy: v1beta2.InitiatorPolicyMoveWorkloads})
	held := e.WaitNode(m, "n3", 3*time.Minute, "held by its pinned pod", func(n nodeupgrade.State) bool {
		return n.Stalled && n.StallReason == workloadmove.PinPodPinnedToNode
	})
	assert.Equal(t, events.NodeInitializing, held.State, "held before it touched anything")
	assert.Contains(t, held.StallMessage, "app/agent")
	assert.Empty(t, held.Moved, "nothing moved off a pinned node")
	n3, err := cs.CoreV1().Nodes().Get(ctx, "n3", metav1.GetOptions{})
	require.NoError(t, err)
	assert.NotContains(t, n3.Spec.Taints, corev1.Taint{Key: dataplane.WorkloadTaintKey, Effect: corev1.TaintEffectNoSchedule}, "a pinned node is not tainted")
	// The operator's fix: the pinned workload goes, and n3 goes on by itself.
	require.NoError(t, cs.AppsV1().Deployments(appNS).Delete(ctx, "agent", metav1.DeleteOptions{}))
	st := e.WaitManager(m, 3*time.Minute, "a terminal state", terminal)
	require.Equal(t, events.ManagerCompleted, st.State, st.Message)
	require.NoError(t, env.Exited())

	assert.Equal(t, 0, watch.violations(), "the StatefulSet kept two Ready pods at every change (lowest seen: %d)", watch.lowest())
	assert.Zero(t, s.IOStats().Failed, "%s", s.IOStats())
	// The pods of the first node with workloads can only land on nodes
	// still to come, and move again with them; every other workload lands
	// on a node already upgraded, and moves once.
	first := ""
	for _, n := range st.Plan {
		if slices.Contains(slices.Collect(maps.Values(initial)), n) {
			first = n
			break
		}
	}
	restarts := watch.restarts()
	require.Len(t, restarts, len(initial)-1, "every workload but the RWX volume's clients moved: %v", restarts)
	assert.Equal(t, 1, restarts["agent"], "the pinned pod went by the operator's hand")
	assert.Zero(t, restarts["shared"], "an RWX volume's NFS clients stay where they are")
	smRestarts := lhWatch.restarts()["share-manager-shared"]
	assert.Contains(t, []int{1, 2}, smRestarts, "the share-manager moved off its node, and at most once more")
	delete(initial, "agent")
	delete(initial, "shared")
	for w, n := range initial {
		if n == first {
			assert.Contains(t, []int{1, 2}, restarts[w], "workload %s of the first workload node %s", w, n)
		} else {
			assert.Equal(t, 1, restarts[w], "workload %s of node %s moved once", w, n)
		}
	}
	for _, n := range nodes {
		ln, err := plane.Node(ctx, n)
		require.NoError(t, err)
		assert.True(t, ln.AllowScheduling, "node %s's replica scheduling restored", n)
		kn, err := cs.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
		require.NoError(t, err)
		for _, taint := range kn.Spec.Taints {
			assert.NotContains(t, []string{dataplane.WorkloadTaintKey, dataplane.UpgradePendingTaintKey}, taint.Key, "node %s left with %v", n, taint)
		}
	}
	k.eventually("every workload runs again", env, func() bool {
		return k.readyPods("app=db") == 3 && k.readyPods("app=web") == 1 && k.readyPods("app=shared") == len(nodes)
	})
	t.Logf("restarts per workload: %v; share-manager restarts: %d; lowest Ready db pods: %d", restarts, smRestarts, watch.lowest())
}

// workloadsOn creates and reads the workloads of a test on the apiserver.
type workloadsOn struct {
	t   *testing.T
	ctx context.Context
	cs  kubernetes.Interface
	ns  string
}

func (k workloadsOn) eventually(what string, env *testenv.Env, cond func() bool) {
	k.t.Helper()
	require.Eventually(k.t, func() bool {
		require.NoError(k.t, env.Exited())
		return cond()
	}, 2*time.Minute, 20*time.Millisecond, what)
}

// csiPlugin is the longhorn-csi-plugin pod of node, which the move waits
// to see Ready before it evicts anything there.
func (k workloadsOn) csiPlugin(ns, node string) {
	k.t.Helper()
	_, err := k.cs.CoreV1().Pods(ns).Create(k.ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "longhorn-csi-plugin-" + node, Labels: map[string]string{"app": "longhorn-csi-plugin"}},
		Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "plugin", Image: "longhornio/longhorn-manager"}}},
	}, metav1.CreateOptions{})
	require.NoError(k.t, err)
}

// claim is a PersistentVolumeClaim named like Longhorn volume v, bound to
// its PersistentVolume of Longhorn's CSI driver, as the binder leaves them.
func (k workloadsOn) claim(v string, mode corev1.PersistentVolumeAccessMode) {
	k.t.Helper()
	size := resource.MustParse("1Gi")
	modes := []corev1.PersistentVolumeAccessMode{mode}
	pv, err := k.cs.CoreV1().PersistentVolumes().Create(k.ctx, &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pv-" + v},
		Spec: corev1.PersistentVolumeSpec{Capacity: corev1.ResourceList{corev1.ResourceStorage: size}, AccessModes: modes,
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			ClaimRef:                      &corev1.ObjectReference{Namespace: k.ns, Name: v},
			PersistentVolumeSource:        corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: longhorn.CSIDriver, VolumeHandle: v}}},
	}, metav1.CreateOptions{})
	require.NoError(k.t, err)
	pv.Status.Phase = corev1.VolumeBound
	_, err = k.cs.CoreV1().PersistentVolumes().UpdateStatus(k.ctx, pv, metav1.UpdateOptions{})
	require.NoError(k.t, err)
	empty := ""
	pvc, err := k.cs.CoreV1().PersistentVolumeClaims(k.ns).Create(k.ctx, &corev1.PersistentVolumeClaim{
		// The binder's annotation: the scheduler takes a claim without it
		// for one still to bind.
		ObjectMeta: metav1.ObjectMeta{Name: v, Annotations: map[string]string{"pv.kubernetes.io/bind-completed": "yes"}},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: modes, VolumeName: pv.Name, StorageClassName: &empty,
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}}},
	}, metav1.CreateOptions{})
	require.NoError(k.t, err)
	pvc.Status = corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound, AccessModes: modes, Capacity: corev1.ResourceList{corev1.ResourceStorage: size}}
	_, err = k.cs.CoreV1().PersistentVolumeClaims(k.ns).UpdateStatus(k.ctx, pvc, metav1.UpdateOptions{})
	require.NoError(k.t, err)
}

func template(app string, volumes ...corev1.Volume) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: app, Image: "registry.k8s.io/pause:3.10",
			VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}}}, Volumes: volumes},
	}
}

// statefulSet runs replicas pods whose claims data-<name>-<i> exist.
func (k workloadsOn) statefulSet(name string, replicas int32) {
	k.t.Helper()
	_, err := k.cs.AppsV1().StatefulSets(k.ns).Create(k.ctx, &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.StatefulSetSpec{Replicas: &replicas, ServiceName: name, PodManagementPolicy: appsv1.ParallelPodManagement,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}, Template: template(name),
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}}},
	}, metav1.CreateOptions{})
	require.NoError(k.t, err)
}

// deployment runs replicas pods using claim, on nodeName when set.
func (k workloadsOn) deployment(name, claim, nodeName string, replicas int32) {
	k.t.Helper()
	tmpl := template(name, corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}})
	tmpl.Spec.NodeName = nodeName
	if name == "shared" {
		tmpl.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			TopologyKey: corev1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}}}}}
	}
	_, err := k.cs.AppsV1().Deployments(k.ns).Create(k.ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}, Template: tmpl},
	}, metav1.CreateOptions{})
	require.NoError(k.t, err)
}

func (k workloadsOn) budget(app string, maxUnavailable intstr.IntOrString) {
	k.t.Helper()
	_, err := k.cs.PolicyV1().PodDisruptionBudgets(k.ns).Create(k.ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: app},
		Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &maxUnavailable,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}},
	}, metav1.CreateOptions{})
	require.NoError(k.t, err)
}

func (k workloadsOn) pods(selector string) []corev1.Pod {
	k.t.Helper()
	l, err := k.cs.CoreV1().Pods(k.ns).List(k.ctx, metav1.ListOptions{LabelSelector: selector})
	require.NoError(k.t, err)
	return l.Items
}

func (k workloadsOn) readyPods(selector string) int {
	n := 0
	for _, p := range k.pods(selector) {
		if servesReady(&p) {
			n++
		}
	}
	return n
}

// placement is the node of each workload's pod (a StatefulSet's pod by
// name, any other by its app).
func (k workloadsOn) placement() map[string]string {
	out := map[string]string{}
	for _, p := range k.pods("app") {
		key := p.Labels["app"]
		if ref := metav1.GetControllerOf(&p); ref != nil && ref.Kind == "StatefulSet" {
			key = p.Name
		}
		out[key] = p.Spec.NodeName
	}
	return out
}

// servesReady: Ready and not being deleted, as the disruption controller
// counts a healthy pod.
func servesReady(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// podWatch follows the workload pods at every change the apiserver sends:
// the Ready pods of the budgeted app from the first moment all want are
// Ready, and the pods each workload lost (a StatefulSet's pod by name, any
// other by its app).
type podWatch struct {
	mu       sync.Mutex
	budgeted string
	want     int
	ready    map[string]bool
	armed    bool
	min      int
	breaches int
	gone     map[string]int
}

func (w *podWatch) violations() int { w.mu.Lock(); defer w.mu.Unlock(); return w.breaches }
func (w *podWatch) lowest() int     { w.mu.Lock(); defer w.mu.Unlock(); return w.min }
func (w *podWatch) restarts() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.gone)
}

func (w *podWatch) see(p *corev1.Pod, gone bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if gone {
		key := cmp.Or(p.Labels["app"], p.Name)
		if ref := metav1.GetControllerOf(p); ref != nil && ref.Kind == "StatefulSet" {
			key = p.Name
		}
		w.gone[key]++
	}
	if p.Labels["app"] != w.budgeted {
		return
	}
	w.ready[string(p.UID)] = !gone && servesReady(p)
	n := 0
	for _, r := range w.ready {
		if r {
			n++
		}
	}
	if n == w.want {
		w.armed = true
	}
	if !w.armed {
		return
	}
	w.min = min(w.min, n)
	if n < w.want-1 {
		w.breaches++
	}
}

// watchPods watches the namespace's pods from now to the end of the test;
// budgeted's are held to want-1 Ready.
func (k workloadsOn) watchPods(budgeted string, want int) *podWatch {
	k.t.Helper()
	w := &podWatch{budgeted: budgeted, want: want, ready: map[string]bool{}, min: want, gone: map[string]int{}}
	inf := informers.NewSharedInformerFactoryWithOptions(k.cs, 0, informers.WithNamespace(k.ns)).Core().V1().Pods().Informer()
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { w.see(o.(*corev1.Pod), false) },
		UpdateFunc: func(_, o any) { w.see(o.(*corev1.Pod), false) },
		DeleteFunc: func(o any) {
			if p, ok := o.(*corev1.Pod); ok {
				w.see(p, true)
			}
		},
	})
	require.NoError(k.t, err)
	ctx, cancel := context.WithCancel(k.ctx)
	k.t.Cleanup(cancel)
	go inf.RunWithContext(ctx)
	require.True(k.t, cache.WaitForCacheSync(ctx.Done(), inf.HasSynced))
	return w
}
