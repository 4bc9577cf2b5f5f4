// Package kubeclient is a small typed client for Switchback's two custom
// resources, built on client-go's REST client and the api/v1beta2 scheme (no
// generated clientset), plus informers over it.
package kubeclient

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
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

// Client reaches the longhorn.io/v1beta2 resources.
type Client struct {
	rc rest.Interface
}

// New returns a client for cfg.
func New(cfg *rest.Config) (*Client, error) {
	c := rest.CopyConfig(cfg)
	c.GroupVersion = &v1beta2.SchemeGroupVersion
	c.APIPath = "/apis"
	c.ContentType = runtime.ContentTypeJSON
	c.NegotiatedSerializer = serializer.NewCodecFactory(Scheme).WithoutConversion()
	if c.UserAgent == "" {
		c.UserAgent = "switchback"
	}
	rc, err := rest.RESTClientFor(c)
	if err != nil {
		return nil, fmt.Errorf("kubeclient: %w", err)
	}
	return &Client{rc: rc}, nil
}

// Managers is the DataEngineUpgradeManager resource in ns ("" = all namespaces, for List/Watch).
func (c *Client) Managers(ns string) *Resource[*v1beta2.DataEngineUpgradeManager, *v1beta2.DataEngineUpgradeManagerList] {
	return &Resource[*v1beta2.DataEngineUpgradeManager, *v1beta2.DataEngineUpgradeManagerList]{
		rc: c.rc, ns: ns, resource: v1beta2.DataEngineUpgradeManagerResource,
		newObj:  func() *v1beta2.DataEngineUpgradeManager { return &v1beta2.DataEngineUpgradeManager{} },
		newList: func() *v1beta2.DataEngineUpgradeManagerList { return &v1beta2.DataEngineUpgradeManagerList{} },
	}
}

// NodeUpgrades is the NodeDataEngineUpgrade resource in ns.
func (c *Client) NodeUpgrades(ns string) *Resource[*v1beta2.NodeDataEngineUpgrade, *v1beta2.NodeDataEngineUpgradeList] {
	return &Resource[*v1beta2.NodeDataEngineUpgrade, *v1beta2.NodeDataEngineUpgradeList]{
		rc: c.rc, ns: ns, resource: v1beta2.NodeDataEngineUpgradeResource,
		newObj:  func() *v1beta2.NodeDataEngineUpgrade { return &v1beta2.NodeDataEngineUpgrade{} },
		newList: func() *v1beta2.NodeDataEngineUpgradeList { return &v1beta2.NodeDataEngineUpgradeList{} },
	}
}

// Resource is one namespaced resource of the group, typed by its object and
// list types.
type Resource[T runtime.Object, L runtime.Object] struct {
	rc       rest.Interface
	ns       string
	resource string
	newObj   func() T
	newList  func() L
}

// Get reads one object.
func (r *Resource[T, L]) Get(ctx context.Context, name string) (T, error) {
	out := r.newObj()
	err := r.rc.Get().Namespace(r.ns).Resource(r.resource).Name(name).Do(ctx).Into(out)
	return out, err
}

// List lists objects.
func (r *Resource[T, L]) List(ctx context.Context, opts metav1.ListOptions) (L, error) {
	out := r.newList()
	err := r.rc.Get().NamespaceIfScoped(r.ns, r.ns != "").Resource(r.resource).
		VersionedParams(&opts, metav1.ParameterCodec).Do(ctx).Into(out)
	return out, err
}

// Watch watches objects.
func (r *Resource[T, L]) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return r.rc.Get().NamespaceIfScoped(r.ns, r.ns != "").Resource(r.resource).
		VersionedParams(&opts, metav1.ParameterCodec).Watch(ctx)
}

// Create creates obj.
func (r *Resource[T, L]) Create(ctx context.Context, obj T) (T, error) {
	out := r.newObj()
	err := r.rc.Post().Namespace(r.ns).Resource(r.resource).Body(obj).Do(ctx).Into(out)
	return out, err
}

// Update replaces obj (spec and metadata; status is ignored by the server).
func (r *Resource[T, L]) Update(ctx context.Context, obj T) (T, error) {
	out := r.newObj()
	err := r.rc.Put().Namespace(r.ns).Resource(r.resource).Name(nameOf(obj)).Body(obj).Do(ctx).Into(out)
	return out, err
}

// UpdateStatus replaces obj's status through the status subresource.
func (r *Resource[T, L]) UpdateStatus(ctx context.Context, obj T) (T, error) {
	out := r.newObj()
	err := r.rc.Put().Namespace(r.ns).Resource(r.resource).Name(nameOf(obj)).SubResource("status").Body(obj).Do(ctx).Into(out)
	return out, err
}

// Patch patches the object (subresource "" or "status").
func (r *Resource[T, L]) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, subresource string) (T, error) {
	out := r.newObj()
	req := r.rc.Patch(pt).Namespace(r.ns).Resource(r.resource).Name(name)
	if subresource != "" {
		req = req.SubResource(subresource)
	}
	err := req.Body(data).Do(ctx).Into(out)
	return out, err
}

// Delete deletes one object.
func (r *Resource[T, L]) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	return r.rc.Delete().Namespace(r.ns).Resource(r.resource).Name(name).Body(&opts).Do(ctx).Error()
}

// Informer returns a shared informer over the resource (resync 0: events only).
func (r *Resource[T, L]) Informer(resync time.Duration) cache.SharedIndexInformer {
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return r.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return r.Watch(ctx, opts)
		},
	}
	return cache.NewSharedIndexInformer(lw, r.newObj(), resync, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
}

func nameOf(obj runtime.Object) string {
	if m, ok := obj.(metav1.Object); ok {
		return m.GetName()
	}
	return ""
}
