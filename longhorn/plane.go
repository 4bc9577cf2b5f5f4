package longhorn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/switchback-dev/switchback/dataplane"
)

// DefaultNamespace is where Longhorn is usually installed.
const DefaultNamespace = "longhorn-system"

// Options tune a Plane. The zero value is usable.
type Options struct {
	// Namespace of Longhorn's objects; default DefaultNamespace.
	Namespace string
	// Log receives the actions taken (Info) and cache waits that timed out
	// (Debug); default: discarded.
	Log *slog.Logger
	// WriteSyncTimeout bounds how long an action waits for the informer
	// cache to show its own write (default 2s). A timeout is not an error.
	WriteSyncTimeout time.Duration
	// SyncTimeout bounds the initial cache sync in New (default 2m).
	SyncTimeout time.Duration
	// Now stamps replicas failed on purpose (spec.failedAt); default time.Now.
	Now func() time.Time
	// Platform is the Longhorn the plane drives, as ReadSurface and
	// Surface.Platform found it; New requires it, NewForConfig detects it.
	Platform dataplane.Platform
	// AllowExperimental lets NewForConfig accept an experimental profile.
	AllowExperimental bool
}

// Plane is a dataplane.DataPlane over Longhorn's custom resources. Reads are
// served from informer caches (the engine reads at every poll of every
// step); actions read the object fresh from the apiserver, decide, patch,
// and wait until the cache shows the result. It is safe for concurrent use.
type Plane struct {
	dyn  dynamic.Interface
	ns   string
	log  *slog.Logger
	opts Options

	lhNodes, kubeNodes, volumes, engines, frontends, replicas, ims, settings, events, managers, snapshots *watched
	// changes signals every informer event (Changed).
	changes dataplane.Changes
}

var _ dataplane.DataPlane = (*Plane)(nil)

// NewForConfig finds out which Longhorn cfg's cluster runs (ReadSurface,
// Surface.Platform with opts.AllowExperimental) and returns New's plane for
// it. An unsupported Longhorn fails here, naming its version and what it
// lacks.
func NewForConfig(ctx context.Context, cfg *rest.Config, opts Options) (*Plane, error) {
	c := rest.CopyConfig(cfg)
	if c.UserAgent == "" {
		c.UserAgent = "switchback-longhorn"
	}
	dyn, err := dynamic.NewForConfig(c)
	if err != nil {
		return nil, fmt.Errorf("longhorn: %w", err)
	}
	disc, err := discovery.NewDiscoveryClientForConfig(c)
	if err != nil {
		return nil, fmt.Errorf("longhorn: %w", err)
	}
	if opts.Namespace == "" {
		opts.Namespace = DefaultNamespace
	}
	surface, err := ReadSurface(ctx, disc, dyn, opts.Namespace)
	if err != nil {
		return nil, err
	}
	if opts.Platform, err = surface.Platform(opts.AllowExperimental); err != nil {
		return nil, fmt.Errorf("longhorn: %w", err)
	}
	return New(ctx, dyn, opts)
}

// New checks that every resource the adapter reads can be listed (so a
// missing CRD or RBAC rule fails here, by name, rather than as a cache that
// never syncs), starts the informers, and returns once their caches are
// synced. The informers stop when ctx ends; the Plane must not be used
// after that.
func New(ctx context.Context, dyn dynamic.Interface, opts Options) (*Plane, error) {
	if dyn == nil {
		return nil, errors.New("longhorn: nil dynamic client")
	}
	if !opts.Platform.Profile.Valid() {
		return nil, fmt.Errorf("longhorn: Options.Platform has no known profile (%q): detect it with ReadSurface, or use NewForConfig", opts.Platform.Profile)
	}
	if opts.Namespace == "" {
		opts.Namespace = DefaultNamespace
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.WriteSyncTimeout <= 0 {
		opts.WriteSyncTimeout = 2 * time.Second
	}
	if opts.SyncTimeout <= 0 {
		opts.SyncTimeout = 2 * time.Minute
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	p := &Plane{dyn: dyn, ns: opts.Namespace, log: opts.Log.With("component", "longhorn"), opts: opts}
	if err := p.checkAccess(ctx); err != nil {
		return nil, err
	}
	if err := p.buildInformers(); err != nil {
		return nil, fmt.Errorf("longhorn: %w", err)
	}
	if err := p.signalChanges(); err != nil {
		return nil, fmt.Errorf("longhorn: %w", err)
	}
	all := p.all()
	synced := make([]cache.InformerSynced, 0, len(all))
	for _, w := range all {
		go w.inf.RunWithContext(ctx)
		synced = append(synced, w.inf.HasSynced)
	}
	syncCtx, cancel := context.WithTimeout(ctx, opts.SyncTimeout)
	defer cancel()
	if !cache.WaitForCacheSync(syncCtx.Done(), synced...) {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("longhorn: cache sync: %w", err)
		}
		return nil, fmt.Errorf("longhorn: caches of namespace %s not synced within %s", p.ns, opts.SyncTimeout)
	}
	p.log.Info("longhorn data plane ready", "namespace", p.ns, "profile", opts.Platform.Profile, "version", opts.Platform.LonghornVersion)
	return p, nil
}

func (p *Plane) all() []*watched {
	return []*watched{p.lhNodes, p.kubeNodes, p.volumes, p.engines, p.frontends, p.replicas, p.ims, p.settings, p.events, p.managers, p.snapshots}
}

// checkAccess lists one object of each resource read through a cache.
func (p *Plane) checkAccess(ctx context.Context) error {
	for _, gvr := range []schema.GroupVersionResource{
		NodesResource, VolumesResource, EnginesResource, EngineFrontendsResource, ReplicasResource,
		InstanceManagersResource, SettingsResource, KubeNodesResource, EventsResource, PodsResource, SnapshotsResource,
	} {
		if _, err := p.ri(gvr).List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
			return fmt.Errorf("longhorn: list %s in %s (is Longhorn installed, and does RBAC allow it?): %w",
				resourceName(gvr), p.nsOf(gvr), err)
		}
	}
	return nil
}

