package kubeclient

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/switchback-dev/switchback/api/v1beta2"
)

// The in-memory client keeps no record of the calls it served: the fake
// under it would keep a deep copy of each for the whole run.
func TestFakeForgetsServedCalls(t *testing.T) {
	ctx := context.Background()
	c := NewFake()
	mgrs := c.Managers("demo")
	m, err := mgrs.Create(ctx, &v1beta2.DataEngineUpgradeManager{ObjectMeta: metav1.ObjectMeta{Name: "up", UID: "uid-1"}})
	require.NoError(t, err)
	for range 3 {
		m.Status.Message = "again"
		m, err = mgrs.UpdateStatus(ctx, m)
		require.NoError(t, err)
	}
	_, err = mgrs.Get(ctx, "up")
	require.NoError(t, err)
	_, err = c.NodeUpgrades("demo").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	assert.Empty(t, c.dyn.(*dynamicfake.FakeDynamicClient).Actions())
}
