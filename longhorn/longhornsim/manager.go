// Package longhornsim is a simulated Longhorn manager for tests: it keeps
// Longhorn's objects (longhorn.io/v1beta2 and the Kubernetes Nodes) on a
// real apiserver in step with a sim.Sim, the model both of Switchback's data
// planes share.
//
// Each round it mirrors what others changed in the objects into simulator
// actions, the way Longhorn v1.12.1's controllers react to them (a node's
// replica scheduling, a volume's engine node, a replica failed or deleted,
// an instance manager deleted or re-imaged, a snapshot requested or
// deleted), then writes the simulator's resulting state back, like
// Longhorn's status updates: switch-overs with their second engine, the
// EngineFrontend's path switch and FailedSwitchover Events, replicas
// rebuilt, old IMs replaced once they run nothing, the IMs' instance maps,
// robustness; and what Longhorn's own instance-manager upgrader shows (its
// automatic-upgrade settings, and, once the simulator shows any, its
// upgrade control and per-node upgrades, whose CRDs only a Longhorn with
// that upgrader serves); on request, attachments as their tickets say and
// RWX volumes' share-manager pods (Options.VolumeAttachments). Status is
// written only through the /status
// subresource. The simulator's I/O checker therefore judges an upgrade
// driven through the longhorn adapter exactly as one driven through the
// simulator.
//
// Spec changes are told apart from the manager's own by metadata.generation:
// a spec the manager has not applied yet is mirrored, never overwritten, and
// the manager's own spec writes carry a resourceVersion precondition.
package longhornsim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"

	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/longhorn"
	"github.com/switchback-dev/switchback/sim"
)

// Options tune a Manager. The zero value is usable.
type Options struct {
	// Namespace of the Longhorn objects; default longhorn.DefaultNamespace.
	Namespace string
	// Log receives mirrored actions and failed writes; default: discarded.
	Log *slog.Logger
	// Interval is the longest time between rounds (rounds also run on every
	// object change and when a simulated latency ends); default 10ms.
	Interval time.Duration
	// VolumeAttachments plays Longhorn's VolumeAttachment controller
	// (attachments.go) and, for RWX volumes, its share-manager controller
	// (sharemanagers.go): each volume gets its VolumeAttachment and is
	// attached and detached as its tickets say, so a volume the simulator
	// attached with no ticket is detached in the first round. For tests
	// whose pods ask for their volumes (test/harness/kubelets).
	VolumeAttachments bool
}

