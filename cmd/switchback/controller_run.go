package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/switchback-dev/switchback/commands/intake"
	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/historystorage"
	"github.com/switchback-dev/switchback/kubeclient"
	"github.com/switchback-dev/switchback/metrics"
	"github.com/switchback-dev/switchback/natsauth/callout"
	"github.com/switchback-dev/switchback/nodeaccounts"
	"github.com/switchback-dev/switchback/orchestrator"
	"github.com/switchback-dev/switchback/webhook"
)

// controller is one running replica: what run connected to, and whether it
// leads.
type controller struct {
	o       *controllerOptions
	log     *slog.Logger
	cfg     *rest.Config
	kc      *kubeclient.Client
	cs      kubernetes.Interface
	conn    *natsConn
	cluster dataplane.DataPlane
	// nodeAccounts writes the servers' node accounts on the leader, when the
	// callout's keys carry a layout.
	nodeAccounts *nodeaccounts.Syncer
	// calloutNC is the auth callout's own connection, once it runs: a replica
	// whose callout lost NATS refuses every worker while looking healthy, so
	// readiness covers it too.
	calloutNC atomic.Pointer[nats.Conn]

	leading  sync.Mutex
	isLeader bool
}

// run connects, serves every replica's part (health, the auth callout, the
// webhook) and runs the leader's components while it holds the lease.
func (o *controllerOptions) run(ctx context.Context, stderr io.Writer) error {
	c := &controller{o: o, log: o.log.logger(stderr)}
	if err := c.connect(ctx); err != nil {
		return err
	}
	defer c.conn.Close()
	c.checkHistory(ctx)

	health, err := o.health.serve(ctx, c.log, c.ready, metricsHandler(metrics.NewReady(c.ready), metrics.NewLeader(c.leader)), func(mux *http.ServeMux) {
		mux.HandleFunc("/leader", func(w http.ResponseWriter, _ *http.Request) {
			fmt.Fprintln(w, c.leader())
		})
	})
	if err != nil {
		return err
	}
	defer health.Close()

	var wg sync.WaitGroup
	defer wg.Wait()
	// The goroutines below end with ctx: cancel it on any return, or an
	// error after one started would wait for them forever.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if o.calloutDir != "" {
		nc, err := c.serveCallout(ctx, &wg)
		if err != nil {
			return err
		}
		defer nc.Close()
	}
	if o.webhookAddr != "" {
		if err := c.serveWebhook(ctx, &wg); err != nil {
			return err
		}
	}
	if !o.leaderElect {
		for ctx.Err() == nil {
			lctx, restart := context.WithCancel(ctx)
			c.lead(lctx, restart)
			restart()
			select {
			case <-ctx.Done():
			case <-time.After(o.retryPeriod):
			}
		}
		return nil
	}
	c.elect(ctx)
	return nil
}

// connect makes the clients: the apiserver's (refusing history volumes on
// Longhorn's storage), NATS and the data plane.
func (c *controller) connect(ctx context.Context) error {
	o := c.o
	cfg, err := o.kube.config()
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = float32(o.qps), o.burst
	c.cfg = cfg
	if c.kc, err = kubeclient.New(cfg); err != nil {
		return err
	}
	if c.cs, err = kubernetes.NewForConfig(cfg); err != nil {
		return err
	}
	if o.historyVolumes != "" {
		vols, err := historystorage.Find(ctx, c.cs, o.namespace, o.historyVolumes)
		if err != nil {
			return err
		}
		if err := historystorage.Check(vols, o.historyOnLonghorn); err != nil {
			return err
		}
		for _, v := range vols {
			c.log.Info("history volume", "claim", v.Claim, "storageClass", v.StorageClass, "provisioner", v.Provisioner, "onLonghorn", v.OnLonghorn())
		}
	}
	if c.conn, err = o.nats.connect(ctx, "switchback-controller", c.log, connectOptions{commandAckWait: o.ackWait}); err != nil {
		return err
	}
	if c.cluster, err = o.dataPlane.open(ctx, cfg, c.conn.nc, c.log); err != nil {
		c.conn.Close()
		return err
	}
	return nil
}

// checkHistory reports lost history. Switchback's streams deny deletes: a
// deleted sequence is history the store lost (a truncated block, a disk
// error). The upgrade can go on, but the operator must know that replay no
// longer tells the whole story.
func (c *controller) checkHistory(ctx context.Context) {
	if gaps, err := c.conn.store.CheckHistory(ctx); err != nil {
		c.log.Error("checking the event stream for lost history", "error", err)
	} else if lost := gaps.Err(); lost != nil {
		c.log.Error("the event stream lost acknowledged events", "stream", gaps.Stream, "missing", gaps.String(), "count", gaps.Count(), "error", lost)
	}
}

