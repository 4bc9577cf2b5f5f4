package kubeclient

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"

	"github.com/switchback-dev/switchback/api/v1beta2"
)

// The informers LIST, then WATCH: they never ask for a streamed initial list
// (watch-list), whose end the apiserver may announce a second late (see
// listThenWatch), even over a client that does not say it cannot stream.
func TestInformerListsRatherThanStreams(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	base := NewFake()
	_, err := base.Managers("ns").Create(ctx, &v1beta2.DataEngineUpgradeManager{ObjectMeta: metav1.ObjectMeta{Name: "up", UID: "uid-1"}})
	require.NoError(t, err)
	var streamed atomic.Bool
	inf := NewForDynamic(streamRecorder{base.dyn, &streamed}).Managers("ns").Informer(0)
	go inf.RunWithContext(ctx)
	wait, stop := context.WithTimeout(ctx, 10*time.Second)
	defer stop()
	require.True(t, cache.WaitFor(wait, "", inf.HasSyncedChecker()), "synced")
	_, exists, err := inf.GetStore().GetByKey("ns/up")
	require.NoError(t, err)
	assert.True(t, exists, "listed")
	assert.False(t, streamed.Load(), "a watch asked for the initial list")
}

// streamRecorder is a dynamic client that records a watch asking for a
// streamed initial list (SendInitialEvents).
type streamRecorder struct {
	dynamic.Interface
	streamed *atomic.Bool
}

func (d streamRecorder) Resource(gvr schema.GroupVersionResource) dynamic.NamespaceableResourceInterface {
	return nsRecorder{d.Interface.Resource(gvr), d.streamed}
}

type nsRecorder struct {
	dynamic.NamespaceableResourceInterface
	streamed *atomic.Bool
}

func (r nsRecorder) Namespace(ns string) dynamic.ResourceInterface {
	return watchRecorder{r.NamespaceableResourceInterface.Namespace(ns), r.streamed}
}

type watchRecorder struct {
	dynamic.ResourceInterface
	streamed *atomic.Bool
}

func (r watchRecorder) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	if opts.SendInitialEvents != nil && *opts.SendInitialEvents {
		r.streamed.Store(true)
	}
	return r.ResourceInterface.Watch(ctx, opts)
}