func (p *Plane) buildInformers() error {
	var err error
	build := func(w **watched, f func() (*watched, error)) {
		if err == nil {
			*w, err = f()
		}
	}
	build(&p.lhNodes, func() (*watched, error) {
		return newWatched[LonghornNode](p.dyn, NodesResource, p.ns, nil, nil)
	})
	build(&p.kubeNodes, func() (*watched, error) {
		return newWatched[KubeNode](p.dyn, KubeNodesResource, "", nil, nil)
	})
	build(&p.volumes, func() (*watched, error) {
		return newWatched[Volume](p.dyn, VolumesResource, p.ns, cache.Indexers{byNode: volumeNodes, byHost: volumeHost}, nil)
	})
	build(&p.engines, func() (*watched, error) {
		return newWatched[Engine](p.dyn, EnginesResource, p.ns, cache.Indexers{byVolume: engineVolume}, nil)
	})
	build(&p.frontends, func() (*watched, error) {
		return newWatched[EngineFrontend](p.dyn, EngineFrontendsResource, p.ns, cache.Indexers{byVolume: frontendVolume}, nil)
	})
	// Only the Events Longhorn records on EngineFrontends are read: a failed
	// switch-over is reported nowhere else.
	build(&p.events, func() (*watched, error) {
		return newWatched[Event](p.dyn, EventsResource, p.ns, cache.Indexers{byObject: eventObject},
			func(o *metav1.ListOptions) { o.FieldSelector = "involvedObject.kind=" + KindEngineFrontend })
	})
	build(&p.replicas, func() (*watched, error) {
		return newWatched[Replica](p.dyn, ReplicasResource, p.ns, cache.Indexers{byNode: replicaNode, byVolume: replicaVolume}, nil)
	})
	build(&p.ims, func() (*watched, error) {
		return newWatched[InstanceManager](p.dyn, InstanceManagersResource, p.ns, cache.Indexers{byNode: imNode}, nil)
	})
	build(&p.snapshots, func() (*watched, error) {
		return newWatched[Snapshot](p.dyn, SnapshotsResource, p.ns, cache.Indexers{byVolume: snapshotVolume}, nil)
	})
	build(&p.settings, func() (*watched, error) {
		return newWatched[Setting](p.dyn, SettingsResource, p.ns, nil, nil)
	})
	// Only the longhorn-manager pods: which --instance-manager-image each
	// node's manager runs with.
	build(&p.managers, func() (*watched, error) {
		return newWatched[Pod](p.dyn, PodsResource, p.ns, cache.Indexers{byNode: podNode},
			func(o *metav1.ListOptions) { o.LabelSelector = ManagerPodLabel + "=" + ManagerPodLabelValue })
	})
	return err
}

// nsOf is the namespace of a resource: Longhorn's, or none for core Nodes.
func (p *Plane) nsOf(gvr schema.GroupVersionResource) string {
	if gvr == KubeNodesResource {
		return ""
	}
	return p.ns
}

// ri is the dynamic client of a resource.
func (p *Plane) ri(gvr schema.GroupVersionResource) dynamic.ResourceInterface {
	if ns := p.nsOf(gvr); ns != "" {
		return p.dyn.Resource(gvr).Namespace(ns)
	}
	return p.dyn.Resource(gvr)
}

// Namespace returns the namespace of Longhorn's objects.
func (p *Plane) Namespace() string { return p.ns }

// Platform implements dataplane.Reader: the Longhorn the plane was built for.
func (p *Plane) Platform(ctx context.Context) (dataplane.Platform, error) {
	return p.opts.Platform, ctx.Err()
}
