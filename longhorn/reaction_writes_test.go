package longhorn_test

import (
	"context"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
)

// timedWrites is a dynamic client that remembers when its last create or
// patch was accepted by the apiserver: given to the simulated Longhorn, it
// tells BenchmarkReactionLatency when a change reached the apiserver.
type timedWrites struct {
	dynamic.Interface
	mu   sync.Mutex
	last time.Time
}

func (t *timedWrites) wrote() {
	now := time.Now()
	t.mu.Lock()
	t.last = now
	t.mu.Unlock()
}

// lastWrite is when the last write was accepted.
func (t *timedWrites) lastWrite() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.last
}

// Resource implements dynamic.Interface.
func (t *timedWrites) Resource(gvr schema.GroupVersionResource) dynamic.NamespaceableResourceInterface {
	return timedResource{t.Interface.Resource(gvr), t}
}

type timedResource struct {
	dynamic.NamespaceableResourceInterface
	t *timedWrites
}

func (r timedResource) Namespace(ns string) dynamic.ResourceInterface {
	return timedNamespaced{r.NamespaceableResourceInterface.Namespace(ns), r.t}
}

func (r timedResource) Create(ctx context.Context, u *unstructured.Unstructured, o metav1.CreateOptions, sub ...string) (*unstructured.Unstructured, error) {
	defer r.t.wrote()
	return r.NamespaceableResourceInterface.Create(ctx, u, o, sub...)
}

func (r timedResource) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, o metav1.PatchOptions, sub ...string) (*unstructured.Unstructured, error) {
	defer r.t.wrote()
	return r.NamespaceableResourceInterface.Patch(ctx, name, pt, data, o, sub...)
}

type timedNamespaced struct {
	dynamic.ResourceInterface
	t *timedWrites
}

func (r timedNamespaced) Create(ctx context.Context, u *unstructured.Unstructured, o metav1.CreateOptions, sub ...string) (*unstructured.Unstructured, error) {
	defer r.t.wrote()
	return r.ResourceInterface.Create(ctx, u, o, sub...)
}

func (r timedNamespaced) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, o metav1.PatchOptions, sub ...string) (*unstructured.Unstructured, error) {
	defer r.t.wrote()
	return r.ResourceInterface.Patch(ctx, name, pt, data, o, sub...)
}
