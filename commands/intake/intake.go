// Package intake turns DataEngineUpgradeManager objects into commands: a new
// manager becomes an upgrade request, a deleted one a cancel request (there is
// no cancel verb). A finalizer keeps a deleted manager until the cancel flow
// has reached its safe point, so `kubectl delete` returns only once every
// volume is back where it belongs.
package intake

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"

	"github.com/switchback-dev/switchback/aggregate/manager"
	"github.com/switchback-dev/switchback/api/v1beta2"
	"github.com/switchback-dev/switchback/commands"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/eventstore"
	"github.com/switchback-dev/switchback/kubeclient"
)

// Config wires the intake.
type Config struct {
	Client *kubeclient.Client
	Store  *eventstore.Store
	// Namespace to watch; "" watches all namespaces.
	Namespace string
	// CancelPoll is how often a deleted manager whose cancel is still under
	// way is looked at again, besides the status updates that wake it;
	// default 2s.
	CancelPoll time.Duration
	Now        func() time.Time
	Log        *slog.Logger
}

// Controller is the intake controller.
type Controller struct {
	cfg      Config
	log      *slog.Logger
	x        *commands.Executor
	queue    workqueue.TypedRateLimitingInterface[string]
	informer cache.SharedIndexInformer
}

// New returns an intake controller.
func New(cfg Config) (*Controller, error) {
	if cfg.Client == nil || cfg.Store == nil {
		return nil, errors.New("intake: Client and Store are required")
	}
	if cfg.CancelPoll == 0 {
		cfg.CancelPoll = 2 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	c := &Controller{
		cfg: cfg,
		log: cfg.Log.With("component", "intake"),
		x:   commands.New(commands.Config{Store: cfg.Store, Source: events.SourceIntake, Now: cfg.Now}),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "intake"}),
		informer: cfg.Client.Managers(cfg.Namespace).Informer(10 * time.Minute),
	}
	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			c.queue.Add(key)
		}
	}
	if _, err := c.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: enqueue,
	}); err != nil {
		return nil, fmt.Errorf("intake: %w", err)
	}
	return c, nil
}

// HasSynced reports whether the informer has listed the managers.
func (c *Controller) HasSynced() bool { return c.informer.HasSynced() }

// Run watches managers and reconciles them until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	defer c.queue.ShutDown()
	started := time.Now()
	go c.informer.RunWithContext(ctx)
	// WaitFor, not WaitForCacheSync: that one polls every 100 ms, and a
	// request made as the controller starts would wait for the next poll
	// (perf's BenchmarkControllerResume: the first upgrade after a restart).
	if !cache.WaitFor(ctx, "", c.informer.HasSyncedChecker()) {
		return ctx.Err()
	}
	c.log.Debug("managers listed", "took", time.Since(started))
	go func() {
		<-ctx.Done()
		c.queue.ShutDown()
	}()
	for {
		key, quit := c.queue.Get()
		if quit {
			return ctx.Err()
		}
		began := time.Now()
		again, err := c.reconcile(ctx, key)
		c.log.Debug("reconciled", "manager", key, "took", time.Since(began), "error", err)
		switch {
		case err != nil:
			c.log.Error("reconcile failed; retrying", "manager", key, "error", err)
			c.queue.AddRateLimited(key)
		case again > 0:
			c.queue.Forget(key)
			c.queue.AddAfter(key, again)
		default:
			c.queue.Forget(key)
		}
		c.queue.Done(key)
	}
}

// reconcile records what the manager object asks for. It returns a delay
// after which to look again (a cancel under way), or an error to retry.
func (c *Controller) reconcile(ctx context.Context, key string) (time.Duration, error) {
	obj, exists, err := c.informer.GetIndexer().GetByKey(key)
	if err != nil || !exists {
		return 0, err // gone: its finalizer was removed, so its cancel finished
	}
	m := obj.(*v1beta2.DataEngineUpgradeManager)
	ref := events.ManagerRef{Namespace: m.Namespace, Name: m.Name, UID: string(m.UID)}
	log := c.log.With("manager", ref.String(), "uid", ref.UID)

	if m.DeletionTimestamp != nil {
		return c.cancel(ctx, m, ref, log)
	}
	if !slices.Contains(m.Finalizers, v1beta2.CancelFinalizer) {
		if err := c.setFinalizer(ctx, m, true); err != nil {
			return 0, err
		}
	}
	res, err := RequestUpgrade(ctx, c.x, ref, m.Generation, m.Spec)
	if err != nil {
		return 0, err
	}
	if len(res.Appended) > 0 {
		log.Info("upgrade requested", "nodes", m.Spec.Nodes)
	}
	return 0, nil
}

// cancel records the cancel request and removes the finalizer once the
// upgrade is over (cancelled at its safe point, or already finished).
func (c *Controller) cancel(ctx context.Context, m *v1beta2.DataEngineUpgradeManager, ref events.ManagerRef, log *slog.Logger) (time.Duration, error) {
	if !slices.Contains(m.Finalizers, v1beta2.CancelFinalizer) {
		return 0, nil
	}
	loaded, err := c.x.Managers.Load(ctx, events.ManagerAggregate(ref))
	if err != nil {
		return 0, err
	}
	st := loaded.State
	if st.Exists && !st.Terminal() {
		res, err := RequestCancel(ctx, c.x, ref, manager.DeletedReason)
		if err != nil {
			return 0, err
		}
		if len(res.Appended) > 0 {
			log.Info("cancel requested: the node in flight is brought to a safe point", "node", res.State.UpgradingNode)
		}
		if !res.State.Terminal() {
			return c.cfg.CancelPoll, nil
		}
	}
	if err := c.setFinalizer(ctx, m, false); err != nil {
		return 0, err
	}
	log.Info("finalizer removed", "state", st.State)
	return 0, nil
}

// setFinalizer adds or removes the cancel finalizer with an optimistic
// update of a fresh copy (other controllers may own other finalizers).
func (c *Controller) setFinalizer(ctx context.Context, m *v1beta2.DataEngineUpgradeManager, present bool) error {
	mgrs := c.cfg.Client.Managers(m.Namespace)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := mgrs.Get(ctx, m.Name)
		if err != nil {
			return err
		}
		if cur.UID != m.UID {
			return nil // another incarnation under the same name
		}
		has := slices.Contains(cur.Finalizers, v1beta2.CancelFinalizer)
		switch {
		case present && !has:
			cur.Finalizers = append(cur.Finalizers, v1beta2.CancelFinalizer)
		case !present && has:
			cur.Finalizers = slices.DeleteFunc(cur.Finalizers, func(f string) bool { return f == v1beta2.CancelFinalizer })
		default:
			return nil
		}
		_, err = mgrs.Update(ctx, cur)
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("intake: finalizer of %s/%s: %w", m.Namespace, m.Name, err)
	}
	return nil
}