func (c *controller) ready() error {
	if !c.conn.nc.IsConnected() {
		return errors.New("not connected to NATS")
	}
	if nc := c.calloutNC.Load(); nc != nil && !nc.IsConnected() {
		return errors.New("the NATS auth callout is not connected to NATS")
	}
	return nil
}

// leader is what /leader and switchback_leader say: a probe for people, a
// series for the alert on no controller leading (deploy/monitoring).
func (c *controller) leader() bool {
	c.leading.Lock()
	defer c.leading.Unlock()
	return c.isLeader
}

func (c *controller) setLeader(v bool) {
	c.leading.Lock()
	c.isLeader = v
	c.leading.Unlock()
}

// serveCallout runs the NATS auth callout (every replica, leading or not)
// and returns its connection.
func (c *controller) serveCallout(ctx context.Context, wg *sync.WaitGroup) (*nats.Conn, error) {
	o := c.o
	reviewer, err := callout.ClusterReviewer(c.cfg)
	if err != nil {
		return nil, err
	}
	svc, nc, syncer, err := startCallout(ctx, &o.nats, o.calloutDir, c.cs, o.namespace, callout.Config{Namespace: o.namespace, ServiceAccount: o.calloutSA, MaxTTL: o.calloutTTL,
		Reviewer:           reviewer,
		WorkerExtraPublish: o.dataPlane.workerExtraPublish(), Log: c.log.With("component", "nats-callout")}, c.log)
	if err != nil {
		return nil, err
	}
	c.nodeAccounts = syncer
	c.calloutNC.Store(nc)
	wg.Go(func() {
		if err := svc.Run(ctx, nc); err != nil && ctx.Err() == nil {
			c.log.Error("NATS auth callout stopped", "error", err)
		}
	})
	return nc, nil
}

// serveWebhook runs the admission webhook, the guard and the eviction scope
// of the workers (every replica).
// Admission reads informer caches only (its own, since the intake's runs on
// the leader alone): no apiserver request per review.
func (c *controller) serveWebhook(ctx context.Context, wg *sync.WaitGroup) error {
	o := c.o
	managers := c.kc.Managers(o.namespace).Informer(0)
	wg.Go(func() { managers.Run(ctx.Done()) })
	admitter, err := webhook.NewAdmitter(webhook.AdmitterConfig{Namespace: o.namespace, Cluster: c.cluster,
		Active: webhook.ActiveFromStore{Store: managers.GetStore(), Namespace: o.namespace, HasSynced: managers.HasSynced}, Logger: c.log})
	if err != nil {
		return err
	}
	// The workers run in the controller's namespace (deploy/), as the
	// service account deploy/rbac names.
	gcfg := webhook.GuardConfig{Disabled: !o.guard, Cluster: c.cluster, Logger: c.log,
		Trusted: append([]string{"system:serviceaccount:" + o.namespace + ":switchback-worker"}, o.trusted...)}
	if o.guard {
		nodeUpgrades := c.kc.NodeUpgrades(o.namespace).Informer(0)
		wg.Go(func() { nodeUpgrades.Run(ctx.Done()) })
		gcfg.Upgrading = webhook.UpgradingFromStore{Store: nodeUpgrades.GetStore(), Namespace: o.namespace, HasSynced: nodeUpgrades.HasSynced}
	}
	g, err := webhook.NewGuard(gcfg)
	if err != nil {
		return err
	}
	scope, err := webhook.NewEvictionScope(webhook.EvictionScopeConfig{Pods: c.cs.CoreV1(), Logger: c.log})
	if err != nil {
		return err
	}
	srv, err := webhook.NewServer(webhook.ServerConfig{Addr: o.webhookAddr, Admitter: admitter, Guard: g, EvictionScope: scope, Logger: c.log,
		CertFile: filepath.Join(o.certDir, webhook.CertFileName), KeyFile: filepath.Join(o.certDir, webhook.KeyFileName)})
	if err != nil {
		return err
	}
	wg.Go(func() {
		if err := srv.ListenAndServe(ctx); err != nil && ctx.Err() == nil {
			c.log.Error("webhook server stopped", "error", err)
		}
	})
	return nil
}

