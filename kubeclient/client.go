// Package kubeclient is a small typed client for Switchback's two custom
// resources over client-go's dynamic client (no generated clientset), plus
// informers over it. Being dynamic underneath, the same code runs against a
// real apiserver and against client-go's in-memory fake (the demo).
package kubeclient

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/switchback-dev/switchback/api/v1beta2"
)

// Scheme knows the built-in kinds and Switchback's.
var Scheme = runtime.NewScheme()

func init() {
	if err := scheme.AddToScheme(Scheme); err != nil {
		panic(err)
	}
	if err := v1beta2.AddToScheme(Scheme); err != nil {
		panic(err)
	}
}

// Resources of the group.
var (
	ManagersResource     = v1beta2.SchemeGroupVersion.WithResource(v1beta2.DataEngineUpgradeManagerResource)
	NodeUpgradesResource = v1beta2.SchemeGroupVersion.WithResource(v1beta2.NodeDataEngineUpgradeResource)
)

// Client reaches the longhorn.io/v1beta2 resources.
type Client struct {
	dyn dynamic.Interface
	// served runs after every call; see NewFake.
	served func()
}

// New returns a client for cfg.
func New(cfg *rest.Config) (*Client, error) {
	c := rest.CopyConfig(cfg)
	if c.UserAgent == "" {
		c.UserAgent = "switchback"
	}
	dyn, err := dynamic.NewForConfig(c)
	if err != nil {
		return nil, fmt.Errorf("kubeclient: %w", err)
	}
	return &Client{dyn: dyn}, nil
}

// NewForDynamic wraps a dynamic client.
func NewForDynamic(dyn dynamic.Interface) *Client { return &Client{dyn: dyn} }

// NewFake returns a client over an in-memory API holding objects (given as
// *unstructured.Unstructured): what the
// demo runs on when no cluster is given. It does not enforce what only a
// real apiserver does (UIDs, generations, finalizers, CEL, the status
// subresource's separation): callers set UIDs themselves.
func NewFake(objects ...runtime.Object) *Client {
	lists := map[schema.GroupVersionResource]string{
		ManagersResource:     "DataEngineUpgradeManagerList",
		NodeUpgradesResource: "NodeDataEngineUpgradeList",
	}
	// An empty scheme: the fake then keeps every object unstructured, as a
	// real dynamic client sees them (with typed kinds it would try, and fail,
	// to put unstructured items into typed lists).
	fake := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), lists, objects...)
	// The fake records a deep copy of every call it serves, for tests'
	// assertions, and never forgets one: the projector's status writes made
	// that most of the demo's heap (hack/benchreport/notes.md). Nothing reads
	// the record here, so each call's is dropped once it returns.
	return &Client{dyn: fake, served: fake.ClearActions}
}

// Managers is the DataEngineUpgradeManager resource in ns ("" = all namespaces, for List/Watch).
func (c *Client) Managers(ns string) *Resource[*v1beta2.DataEngineUpgradeManager, *v1beta2.DataEngineUpgradeManagerList] {
	return &Resource[*v1beta2.DataEngineUpgradeManager, *v1beta2.DataEngineUpgradeManagerList]{
		dyn: c.dyn, ri: c.dyn.Resource(ManagersResource).Namespace(ns), served: c.served,
		kind:    "DataEngineUpgradeManager",
		newObj:  func() *v1beta2.DataEngineUpgradeManager { return &v1beta2.DataEngineUpgradeManager{} },
		newList: func() *v1beta2.DataEngineUpgradeManagerList { return &v1beta2.DataEngineUpgradeManagerList{} },
	}
}

// NodeUpgrades is the NodeDataEngineUpgrade resource in ns.
func (c *Client) NodeUpgrades(ns string) *Resource[*v1beta2.NodeDataEngineUpgrade, *v1beta2.NodeDataEngineUpgradeList] {
	return &Resource[*v1beta2.NodeDataEngineUpgrade, *v1beta2.NodeDataEngineUpgradeList]{
		dyn: c.dyn, ri: c.dyn.Resource(NodeUpgradesResource).Namespace(ns), served: c.served,
		kind:    "NodeDataEngineUpgrade",
		newObj:  func() *v1beta2.NodeDataEngineUpgrade { return &v1beta2.NodeDataEngineUpgrade{} },
		newList: func() *v1beta2.NodeDataEngineUpgradeList { return &v1beta2.NodeDataEngineUpgradeList{} },
	}
}

// Resource is one namespaced resource of the group, typed by its object and
// list types.
type Resource[T runtime.Object, L runtime.Object] struct {
	dyn     dynamic.Interface
	ri      dynamic.ResourceInterface
	served  func()
	kind    string
	newObj  func() T
	newList func() L
}

// done is deferred by every call of the resource (Client.served).
func (r *Resource[T, L]) done() {
	if r.served != nil {
		r.served()
	}
}

