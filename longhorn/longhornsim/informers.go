package longhornsim

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"github.com/switchback-dev/switchback/longhorn"
)

// watchedKind is one resource the manager watches, its objects decoded
// once on arrival into the adapter's typed structs (longhorn/types.go), so
// both sides read the same fields the same way.
type watchedKind struct {
	gvr schema.GroupVersionResource
	inf cache.SharedIndexInformer
}

func newWatchedKind[T any, PT interface {
	*T
	metav1.Object
}](dyn dynamic.Interface, gvr schema.GroupVersionResource, namespace string, tweak dynamicinformer.TweakListOptionsFunc, kick func()) (*watchedKind, error) {
	inf := dynamicinformer.NewFilteredDynamicInformer(dyn, gvr, namespace, 0, cache.Indexers{}, tweak).Informer()
	if err := inf.SetTransform(func(obj any) (any, error) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return obj, nil
		}
		out := PT(new(T))
		if err := longhorn.FromUnstructured(u, out); err != nil {
			return nil, err
		}
		out.SetManagedFields(nil)
		return out, nil
	}); err != nil {
		return nil, fmt.Errorf("informer %s: %w", gvr.Resource, err)
	}
	// Any change may be an action to mirror: run a round.
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { kick() },
		UpdateFunc: func(any, any) { kick() },
		DeleteFunc: func(any) { kick() },
	}); err != nil {
		return nil, fmt.Errorf("informer %s: %w", gvr.Resource, err)
	}
	return &watchedKind{gvr: gvr, inf: inf}, nil
}

// all returns the cached objects of w, typed and sorted by name, so rounds
// are deterministic.
func all[T any, PT interface {
	*T
	metav1.Object
}](w *watchedKind) []PT {
	var out []PT
	for _, o := range w.inf.GetIndexer().List() {
		if t, ok := o.(PT); ok {
			out = append(out, t)
		}
	}
	slices.SortFunc(out, func(a, b PT) int { return strings.Compare(a.GetName(), b.GetName()) })
	return out
}

// byName returns the cached objects of w, typed, by name.
func byName[T any, PT interface {
	*T
	metav1.Object
}](w *watchedKind) map[string]PT {
	out := map[string]PT{}
	for _, o := range all[T, PT](w) {
		out[o.GetName()] = o
	}
	return out
}