// lead runs the leader's components until ctx ends. A component that stops
// with an error (e.g. NATS unreachable as it started) leaves the leader
// unable to act: it steps down, and the components start afresh in
// whichever replica leads next, itself included.
func (c *controller) lead(ctx context.Context, stepDown func()) {
	c.setLeader(true)
	c.log.Info("leading: starting intake, orchestrator and projector", "id", c.o.identity)
	var lwg sync.WaitGroup
	run := func(name string, f func(context.Context) error) {
		lwg.Go(func() {
			if err := f(ctx); err != nil && ctx.Err() == nil {
				c.log.Error("component stopped: stepping down, to start afresh", "component", name, "error", err)
				stepDown()
			}
		})
	}
	orch, err := orchestrator.New(orchestrator.Config{Store: c.conn.store, Queue: c.conn.queue, Cluster: c.cluster, KeepSnapshots: c.o.keepSnapshots, Log: c.log})
	if err != nil {
		c.log.Error("orchestrator", "error", err)
		return
	}
	run("orchestrator", orch.Run)
	run("node consumers", func(ctx context.Context) error { return ensureNodeConsumers(ctx, c.conn.queue, c.cluster, c.log) })
	in, err := intake.New(intake.Config{Client: c.kc, Store: c.conn.store, Namespace: c.o.namespace, Log: c.log})
	if err != nil {
		c.log.Error("intake", "error", err)
		return
	}
	run("intake", in.Run)
	if c.nodeAccounts != nil {
		run("NATS node accounts", c.nodeAccounts.Run)
	}
	if err := startProjector(ctx, c.conn, c.kc, c.cs, c.log, run); err != nil {
		c.log.Error("projector", "error", err)
	}
	lwg.Wait()
}

// elect competes for the lease until ctx ends, leading while it holds it.
// Losing the lease (an apiserver outage longer than the renew deadline)
// stops the leader's components; the replica then competes again rather
// than exiting, so one outage does not need a pod restart to heal. A leader
// that lost NATS, though it still renews its lease, can do nothing: it
// steps down after a lease duration without NATS and competes again only
// once connected, so that a replica that reaches NATS leads.
func (c *controller) elect(ctx context.Context) {
	o := c.o
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Name: leaseName, Namespace: o.namespace},
		Client:     c.cs.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: o.identity},
	}
	for ctx.Err() == nil {
		if err := awaitNATS(ctx, c.conn.nc, o.retryPeriod); err != nil {
			return
		}
		electCtx, stepDown := context.WithCancel(ctx)
		leaderelection.RunOrDie(electCtx, leaderelection.LeaderElectionConfig{
			Lock:            lock,
			LeaseDuration:   o.leaseDuration,
			RenewDeadline:   o.renewDeadline,
			RetryPeriod:     o.retryPeriod,
			ReleaseOnCancel: true,
			Name:            leaseName,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(ctx context.Context) {
					go stepDownWithoutNATS(ctx, c.conn.nc, o.leaseDuration, stepDown, c.log)
					c.lead(ctx, stepDown)
				},
				OnStoppedLeading: func() {
					c.setLeader(false)
					c.log.Info("stopped leading", "id", o.identity)
				},
				OnNewLeader: func(id string) { c.log.Info("leader", "id", id) },
			},
		})
		stepDown()
	}
}

// startCallout reads the callout's keys from dir and returns the service
// and its own NATS connection (its static user), to Run on; with a layout
// in the keys, also the node accounts' syncer, its informers started (its
// writer is the leader's to Run).
func startCallout(ctx context.Context, nf *natsFlags, dir string, cs kubernetes.Interface, namespace string, cfg callout.Config, log *slog.Logger) (*callout.Service, *nats.Conn, *nodeaccounts.Syncer, error) {
	keys, err := callout.ReadKeys(dir)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("--nats-callout: %w", err)
	}
	cfg.Issuer, cfg.XKey, cfg.Account, cfg.NodeAccounts = keys.Issuer, keys.XKey, keys.Account, keys.NodeAccounts
	var syncer *nodeaccounts.Syncer
	switch {
	case keys.Layout != nil:
		// The node accounts follow the Nodes: the callout places a worker
		// by the list the servers' Secret holds.
		if syncer, err = nodeaccounts.New(nodeaccounts.Config{Client: cs, Namespace: namespace, Layout: *keys.Layout, Log: log}); err != nil {
			return nil, nil, nil, err
		}
		if err := syncer.Start(ctx); err != nil {
			return nil, nil, nil, err
		}
		cfg.NodeAccounts, cfg.ReadNodeAccounts = []string{}, syncer.Nodes
	case keys.NodeAccounts != nil:
		// A node added to the layout reaches the mounted keys before its
		// worker does: the callout reads the list again on a miss.
		cfg.ReadNodeAccounts = func() ([]string, error) {
			k, err := callout.ReadKeys(dir)
			return k.NodeAccounts, err
		}
	}
	svc, err := callout.New(cfg)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("--nats-callout: %w", err)
	}
	nc, err := nf.connectCallout(keys, log)
	if err != nil {
		return nil, nil, nil, err
	}
	return svc, nc, syncer, nil
}