// Manager is a running simulated Longhorn manager.
type Manager struct {
	dyn  dynamic.Interface
	ns   string
	sim  *sim.Sim
	log  *slog.Logger
	opts Options

	lhNodes, kubeNodes, volumes, engines, frontends, replicas, ims, settings, snapshots, managers *watchedKind
	// attachments and shareManagerPods are watched with
	// Options.VolumeAttachments only.
	attachments, shareManagerPods *watchedKind

	kick    chan struct{}
	applied map[string]int64 // resource/name → generation whose spec the simulator has
	// snapped are the snapshot objects mirrored and answered: object name →
	// the volume and snapshot, so that a deleted object is mirrored too.
	snapped map[string][2]string
	// failures and switchovers are, by volume, the last FailedSwitchover
	// text and the switch-over count Events were recorded for.
	failures    map[string]string
	switchovers map[string]uint64
	// cordons are the nodes' spec.unschedulable as last brought in line
	// with the simulator: a difference is whoever changed it since.
	cordons map[string]bool
	// multipaths are the nodes' MultipathAnnotation as last brought in
	// line, for the same purpose: a worker's report is mirrored into the
	// simulated host.
	multipaths map[string]dataplane.Multipath
	// render is how objects are rendered beyond the simulator's views.
	render render
	// upgrader is what the objects of Longhorn's own upgrader were last
	// brought in line with; nil while the simulator shows none (then their
	// CRDs, which may not be served, are not asked for).
	upgrader *upgraderObjects

	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

// Start creates the objects of the simulated cluster in namespace (which
// must exist), then keeps them in step with s until Close. It returns once
// every object exists.
func Start(ctx context.Context, dyn dynamic.Interface, s *sim.Sim, opts Options) (*Manager, error) {
	if opts.Namespace == "" {
		opts.Namespace = longhorn.DefaultNamespace
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.Interval <= 0 {
		opts.Interval = 10 * time.Millisecond
	}
	m := &Manager{
		dyn: dyn, ns: opts.Namespace, sim: s, log: opts.Log.With("component", "longhornsim"), opts: opts,
		kick: make(chan struct{}, 1), applied: map[string]int64{}, snapped: map[string][2]string{},
		failures: map[string]string{}, switchovers: map[string]uint64{}, cordons: map[string]bool{}, multipaths: map[string]dataplane.Multipath{},
		done: make(chan struct{}),
	}
	cfg := s.Config()
	m.render = render{v1120: cfg.LonghornVersion == "v1.12.0" && cfg.On(sim.RuleV1120TargetIP), storageNetwork: cfg.StorageNetwork}
	if err := m.buildInformers(); err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	informers := m.allKinds()
	synced := make([]cache.InformerSynced, 0, len(informers))
	for _, w := range informers {
		go w.inf.RunWithContext(runCtx)
		synced = append(synced, w.inf.HasSynced)
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		cancel()
		return nil, fmt.Errorf("longhornsim: caches not synced: %w", ctx.Err())
	}
	if err := m.round(ctx); err != nil {
		cancel()
		return nil, fmt.Errorf("longhornsim: create the cluster: %w", err)
	}
	go m.loop(runCtx)
	return m, nil
}

func (m *Manager) buildInformers() error {
	ns := m.ns
	own := func(o *metav1.ListOptions) { o.LabelSelector = ManagedByLabel + "=" + ns }
	kick := m.Kick
	var err error
	set := func(w **watchedKind, f func() (*watchedKind, error)) {
		if err == nil {
			*w, err = f()
		}
	}
	set(&m.lhNodes, func() (*watchedKind, error) {
		return newWatchedKind[longhorn.LonghornNode](m.dyn, longhorn.NodesResource, ns, nil, kick)
	})
	set(&m.kubeNodes, func() (*watchedKind, error) {
		return newWatchedKind[longhorn.KubeNode](m.dyn, longhorn.KubeNodesResource, "", own, kick)
	})
	set(&m.volumes, func() (*watchedKind, error) {
		return newWatchedKind[longhorn.Volume](m.dyn, longhorn.VolumesResource, ns, nil, kick)
	})
	set(&m.engines, func() (*watchedKind, error) {
		return newWatchedKind[longhorn.Engine](m.dyn, longhorn.EnginesResource, ns, nil, kick)
	})
	set(&m.frontends, func() (*watchedKind, error) {
		return newWatchedKind[longhorn.EngineFrontend](m.dyn, longhorn.EngineFrontendsResource, ns, nil, kick)
	})
	set(&m.replicas, func() (*watchedKind, error) {
		return newWatchedKind[longhorn.Replica](m.dyn, longhorn.ReplicasResource, ns, nil, kick)
	})
	set(&m.ims, func() (*watchedKind, error) {
		return newWatchedKind[longhorn.InstanceManager](m.dyn, longhorn.InstanceManagersResource, ns, nil, kick)
	})
	set(&m.settings, func() (*watchedKind, error) {
		return newWatchedKind[longhorn.Setting](m.dyn, longhorn.SettingsResource, ns, nil, kick)
	})
	set(&m.snapshots, func() (*watchedKind, error) {
		return newWatchedKind[longhorn.Snapshot](m.dyn, longhorn.SnapshotsResource, ns, nil, kick)
	})
	set(&m.managers, func() (*watchedKind, error) {
		return newWatchedKind[longhorn.Pod](m.dyn, longhorn.PodsResource, ns, func(o *metav1.ListOptions) {
			o.LabelSelector = longhorn.ManagerPodLabel + "=" + longhorn.ManagerPodLabelValue
		}, kick)
	})
	if m.opts.VolumeAttachments {
		set(&m.attachments, func() (*watchedKind, error) {
			return newWatchedKind[longhorn.VolumeAttachment](m.dyn, longhorn.VolumeAttachmentsResource, ns, nil, kick)
		})
		set(&m.shareManagerPods, func() (*watchedKind, error) {
			return newWatchedKind[longhorn.Pod](m.dyn, longhorn.PodsResource, ns, func(o *metav1.ListOptions) {
				o.LabelSelector = shareManagerComponent + "=share-manager"
			}, kick)
		})
	}
	if err != nil {
		return fmt.Errorf("longhornsim: %w", err)
	}
	return nil
}

func (m *Manager) allKinds() []*watchedKind {
	kinds := []*watchedKind{m.lhNodes, m.kubeNodes, m.volumes, m.engines, m.frontends, m.replicas, m.ims, m.settings, m.snapshots, m.managers}
	if m.attachments != nil {
		kinds = append(kinds, m.attachments, m.shareManagerPods)
	}
	return kinds
}

// Kick asks for a round now, e.g. after a test changed the simulator
// directly (healed a fault); rounds also run on their own every Interval.
func (m *Manager) Kick() {
	select {
	case m.kick <- struct{}{}:
	default: // a round is already due
	}
}

// loop runs rounds until ctx ends: on any object change, when the
// simulator's next latency ends, and at least every Interval.
func (m *Manager) loop(ctx context.Context) {
	defer close(m.done)
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		wait := m.opts.Interval
		if due, ok := m.sim.NextDue(); ok {
			wait = min(wait, max(time.Until(due), 0))
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-m.kick:
		case <-timer.C:
		}
		if err := m.round(ctx); err != nil && ctx.Err() == nil {
			m.log.Warn("round failed; retrying", "error", err)
		}
	}
}

// round mirrors object changes into the simulator, then writes the
// simulator's state back. Errors are collected, not fatal: the next round
// tries again.
func (m *Manager) round(ctx context.Context) error {
	return errors.Join(m.mirror(ctx), m.attachAsTicketsSay(ctx), m.write(ctx))
}

// Close stops the manager and deletes the Kubernetes Nodes it created
// (cluster-scoped, so they would outlive the test's namespace). The
// namespaced objects are left to the namespace's owner.
func (m *Manager) Close() {
	m.once.Do(func() {
		m.cancel()
		<-m.done
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err := m.dyn.Resource(longhorn.KubeNodesResource).DeleteCollection(ctx, metav1.DeleteOptions{},
			metav1.ListOptions{LabelSelector: ManagedByLabel + "=" + m.ns})
		if err != nil {
			m.log.Warn("delete Kubernetes nodes", "error", err)
		}
	})
}
