package longhorn

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"github.com/switchback-dev/switchback/dataplane"
)

// Index names of the informer caches.
const (
	byNode   = "node"   // volumes (attached/engine node), replicas, IMs
	byVolume = "volume" // replicas, engines, engine frontends
	byHost   = "host"   // volumes, by dataplane.Volume.TargetHost
	byObject = "object" // events, by the name of their object
)

// watched is one resource mirrored by an informer. The store holds the typed
// objects of types.go (converted once, on arrival, by a transform), so
// reads neither decode nor allocate unstructured maps.
type watched struct {
	gvr  schema.GroupVersionResource
	inf  cache.SharedIndexInformer
	seen *seenTracker
}

// newWatched builds the informer of gvr in namespace ("" = cluster-scoped),
// decoding objects into T (one of types.go's types), indexing them with
// indexers, and listing only what tweak selects (nil: everything).
func newWatched[T any, PT interface {
	*T
	metav1.Object
}](dyn dynamic.Interface, gvr schema.GroupVersionResource, namespace string, indexers cache.Indexers, tweak dynamicinformer.TweakListOptionsFunc) (*watched, error) {
	gi := dynamicinformer.NewFilteredDynamicInformer(dyn, gvr, namespace, 0, cache.Indexers{}, tweak)
	inf := gi.Informer()
	if err := inf.SetTransform(func(obj any) (any, error) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return obj, nil // already typed: the transform must be idempotent
		}
		out := PT(new(T))
		if err := FromUnstructured(u, out); err != nil {
			return nil, err
		}
		// Managed fields are large and never read: do not keep them.
		out.SetManagedFields(nil)
		return out, nil
	}); err != nil {
		return nil, fmt.Errorf("informer %s: %w", gvr.Resource, err)
	}
	if len(indexers) > 0 {
		if err := inf.AddIndexers(indexers); err != nil {
			return nil, fmt.Errorf("informer %s: %w", gvr.Resource, err)
		}
	}
	w := &watched{gvr: gvr, inf: inf, seen: newSeenTracker()}
	if _, err := inf.AddEventHandler(w.seen); err != nil {
		return nil, fmt.Errorf("informer %s: %w", gvr.Resource, err)
	}
	return w, nil
}

// get returns the cached object of key ("ns/name" or "name"), typed.
func get[T any](w *watched, key string) (*T, bool) {
	obj, ok, err := w.inf.GetIndexer().GetByKey(key)
	if err != nil || !ok {
		return nil, false
	}
	t, ok := obj.(*T)
	return t, ok
}

// list returns every cached object, typed, in no particular order.
func list[T any](w *watched) []*T {
	return typed[T](w.inf.GetIndexer().List())
}

// indexed returns the cached objects whose index value is value.
func indexed[T any](w *watched, index, value string) []*T {
	objs, err := w.inf.GetIndexer().ByIndex(index, value)
	if err != nil {
		// Only an unknown index name errors: a programming error.
		panic(fmt.Sprintf("longhorn: index %s of %s: %v", index, w.gvr.Resource, err))
	}
	return typed[T](objs)
}

func typed[T any](objs []any) []*T {
	out := make([]*T, 0, len(objs))
	for _, o := range objs {
		if t, ok := o.(*T); ok {
			out = append(out, t)
		}
	}
	return out
}

// Index functions. Each returns the distinct non-empty values.
func volumeNodes(obj any) ([]string, error) {
	v, ok := obj.(*Volume)
	if !ok {
		return nil, nil
	}
	return distinct(v.Spec.NodeID, v.Status.CurrentNodeID, v.Status.CurrentEngineNodeID), nil
}

// volumeHost indexes an attached v2 volume under the node serving its
// target: dataplane.Volume.TargetHost of the fields toVolume reads for it,
// without converting the replicas and engines too (an engine not reported
// yet is taken to be on the attached node).
func volumeHost(obj any) ([]string, error) {
	v, ok := obj.(*Volume)
	if !ok {
		return nil, nil
	}
	host := dataplane.Volume{DataEngine: dataEngineOf(v), AttachedNode: attachedNode(v), TargetNode: targetNode(v, nil)}.TargetHost()
	if host == "" {
		return nil, nil
	}
	return []string{host}, nil
}

