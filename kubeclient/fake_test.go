package kubeclient_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/switchback-dev/switchback/api/v1beta2"
	"github.com/switchback-dev/switchback/kubeclient"
)

// The in-memory client behaves like the real one for what the controller
// uses (the demo runs on it).
func TestFakeClient(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := kubeclient.NewFake()
	mgrs := c.Managers("demo")
	inf := mgrs.Informer(0)
	added := make(chan struct{}, 1)
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(any) { added <- struct{}{} }})
	require.NoError(t, err)
	go inf.RunWithContext(ctx)
	require.True(t, cache.WaitForCacheSync(ctx.Done(), inf.HasSynced))

	m, err := mgrs.Create(ctx, &v1beta2.DataEngineUpgradeManager{
		ObjectMeta: metav1.ObjectMeta{Name: "up", UID: "uid-1", Generation: 1},
		Spec:       v1beta2.DataEngineUpgradeManagerSpec{DataEngine: v1beta2.DataEngineTypeV2},
	})
	require.NoError(t, err)
	select {
	case <-added:
	case <-ctx.Done():
		t.Fatal("informer did not see the manager")
	}
	m.Status.State = v1beta2.UpgradeStateCompleted
	_, err = mgrs.UpdateStatus(ctx, m)
	require.NoError(t, err)
	got, err := mgrs.Get(ctx, "up")
	require.NoError(t, err)
	assert.Equal(t, v1beta2.UpgradeStateCompleted, got.Status.State)
	assert.Equal(t, "uid-1", string(got.UID))
	list, err := c.Managers("").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	assert.Len(t, list.Items, 1)
}
