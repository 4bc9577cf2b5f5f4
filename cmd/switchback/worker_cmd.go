package main

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"k8s.io/client-go/rest"

	"github.com/spf13/cobra"

	"github.com/switchback-dev/switchback/hostkernel"
	"github.com/switchback-dev/switchback/metrics"
	"github.com/switchback-dev/switchback/natsauth"
	"github.com/switchback-dev/switchback/natsauth/callout"
	"github.com/switchback-dev/switchback/nodeworker"
)

func workerCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "worker", Args: noArgs}
	fs := cmd.Flags()
	var nf natsFlags
	nf.register(fs, false)
	node := fs.String("node", os.Getenv("NODE_NAME"), "the node this worker upgrades (default $NODE_NAME, from the downward API)")
	tokenFile := fs.String("nats-token-file", "", "the pod's projected ServiceAccount token (audience "+callout.DefaultAudience+"), presented to the NATS auth callout at every (re)connect: "+
		"the default install, "+callout.DefaultTokenPath+"; empty authenticates with --nats-nkey/--nats-creds/--nats-user")
	var dp dataPlaneFlags
	dp.register(fs)
	var kf kubeFlags
	kf.register(fs, "with --data-plane longhorn: ")
	stallAfter := fs.Duration("stall-after", 2*time.Minute, "report a step stalled after this long without progress")
	failAfter := fs.Duration("fail-after", 10*time.Minute, "fail the node when its new instance manager stays in error this long")
	resync := fs.Duration("resync-interval", 30*time.Second, "the longest a waiting step goes without looking at the cluster again: it wakes at once on a change of the cluster (Longhorn's watch, or the simulated cluster's notices) and on a cancel, so this is only a safety net for a lost notice")
	fs.DurationVar(resync, "poll-interval", 30*time.Second, "the old name of --resync-interval, from when a waiting step looked at the cluster on a timer")
	_ = fs.MarkDeprecated("poll-interval", "a waiting step wakes on the cluster's changes now: use --resync-interval, the safety re-read")
	sysfs := fs.String("sysfs", hostkernel.DefaultSysfs, "with --data-plane longhorn: where the worker reads its node's kernel, nvme_core.multipath, and reports it on the node's Longhorn node "+
		"(a container's read-only /sys shows the host's module parameters); empty reads nothing")
	keepSnapshots := fs.Bool("keep-snapshots", false, "keep the snapshot the upgrade takes of each attached volume once its node completed (default: removed then; always kept on cancel and error)")
	var hf healthFlags
	hf.register(fs)
	var lf logFlags
	lf.register(fs)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		ctx, stderr := cmd.Context(), cmd.ErrOrStderr()
		if *node == "" {
			return fmt.Errorf("--node (or $NODE_NAME) is required: %w", errUsage)
		}
		if nf.url == "" {
			// The controller creates the streams and this node's consumer on the
			// shared NATS; a worker's own embedded server would have neither.
			return fmt.Errorf("--nats-url is required: a worker joins the controller's NATS: %w", errUsage)
		}
		if *tokenFile != "" && (nf.nkey != "" || nf.creds != "" || nf.user != "" || nf.passwordFile != "") {
			return fmt.Errorf("--nats-token-file and another NATS credential: give one (the token, through the auth callout, in the default install): %w", errUsage)
		}
		if nf.user == "" && nf.passwordFile != "" {
			// The generated user name encodes the node name (dots are not
			// subject tokens), which a DaemonSet's $(NODE_NAME) cannot.
			nf.user = natsauth.WorkerUser(*node)
		}
		log := lf.logger(stderr).With("node", *node)
		// Health is served first: binding waits for the controller, and a
		// liveness probe must not restart a worker that is only waiting.
		var conn atomic.Pointer[natsConn]
		ready := func() error {
			c := conn.Load()
			switch {
			case c == nil:
				return errors.New("waiting for the controller to create the streams and this node's command consumer")
			case !c.nc.IsConnected():
				return errors.New("not connected to NATS")
			}
			return nil
		}
		health, err := hf.serve(ctx, log, ready, metricsHandler(metrics.NewReady(ready)))
		if err != nil {
			return err
		}
		defer health.Close()
		c, err := nf.connect(ctx, "switchback-worker-"+*node, log, connectOptions{worker: *node, tokenFile: *tokenFile})
		if err != nil {
			return err
		}
		defer c.Close()
		var cfg *rest.Config
		if dp.kind == "longhorn" {
			if cfg, err = kf.config(); err != nil {
				return err
			}
		}
		plane, err := dp.open(ctx, cfg, c.nc, log)
		if err != nil {
			return err
		}
		host := ""
		if dp.kind == "longhorn" {
			host = *sysfs
		}
		w, err := nodeworker.New(nodeworker.Config{
			Node: *node, Store: c.store, Queue: c.queue, DataPlane: plane, Sysfs: host,
			StallAfter: *stallAfter, FailAfter: *failAfter, Resync: *resync, KeepSnapshots: *keepSnapshots, Log: log,
		})
		if err != nil {
			return err
		}
		if err := waitForNodeConsumer(ctx, c.js, *node, log); err != nil {
			return err
		}
		conn.Store(c)
		log.Info("worker started", "nats", redactURL(c.nc.ConnectedUrl()))
		if err := w.Run(ctx); err != nil && ctx.Err() == nil {
			return err
		}
		return nil
	}
	return cmd
}
