// Package nodeaccounts keeps the NATS servers' node accounts in step with
// the cluster's nodes: in the node-account layout with the callout
// (docs/security.md §12) each worker is alone in its node's account, which
// the servers' configuration must hold before the callout can place the
// worker there. The leader renders that configuration (natsauth.Layout)
// for every Node and writes it into the servers' authorization Secret,
// whose change the servers' reloader loads; every replica reads the node
// list back from the Secret for its callout.
package nodeaccounts

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/switchback-dev/switchback/natsauth"
)

// DefaultResync is how often the leader renders again without a change
// (a Secret overwritten by an operator's apply is rewritten at the latest
// then; a watch event usually comes first).
const DefaultResync = 5 * time.Minute

// Config of a Syncer.
type Config struct {
	// Client reads the Nodes and reads and writes the Secret.
	Client kubernetes.Interface
	// Namespace of the servers' authorization Secret
	// (natsauth.ServerSecretName).
	Namespace string
	// Layout renders the configuration (the callout keys' layout).
	Layout natsauth.Layout
	// Resync; default DefaultResync.
	Resync time.Duration
	// Log; default slog.Default().
	Log *slog.Logger
}

// Syncer watches the Nodes and the servers' authorization Secret. Start
// it on every replica (Nodes serves the callout); Run its writer on the
// leader only.
type Syncer struct {
	cfg     Config
	log     *slog.Logger
	nodes   cache.SharedIndexInformer
	secret  cache.SharedIndexInformer
	trigger chan struct{}

	mu      sync.Mutex
	started bool
}

// New checks cfg and returns a Syncer.
func New(cfg Config) (*Syncer, error) {
	if cfg.Client == nil || cfg.Namespace == "" {
		return nil, errors.New("nodeaccounts: a client and the Secret's namespace are required")
	}
	if _, err := cfg.Layout.Render(nil); err != nil {
		return nil, fmt.Errorf("nodeaccounts: %w", err)
	}
	if cfg.Resync <= 0 {
		cfg.Resync = DefaultResync
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	s := &Syncer{cfg: cfg, log: cfg.Log.With("component", "nats-node-accounts"), trigger: make(chan struct{}, 1)}
	s.nodes = informers.NewSharedInformerFactory(cfg.Client, cfg.Resync).Core().V1().Nodes().Informer()
	s.secret = informers.NewSharedInformerFactoryWithOptions(cfg.Client, cfg.Resync, informers.WithNamespace(cfg.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", natsauth.ServerSecretName).String()
		})).Core().V1().Secrets().Informer()
	poke := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { s.poke() },
		UpdateFunc: func(any, any) { s.poke() },
		DeleteFunc: func(any) { s.poke() },
	}
	for _, inf := range []cache.SharedIndexInformer{s.nodes, s.secret} {
		if _, err := inf.AddEventHandler(poke); err != nil {
			return nil, fmt.Errorf("nodeaccounts: %w", err)
		}
	}
	return s, nil
}

func (s *Syncer) poke() {
	select {
	case s.trigger <- struct{}{}:
	default:
	}
}

// Start runs the informers until ctx ends and waits for their caches.
func (s *Syncer) Start(ctx context.Context) error {
	s.mu.Lock()
	if s.started {
		s.mu.Unlock()
		return errors.New("nodeaccounts: already started")
	}
	s.started = true
	s.mu.Unlock()
	go s.nodes.Run(ctx.Done())
	go s.secret.Run(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), s.nodes.HasSynced, s.secret.HasSynced) {
		return fmt.Errorf("nodeaccounts: the Nodes and Secret %s/%s not listed: %w", s.cfg.Namespace, natsauth.ServerSecretName, ctx.Err())
	}
	return nil
}

// Nodes is the node list of the Secret as last seen: the nodes whose
// accounts the servers are given (callout.Config.ReadNodeAccounts). nil
// before the controller rendered one.
func (s *Syncer) Nodes() ([]string, error) {
	obj, ok, err := s.secret.GetStore().GetByKey(s.cfg.Namespace + "/" + natsauth.ServerSecretName)
	if err != nil || !ok {
		return nil, err
	}
	return parseNodes(obj.(*corev1.Secret).Data), nil
}

// Run writes the Secret whenever the Nodes or the Secret change, until ctx
// ends; on the leader only. Start must have returned.
func (s *Syncer) Run(ctx context.Context) error {
	tick := time.NewTicker(s.cfg.Resync)
	defer tick.Stop()
	for {
		if err := s.Sync(ctx); err != nil && ctx.Err() == nil {
			// A conflict or an apiserver blip: the next event or tick retries.
			s.log.Error("writing the NATS servers' node accounts", "error", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-s.trigger:
		case <-tick.C:
		}
	}
}

// Sync renders the configuration for the Nodes in the cache and writes it
// when the Secret differs. It is idempotent.
func (s *Syncer) Sync(ctx context.Context) error {
	var nodes []string
	for _, obj := range s.nodes.GetStore().List() {
		nodes = append(nodes, obj.(*corev1.Node).Name)
	}
	obj, ok, err := s.secret.GetStore().GetByKey(s.cfg.Namespace + "/" + natsauth.ServerSecretName)
	if err != nil {
		return fmt.Errorf("nodeaccounts: %w", err)
	}
	if !ok {
		return fmt.Errorf("nodeaccounts: Secret %s/%s not found: apply the secrets nats-auth wrote", s.cfg.Namespace, natsauth.ServerSecretName)
	}
	secret := obj.(*corev1.Secret)
	data, changed, err := desired(s.cfg.Layout, nodes, secret.Data)
	if err != nil || !changed {
		return err
	}
	before := parseNodes(secret.Data)
	update := secret.DeepCopy()
	update.Data = data
	if _, err := s.cfg.Client.CoreV1().Secrets(s.cfg.Namespace).Update(ctx, update, metav1.UpdateOptions{FieldManager: "switchback-controller"}); err != nil {
		if apierrors.IsConflict(err) {
			return nil // the Secret's own event brings the newer one
		}
		return fmt.Errorf("nodeaccounts: update Secret %s/%s: %w", s.cfg.Namespace, natsauth.ServerSecretName, err)
	}
	after := parseNodes(data)
	s.log.Info("the NATS servers' node accounts written", "nodes", len(after), "added", missing(after, before), "removed", missing(before, after))
	return nil
}

// missing lists what of a is not in b.
func missing(a, b []string) []string {
	var out []string
	for _, n := range a {
		if !slices.Contains(b, n) {
			out = append(out, n)
		}
	}
	return out
}
