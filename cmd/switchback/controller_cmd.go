package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/switchback-dev/switchback/commands/intake"
	"github.com/switchback-dev/switchback/historystorage"
	"github.com/switchback-dev/switchback/kubeclient"
	"github.com/switchback-dev/switchback/metrics"
	"github.com/switchback-dev/switchback/natsauth/callout"
	"github.com/switchback-dev/switchback/nodeaccounts"
	"github.com/switchback-dev/switchback/orchestrator"
	"github.com/switchback-dev/switchback/webhook"
)

// leaseName is the leader-election Lease; RBAC grants update on this name only.
const leaseName = "switchback-controller"

func controllerCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "controller", Args: noArgs}
	fs := cmd.Flags()
	var nf natsFlags
	nf.register(fs, true)
	var kf kubeFlags
	kf.register(fs, "")
	namespace := fs.StringP("namespace", "n", "longhorn-system", "namespace of the managers, and of the leader-election lease")
	identity := fs.String("id", hostnameOr("switchback-controller"), "this replica's identity for leader election")
	ackWait := fs.Duration("command-ack-wait", 10*time.Second, "how long a node's command waits for a worker that stopped answering before it is redelivered (workers keep live commands with heartbeats)")
	qps := fs.Float64("kube-api-qps", defaultKubeQPS, "requests per second to the kube-apiserver (status writes, Events, the lease)")
	burst := fs.Int("kube-api-burst", defaultKubeBurst, "burst of requests to the kube-apiserver above --kube-api-qps")
	leaderElect := fs.Bool("leader-elect", true, "run intake, orchestrator and projector only while holding the lease")
	leaseDuration := fs.Duration("leader-elect-lease-duration", 15*time.Second, "how long a lease is valid without renewal: a crashed leader is replaced after at most this long")
	renewDeadline := fs.Duration("leader-elect-renew-deadline", 10*time.Second, "how long the leader keeps trying to renew before it stops leading")
	retryPeriod := fs.Duration("leader-elect-retry-period", 2*time.Second, "how often replicas try to acquire or renew the lease")
	var dp dataPlaneFlags
	dp.register(fs)
	webhookAddr := fs.String("webhook-addr", fmt.Sprintf(":%d", webhook.DefaultPort), "admission webhook address (empty = no webhook)")
	certDir := fs.String("webhook-cert-dir", "/etc/switchback/webhook", "directory with the webhook's tls.crt and tls.key (reloaded on change)")
	historyVolumes := fs.String("history-volumes", historystorage.DefaultSelector, "label selector of the bundled NATS servers' volume claims in --namespace, refused on Longhorn's storage at start (empty = no check, e.g. an external NATS)")
	historyOnLonghorn := fs.Bool("allow-history-on-longhorn", false, "start even when the NATS servers' volumes are Longhorn's: the upgrade's history then lives on the storage it upgrades")
	guard := fs.Bool("guard-longhorn", true, "serve the guard that refuses new v2 attachments and engine moves onto a node being upgraded (deploy/webhook/guard.yaml sends it the writes)")
	var trusted stringList
	fs.Var(&trusted, "guard-trusted-user", "a user whose writes the guard lets through, besides the workers' service account system:serviceaccount:<namespace>:switchback-worker (repeat)")
	calloutDir := fs.String("nats-callout", "", "serve the NATS auth callout with the keys in this directory (the Secret "+callout.SecretName+"; `switchback nats-auth --callout` makes it): "+
		"each worker presenting its pod's ServiceAccount token gets its node's NATS user; every replica serves, leading or not")
	calloutSA := fs.String("nats-callout-service-account", callout.DefaultServiceAccount, "with --nats-callout: the workers' ServiceAccount in --namespace, the only one admitted")
	calloutTTL := fs.Duration("nats-callout-max-ttl", callout.DefaultMaxTTL, "with --nats-callout: the longest a worker's NATS user lives (never past its token); it then reconnects with its current token")
	var hf healthFlags
	hf.register(fs)
	var lf logFlags
	lf.register(fs)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		ctx, stderr := cmd.Context(), cmd.ErrOrStderr()
		if *ackWait < time.Second {
			return fmt.Errorf("--command-ack-wait %s: want at least 1s: %w", *ackWait, errUsage)
		}
		// Mistakes in the NATS flags are usage errors, said before anything is
		// read of the cluster.
		if err := nf.validate(); err != nil {
			return err
		}
		// client-go panics on these (RunOrDie); say which flag is wrong instead.
		if *leaseDuration <= *renewDeadline || float64(*renewDeadline) <= leaderelection.JitterFactor*float64(*retryPeriod) || *retryPeriod <= 0 {
			return fmt.Errorf("want --leader-elect-lease-duration (%s) > --leader-elect-renew-deadline (%s) > %.1f × --leader-elect-retry-period (%s) > 0: %w",
				*leaseDuration, *renewDeadline, leaderelection.JitterFactor, *retryPeriod, errUsage)
		}
		log := lf.logger(stderr)
		cfg, err := kf.config()
		if err != nil {
			return err
		}
		cfg.QPS, cfg.Burst = float32(*qps), *burst
		kc, err := kubeclient.New(cfg)
		if err != nil {
			return err
		}
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return err
		}
		if *historyVolumes != "" {
			vols, err := historystorage.Find(ctx, cs, *namespace, *historyVolumes)
			if err != nil {
				return err
			}
			if err := historystorage.Check(vols, *historyOnLonghorn); err != nil {
				return err
			}
			for _, v := range vols {
				log.Info("history volume", "claim", v.Claim, "storageClass", v.StorageClass, "provisioner", v.Provisioner, "onLonghorn", v.OnLonghorn())
			}
		}
		conn, err := nf.connect(ctx, "switchback-controller", log, connectOptions{commandAckWait: *ackWait})
		if err != nil {
			return err
		}
		defer conn.Close()
		cluster, err := dp.open(ctx, cfg, conn.nc, log)
		if err != nil {
			return err
		}
		// Switchback's streams deny deletes: a deleted sequence is history the
		// store lost (a truncated block, a disk error). The upgrade can go on,
		// but the operator must know that replay no longer tells the whole story.
		if gaps, err := conn.store.CheckHistory(ctx); err != nil {
			log.Error("checking the event stream for lost history", "error", err)
		} else if lost := gaps.Err(); lost != nil {
			log.Error("the event stream lost acknowledged events", "stream", gaps.Stream, "missing", gaps.String(), "count", gaps.Count(), "error", lost)
		}

		var leading sync.Mutex
		isLeader := false
		// calloutNC is the auth callout's own connection, once it runs: a
		// replica whose callout lost NATS refuses every worker while looking
		// healthy, so readiness covers it too.
		var calloutNC atomic.Pointer[nats.Conn]
		ready := func() error {
			if !conn.nc.IsConnected() {
				return errors.New("not connected to NATS")
			}
			if nc := calloutNC.Load(); nc != nil && !nc.IsConnected() {
				return errors.New("the NATS auth callout is not connected to NATS")
			}
			return nil
		}
		leader := func() bool {
			leading.Lock()
			defer leading.Unlock()
			return isLeader
		}
		// /leader and switchback_leader say the same: a probe for people, a
		// series for the alert on no controller leading (deploy/monitoring).
		health, err := hf.serve(ctx, log, ready, metricsHandler(metrics.NewReady(ready), metrics.NewLeader(leader)), func(mux *http.ServeMux) {
			mux.HandleFunc("/leader", func(w http.ResponseWriter, _ *http.Request) {
				fmt.Fprintln(w, leader())
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
		// nodeAccounts writes the servers' node accounts on the leader, when
		// the callout's keys carry a layout.
		var nodeAccounts *nodeaccounts.Syncer
		if *calloutDir != "" {
			reviewer, err := callout.ClusterReviewer(cfg)
			if err != nil {
				return err
			}
			svc, nc, syncer, err := startCallout(ctx, &nf, *calloutDir, cs, *namespace, callout.Config{Namespace: *namespace, ServiceAccount: *calloutSA, MaxTTL: *calloutTTL,
				Reviewer:           reviewer,
				WorkerExtraPublish: dp.workerExtraPublish(), Log: log.With("component", "nats-callout")}, log)
			if err != nil {
				return err
			}
			nodeAccounts = syncer
			defer nc.Close()
			calloutNC.Store(nc)
			wg.Go(func() {
				if err := svc.Run(ctx, nc); err != nil && ctx.Err() == nil {
					log.Error("NATS auth callout stopped", "error", err)
				}
			})
		}
		if *webhookAddr != "" {
			// Admission reads informer caches only (its own, since the
			// intake's runs on the leader alone): no apiserver request per review.
			managers := kc.Managers(*namespace).Informer(0)
			wg.Go(func() { managers.Run(ctx.Done()) })
			admitter, err := webhook.NewAdmitter(webhook.AdmitterConfig{Namespace: *namespace, Cluster: cluster,
				Active: webhook.ActiveFromStore{Store: managers.GetStore(), Namespace: *namespace, HasSynced: managers.HasSynced}, Logger: log})
			if err != nil {
				return err
			}
			// The workers run in the controller's namespace (deploy/), as the
			// service account deploy/rbac names.
			gcfg := webhook.GuardConfig{Disabled: !*guard, Cluster: cluster, Logger: log,
				Trusted: append([]string{"system:serviceaccount:" + *namespace + ":switchback-worker"}, trusted...)}
			if *guard {
				nodeUpgrades := kc.NodeUpgrades(*namespace).Informer(0)
				wg.Go(func() { nodeUpgrades.Run(ctx.Done()) })
				gcfg.Upgrading = webhook.UpgradingFromStore{Store: nodeUpgrades.GetStore(), Namespace: *namespace, HasSynced: nodeUpgrades.HasSynced}
			}
			g, err := webhook.NewGuard(gcfg)
			if err != nil {
				return err
			}
			srv, err := webhook.NewServer(webhook.ServerConfig{Addr: *webhookAddr, Admitter: admitter, Guard: g, Logger: log,
				CertFile: filepath.Join(*certDir, webhook.CertFileName), KeyFile: filepath.Join(*certDir, webhook.KeyFileName)})
			if err != nil {
				return err
			}
			wg.Go(func() {
				if err := srv.ListenAndServe(ctx); err != nil && ctx.Err() == nil {
					log.Error("webhook server stopped", "error", err)
				}
			})
		}

		// lead runs the leader's components until ctx ends. A component that
		// stops with an error (e.g. NATS unreachable as it started) leaves the
		// leader unable to act: it steps down, and the components start
		// afresh in whichever replica leads next, itself included.
		lead := func(ctx context.Context, stepDown func()) {
			leading.Lock()
			isLeader = true
			leading.Unlock()
			log.Info("leading: starting intake, orchestrator and projector", "id", *identity)
			var lwg sync.WaitGroup
			run := func(name string, f func(context.Context) error) {
				lwg.Go(func() {
					if err := f(ctx); err != nil && ctx.Err() == nil {
						log.Error("component stopped: stepping down, to start afresh", "component", name, "error", err)
						stepDown()
					}
				})
			}
			orch, err := orchestrator.New(orchestrator.Config{Store: conn.store, Queue: conn.queue, Cluster: cluster, Log: log})
			if err != nil {
				log.Error("orchestrator", "error", err)
				return
			}
			run("orchestrator", orch.Run)
			run("node consumers", func(ctx context.Context) error { return ensureNodeConsumers(ctx, conn.queue, cluster, log) })
			in, err := intake.New(intake.Config{Client: kc, Store: conn.store, Namespace: *namespace, Log: log})
			if err != nil {
				log.Error("intake", "error", err)
				return
			}
			run("intake", in.Run)
			if nodeAccounts != nil {
				run("NATS node accounts", nodeAccounts.Run)
			}
			if err := startProjector(ctx, conn, kc, cs, log, run); err != nil {
				log.Error("projector", "error", err)
			}
			lwg.Wait()
		}
		if !*leaderElect {
			for ctx.Err() == nil {
				lctx, restart := context.WithCancel(ctx)
				lead(lctx, restart)
				restart()
				select {
				case <-ctx.Done():
				case <-time.After(*retryPeriod):
				}
			}
			return nil
		}
		lock := &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Name: leaseName, Namespace: *namespace},
			Client:     cs.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: *identity},
		}
		// Losing the lease (an apiserver outage longer than the renew deadline)
		// stops the leader's components; the replica then competes again rather
		// than exiting, so one outage does not need a pod restart to heal. A
		// leader that lost NATS, though it still renews its lease, can do
		// nothing: it steps down after a lease duration without NATS and
		// competes again only once connected, so that a replica that reaches
		// NATS leads.
		for ctx.Err() == nil {
			if err := awaitNATS(ctx, conn.nc, *retryPeriod); err != nil {
				break
			}
			electCtx, stepDown := context.WithCancel(ctx)
			leaderelection.RunOrDie(electCtx, leaderelection.LeaderElectionConfig{
				Lock:            lock,
				LeaseDuration:   *leaseDuration,
				RenewDeadline:   *renewDeadline,
				RetryPeriod:     *retryPeriod,
				ReleaseOnCancel: true,
				Name:            leaseName,
				Callbacks: leaderelection.LeaderCallbacks{
					OnStartedLeading: func(ctx context.Context) {
						go stepDownWithoutNATS(ctx, conn.nc, *leaseDuration, stepDown, log)
						lead(ctx, stepDown)
					},
					OnStoppedLeading: func() {
						leading.Lock()
						isLeader = false
						leading.Unlock()
						log.Info("stopped leading", "id", *identity)
					},
					OnNewLeader: func(id string) { log.Info("leader", "id", id) },
				},
			})
			stepDown()
		}
		return nil
	}
	return cmd
}

// client-go's defaults (5 requests/s, burst 10) cap the projector at a few
// status writes a second: 50 events/s then lag by most of a second (see
// projector's BenchmarkProjectionLag with LAG_QPS=0).
const (
	defaultKubeQPS   = 50
	defaultKubeBurst = 100
)

func hostnameOr(def string) string {
	if h, err := os.Hostname(); err == nil && h != "" {
		return h
	}
	return def
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
