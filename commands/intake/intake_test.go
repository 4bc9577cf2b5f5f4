package intake_test

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/switchback-dev/switchback/aggregate/manager"
	"github.com/switchback-dev/switchback/aggregate/nodeupgrade"
	"github.com/switchback-dev/switchback/api/v1beta2"
	"github.com/switchback-dev/switchback/commands/intake"
	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/kubeclient"
	"github.com/switchback-dev/switchback/sim"
	"github.com/switchback-dev/switchback/test/harness/enginetest"
	"github.com/switchback-dev/switchback/test/harness/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

var nsSeq atomic.Int64

type fixture struct {
	kc  *kubeclient.Client
	ns  string
	e   *enginetest.Engine
	sim *sim.Sim
	ctx context.Context
}

func setup(t *testing.T) *fixture {
	env := testenv.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	cs, err := kubernetes.NewForConfig(env.Config)
	require.NoError(t, err)
	ns := fmt.Sprintf("intake-%d", nsSeq.Add(1))
	_, err = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	kc, err := kubeclient.New(env.Config)
	require.NoError(t, err)

	cluster := sim.New(sim.Config{Profile: dataplane.ProfileInPlace, TargetMoveLatency: 10 * time.Millisecond})
	for _, n := range []string{"n1", "n2", "n3"} {
		require.NoError(t, cluster.AddNode(n))
	}
	for i, attached := range []string{"n1", "n2", "n3"} {
		require.NoError(t, cluster.AddVolume(fmt.Sprintf("vol-%d", i), sim.EngineV2, []string{"n1", "n2", "n3"}, attached))
	}
	e := enginetest.Start(t, cluster, enginetest.Options{})
	c, err := intake.New(intake.Config{Client: kc, Store: e.Store, Namespace: ns, CancelPoll: 50 * time.Millisecond})
	require.NoError(t, err)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Run(runCtx) }()
	t.Cleanup(func() { stop(); <-done })
	return &fixture{kc: kc, ns: ns, e: e, sim: cluster, ctx: ctx}
}

func (f *fixture) create(t *testing.T, name string, nodes ...string) (*v1beta2.DataEngineUpgradeManager, events.ManagerRef) {
	t.Helper()
	m, err := f.kc.Managers(f.ns).Create(f.ctx, &v1beta2.DataEngineUpgradeManager{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v1beta2.DataEngineUpgradeManagerSpec{DataEngine: v1beta2.DataEngineTypeV2, Nodes: nodes},
	})
	require.NoError(t, err)
	return m, events.ManagerRef{Namespace: f.ns, Name: name, UID: string(m.UID)}
}

func (f *fixture) waitGone(t *testing.T, name string) {
	t.Helper()
	require.Eventually(t, func() bool {
		_, err := f.kc.Managers(f.ns).Get(f.ctx, name)
		return apierrors.IsNotFound(err)
	}, 30*time.Second, 10*time.Millisecond, "manager %s deleted", name)
}

func TestNewManagerIsRequestedOnceWithAFinalizer(t *testing.T) {
	f := setup(t)
	_, ref := f.create(t, "upgrade")
	require.Eventually(t, func() bool {
		m, err := f.kc.Managers(f.ns).Get(f.ctx, "upgrade")
		return err == nil && slices.Contains(m.Finalizers, v1beta2.CancelFinalizer)
	}, 30*time.Second, 10*time.Millisecond, "finalizer added")
	st := f.e.WaitManager(ref, 30*time.Second, "completed", func(s manager.State) bool { return s.Terminal() })
	require.Equal(t, events.ManagerCompleted, st.State, st.Message)
	requested := 0
	for _, e := range f.e.History(ref) {
		if _, ok := e.Data.(events.UpgradeRequested); ok {
			requested++
		}
	}
	assert.Equal(t, 1, requested, "resyncs and updates do not request twice")

	// Deleting a finished manager needs no cancel: the finalizer goes at once.
	require.NoError(t, f.kc.Managers(f.ns).Delete(f.ctx, "upgrade", metav1.DeleteOptions{}))
	f.waitGone(t, "upgrade")
	for _, e := range f.e.History(ref) {
		_, cancel := e.Data.(events.CancelRequested)
		assert.False(t, cancel, "no cancel recorded for a finished upgrade")
	}
}

func TestDeletingAManagerCancelsAtASafePoint(t *testing.T) {
	f := setup(t)
	require.NoError(t, f.sim.InjectTargetMoveFailure("vol-1")) // hold n2 in switching-over
	_, ref := f.create(t, "to-cancel", "n2")
	f.e.WaitNode(ref, "n2", 30*time.Second, "stalled in switching-over", func(n nodeupgrade.State) bool { return n.Stalled })

	require.NoError(t, f.kc.Managers(f.ns).Delete(f.ctx, "to-cancel", metav1.DeleteOptions{}))
	// The finalizer holds the object while the node reaches its safe point.
	m, err := f.kc.Managers(f.ns).Get(f.ctx, "to-cancel")
	require.NoError(t, err)
	assert.NotNil(t, m.DeletionTimestamp)
	f.e.WaitManager(ref, 30*time.Second, "cancel requested", func(s manager.State) bool { return s.CancelRequested })
	require.NoError(t, f.sim.HealTargetMoveFailure("vol-1"))

	f.waitGone(t, "to-cancel")
	st := f.e.Manager(ref)
	assert.Equal(t, events.ManagerCancelled, st.State)
	assert.Empty(t, f.sim.Unsafe(""), "every target is home, nothing flagged")
}

// A manager created outside the managed namespace (past the webhook, which
// refuses it) is never taken in: no finalizer, no history, and it does not
// count as an active upgrade for one in the managed namespace.
func TestManagerOutsideTheNamespaceIsNotTakenInAndDoesNotBlock(t *testing.T) {
	f := setup(t)
	cs, err := kubernetes.NewForConfig(testenv.Get(t).Config)
	require.NoError(t, err)
	other := f.ns + "-other"
	_, err = cs.CoreV1().Namespaces().Create(f.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: other}}, metav1.CreateOptions{})
	require.NoError(t, err)
	stray, err := f.kc.Managers(other).Create(f.ctx, &v1beta2.DataEngineUpgradeManager{
		ObjectMeta: metav1.ObjectMeta{Name: "stray"},
		Spec:       v1beta2.DataEngineUpgradeManagerSpec{DataEngine: v1beta2.DataEngineTypeV2},
	})
	require.NoError(t, err)
	stray.Status.State = v1beta2.UpgradeStateUpgrading
	_, err = f.kc.Managers(other).UpdateStatus(f.ctx, stray)
	require.NoError(t, err)

	_, ref := f.create(t, "managed")
	st := f.e.WaitManager(ref, 30*time.Second, "completed", func(s manager.State) bool { return s.Terminal() })
	require.Equal(t, events.ManagerCompleted, st.State, st.Message)
	for _, p := range st.Prechecks {
		assert.True(t, p.Passed, "%s: %s", p.Check, p.Message)
	}

	got, err := f.kc.Managers(other).Get(f.ctx, "stray")
	require.NoError(t, err)
	assert.NotContains(t, got.Finalizers, v1beta2.CancelFinalizer, "not taken in")
	assert.Empty(t, f.e.History(events.ManagerRef{Namespace: other, Name: "stray", UID: string(stray.UID)}), "no history")
}
