package kubeclient_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/switchback-dev/switchback/api/v1beta2"
	"github.com/switchback-dev/switchback/kubeclient"
	"github.com/switchback-dev/switchback/test/harness/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

var nsSeq atomic.Int64

func setup(t *testing.T) (*kubeclient.Client, string, context.Context) {
	env := testenv.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	cs, err := kubernetes.NewForConfig(env.Config)
	require.NoError(t, err)
	ns := fmt.Sprintf("kc-%d", nsSeq.Add(1))
	_, err = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	c, err := kubeclient.New(env.Config)
	require.NoError(t, err)
	return c, ns, ctx
}

func TestManagerCRUDAndStatus(t *testing.T) {
	c, ns, ctx := setup(t)
	mgrs := c.Managers(ns)
	created, err := mgrs.Create(ctx, &v1beta2.DataEngineUpgradeManager{
		ObjectMeta: metav1.ObjectMeta{Name: "up"},
		Spec:       v1beta2.DataEngineUpgradeManagerSpec{DataEngine: v1beta2.DataEngineTypeV2, Nodes: []string{"n1", "n2"}},
	})
	require.NoError(t, err)
	assert.NotEmpty(t, created.UID)

	created.Status.State = v1beta2.UpgradeStateUpgrading
	created.Status.StreamSequence = 42
	updated, err := mgrs.UpdateStatus(ctx, created)
	require.NoError(t, err)
	assert.Equal(t, uint64(42), updated.Status.StreamSequence)

	list, err := c.Managers("").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	assert.NotEmpty(t, list.Items)

	patched, err := mgrs.Patch(ctx, "up", types.MergePatchType, []byte(`{"metadata":{"finalizers":["`+v1beta2.CancelFinalizer+`"]}}`), "")
	require.NoError(t, err)
	assert.Equal(t, []string{v1beta2.CancelFinalizer}, patched.Finalizers)
	patched.Finalizers = nil
	_, err = mgrs.Update(ctx, patched)
	require.NoError(t, err)

	require.NoError(t, mgrs.Delete(ctx, "up", metav1.DeleteOptions{}))
	_, err = mgrs.Get(ctx, "up")
	assert.True(t, apierrors.IsNotFound(err), "got %v", err)
}

func TestInformerSeesChanges(t *testing.T) {
	c, ns, ctx := setup(t)
	inf := c.Managers(ns).Informer(0)
	seen := make(chan string, 10)
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
		seen <- obj.(*v1beta2.DataEngineUpgradeManager).Name
	}})
	require.NoError(t, err)
	go inf.RunWithContext(ctx)
	require.True(t, cache.WaitForCacheSync(ctx.Done(), inf.HasSynced))
	_, err = c.Managers(ns).Create(ctx, &v1beta2.DataEngineUpgradeManager{
		ObjectMeta: metav1.ObjectMeta{Name: "watched"},
		Spec:       v1beta2.DataEngineUpgradeManagerSpec{DataEngine: v1beta2.DataEngineTypeV2},
	})
	require.NoError(t, err)
	select {
	case name := <-seen:
		assert.Equal(t, "watched", name)
	case <-ctx.Done():
		t.Fatal("informer did not see the new manager")
	}
}