// Get reads one object.
func (r *Resource[T, L]) Get(ctx context.Context, name string) (T, error) {
	defer r.done()
	u, err := r.ri.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return r.newObj(), err
	}
	return r.typed(u)
}

// List lists objects.
func (r *Resource[T, L]) List(ctx context.Context, opts metav1.ListOptions) (L, error) {
	defer r.done()
	out := r.newList()
	ul, err := r.ri.List(ctx, opts)
	if err != nil {
		return out, err
	}
	items := make([]runtime.Object, 0, len(ul.Items))
	for i := range ul.Items {
		obj, err := r.typed(&ul.Items[i])
		if err != nil {
			return out, err
		}
		items = append(items, obj)
	}
	if err := meta.SetList(out, items); err != nil {
		return out, fmt.Errorf("kubeclient: %s list: %w", r.kind, err)
	}
	if lm, err := meta.ListAccessor(out); err == nil {
		lm.SetResourceVersion(ul.GetResourceVersion())
		lm.SetContinue(ul.GetContinue())
	}
	return out, nil
}

// Watch watches objects; the events carry typed objects.
func (r *Resource[T, L]) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	defer r.done()
	w, err := r.ri.Watch(ctx, opts)
	if err != nil {
		return nil, err
	}
	return watch.Filter(w, func(e watch.Event) (watch.Event, bool) {
		if u, ok := e.Object.(*unstructured.Unstructured); ok {
			if obj, err := r.typed(u); err == nil {
				e.Object = obj
			}
		}
		return e, true
	}), nil
}

// Create creates obj.
func (r *Resource[T, L]) Create(ctx context.Context, obj T) (T, error) {
	defer r.done()
	u, err := r.unstructured(obj)
	if err != nil {
		return obj, err
	}
	out, err := r.ri.Create(ctx, u, metav1.CreateOptions{})
	if err != nil {
		return obj, err
	}
	return r.typed(out)
}

// Update replaces obj (spec and metadata; a real apiserver ignores status).
func (r *Resource[T, L]) Update(ctx context.Context, obj T) (T, error) {
	defer r.done()
	u, err := r.unstructured(obj)
	if err != nil {
		return obj, err
	}
	out, err := r.ri.Update(ctx, u, metav1.UpdateOptions{})
	if err != nil {
		return obj, err
	}
	return r.typed(out)
}

// UpdateStatus replaces obj's status through the status subresource.
func (r *Resource[T, L]) UpdateStatus(ctx context.Context, obj T) (T, error) {
	defer r.done()
	u, err := r.unstructured(obj)
	if err != nil {
		return obj, err
	}
	out, err := r.ri.UpdateStatus(ctx, u, metav1.UpdateOptions{})
	if err != nil {
		return obj, err
	}
	return r.typed(out)
}

// Patch patches the object (subresource "" or "status").
func (r *Resource[T, L]) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, subresource string) (T, error) {
	defer r.done()
	var subs []string
	if subresource != "" {
		subs = []string{subresource}
	}
	out, err := r.ri.Patch(ctx, name, pt, data, metav1.PatchOptions{}, subs...)
	if err != nil {
		return r.newObj(), err
	}
	return r.typed(out)
}

// Delete deletes one object.
func (r *Resource[T, L]) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	defer r.done()
	return r.ri.Delete(ctx, name, opts)
}

// Informer returns a shared informer over the resource.
func (r *Resource[T, L]) Informer(resync time.Duration) cache.SharedIndexInformer {
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return r.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return r.Watch(ctx, opts)
		},
	}
	return cache.NewSharedIndexInformer(listThenWatch{lw}, r.newObj(), resync, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
}

// listThenWatch makes the informer's reflector LIST, then WATCH from the
// list's version, instead of streaming the initial list (client-go's
// watch-list, on by default). A streamed list is complete only once the
// apiserver sends the bookmark that closes it, and that may come a second
// late: over testenv's apiserver, the first informer after its start synced
// in 1.01 s, against 10-110 ms with a LIST (2-4 ms either way after that).
// The intake takes in no manager before its informer has synced, so the
// first upgrade after a restart (perf's BenchmarkControllerResume) waited
// up to 1.1 s for it. The collections listed here are small (finished
// managers get deleted), so what watch-list saves the apiserver matters
// little; the in-memory fake cannot stream a list at all.
type listThenWatch struct{ *cache.ListWatch }

// IsWatchListSemanticsUnSupported tells the reflector not to stream the
// initial list (see listThenWatch).
func (listThenWatch) IsWatchListSemanticsUnSupported() bool { return true }

func (r *Resource[T, L]) typed(u *unstructured.Unstructured) (T, error) {
	out := r.newObj()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.UnstructuredContent(), out); err != nil {
		return out, fmt.Errorf("kubeclient: decode %s %s: %w", r.kind, u.GetName(), err)
	}
	return out, nil
}

func (r *Resource[T, L]) unstructured(obj T) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("kubeclient: encode %s: %w", r.kind, err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion(v1beta2.SchemeGroupVersion.String())
	u.SetKind(r.kind)
	return u, nil
}