func replicaNode(obj any) ([]string, error) {
	if r, ok := obj.(*Replica); ok {
		return distinct(r.Spec.NodeID), nil
	}
	return nil, nil
}

func replicaVolume(obj any) ([]string, error) {
	if r, ok := obj.(*Replica); ok {
		return distinct(r.Spec.VolumeName), nil
	}
	return nil, nil
}

func engineVolume(obj any) ([]string, error) {
	if e, ok := obj.(*Engine); ok {
		return distinct(e.Spec.VolumeName), nil
	}
	return nil, nil
}

func frontendVolume(obj any) ([]string, error) {
	if ef, ok := obj.(*EngineFrontend); ok {
		return distinct(ef.Spec.VolumeName), nil
	}
	return nil, nil
}

func eventObject(obj any) ([]string, error) {
	if e, ok := obj.(*Event); ok {
		return distinct(e.InvolvedObject.Name), nil
	}
	return nil, nil
}

func podNode(obj any) ([]string, error) {
	if p, ok := obj.(*Pod); ok {
		return distinct(p.Spec.NodeName), nil
	}
	return nil, nil
}

func imNode(obj any) ([]string, error) {
	if im, ok := obj.(*InstanceManager); ok {
		return distinct(im.Spec.NodeID), nil
	}
	return nil, nil
}

func distinct(values ...string) []string {
	out := make([]string, 0, len(values))
	for _, v := range values {
		if v != "" && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

// seenTracker remembers the last resourceVersions the cache saw of each
// object and wakes waiters on every event. An action waits on it so that
// the cache shows its own write before the caller reads again: node steps
// re-observe right after acting, and reading a stale cache would make them
// repeat the action in a tight loop until the watch caught up.
type seenTracker struct {
	mu      sync.Mutex
	rvs     map[string][]string // key → recent resourceVersions, newest last
	changed chan struct{}       // closed and replaced on every event
}

// seenDepth bounds the versions kept per object: a waiter looks for a
// version written a moment ago, so a few suffice.
const seenDepth = 8

func newSeenTracker() *seenTracker {
	return &seenTracker{rvs: map[string][]string{}, changed: make(chan struct{})}
}

func (s *seenTracker) record(obj any, deleted bool) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	m, ok := obj.(metav1.Object)
	if !ok {
		return
	}
	key := m.GetName()
	if ns := m.GetNamespace(); ns != "" {
		key = ns + "/" + key
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if deleted {
		delete(s.rvs, key)
	} else {
		rvs := append(s.rvs[key], m.GetResourceVersion())
		if len(rvs) > seenDepth {
			rvs = rvs[len(rvs)-seenDepth:]
		}
		s.rvs[key] = rvs
	}
	close(s.changed)
	s.changed = make(chan struct{})
}

// OnAdd implements cache.ResourceEventHandler.
func (s *seenTracker) OnAdd(obj any, _ bool) { s.record(obj, false) }

// OnUpdate implements cache.ResourceEventHandler.
func (s *seenTracker) OnUpdate(_, obj any) { s.record(obj, false) }

// OnDelete implements cache.ResourceEventHandler.
func (s *seenTracker) OnDelete(obj any) { s.record(obj, true) }

// wait returns once the cache has seen resourceVersion rv of key, or, with
// rv "", once key is gone from it; or when timeout or ctx ends (then the
// caller goes on: a later read is merely stale, and idempotent actions
// cope with that).
func (s *seenTracker) wait(ctx context.Context, key, rv string, timeout time.Duration) bool {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		s.mu.Lock()
		rvs, present := s.rvs[key]
		done := (rv == "" && !present) || (rv != "" && slices.Contains(rvs, rv))
		ch := s.changed
		s.mu.Unlock()
		if done {
			return true
		}
		select {
		case <-ch:
		case <-timer.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// key is the cache key of a namespaced or cluster-scoped object.
func key(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// resourceName renders "volumes.longhorn.io" for messages.
func resourceName(gvr schema.GroupVersionResource) string {
	return strings.TrimSuffix(gvr.Resource+"."+gvr.Group, ".")
}
