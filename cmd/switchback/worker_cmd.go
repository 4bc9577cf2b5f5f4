package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/rest"

	"github.com/switchback-dev/switchback/hostkernel"
	"github.com/switchback-dev/switchback/metrics"
	"github.com/switchback-dev/switchback/natsauth"
	"github.com/switchback-dev/switchback/natsauth/callout"
	"github.com/switchback-dev/switchback/nodeworker"
)

// workerOptions are `switchback worker`'s flags: addFlags registers them,
// validate refuses a wrong combination, run runs the node's worker.
type workerOptions struct {
	nats      natsFlags
	dataPlane dataPlaneFlags
	kube      kubeFlags
	health    healthFlags
	log       logFlags

	node, tokenFile, sysfs        string
	stallAfter, failAfter, resync time.Duration
	keepSnapshots                 bool // deprecated, unused
	hashRate                      string
	hashRateBytes                 int64
	hashFloor                     time.Duration
	copyRate                      string
	copyRateBytes                 int64
}

func (o *workerOptions) addFlags(fs *pflag.FlagSet) {
	o.nats.register(fs, false)
	fs.StringVar(&o.node, "node", os.Getenv("NODE_NAME"), "the node this worker upgrades (default $NODE_NAME, from the downward API)")
	fs.StringVar(&o.tokenFile, "nats-token-file", "", "the pod's projected ServiceAccount token (audience "+callout.DefaultAudience+"), presented to the NATS auth callout at every (re)connect: "+
		"the default install, "+callout.DefaultTokenPath+"; empty authenticates with --nats-nkey/--nats-creds/--nats-user")
	o.dataPlane.register(fs)
	o.kube.register(fs, "with --data-plane longhorn: ")
	fs.DurationVar(&o.stallAfter, "stall-after", 2*time.Minute, "report a step stalled after this long without progress")
	fs.DurationVar(&o.failAfter, "fail-after", 10*time.Minute, "fail the node when its new instance manager stays in error this long")
	fs.DurationVar(&o.resync, "resync-interval", 30*time.Second, "the longest a waiting step goes without looking at the cluster again: it wakes at once on a change of the cluster (Longhorn's watch, or the simulated cluster's notices) and on a cancel, so this is only a safety net for a lost notice")
	fs.DurationVar(&o.resync, "poll-interval", 30*time.Second, "the old name of --resync-interval, from when a waiting step looked at the cluster on a timer")
	_ = fs.MarkDeprecated("poll-interval", "a waiting step wakes on the cluster's changes now: use --resync-interval, the safety re-read")
	fs.StringVar(&o.sysfs, "sysfs", hostkernel.DefaultSysfs, "with --data-plane longhorn: where the worker reads its node's kernel, nvme_core.multipath, and reports it on the node's Longhorn node "+
		"(a container's read-only /sys shows the host's module parameters); empty reads nothing")
	fs.BoolVar(&o.keepSnapshots, "keep-snapshots", false, "unused: the controller removes the upgrade's snapshots once it completed")
	_ = fs.MarkDeprecated("keep-snapshots", "the controller removes the upgrade's snapshots once the whole upgrade completed: use switchback controller --keep-snapshots")
	fs.StringVar(&o.hashRate, "hash-rate", "64Mi", "the rate, per second and replica, at which Longhorn is expected to hash a volume's snapshots before its replica is failed (a quantity: 64Mi, 1Gi): "+
		"the wait for the hashing lasts --hash-floor plus what there is to hash at this rate, then the replica is failed unhashed (its rebuild copies it whole)")
	fs.DurationVar(&o.hashFloor, "hash-floor", 2*time.Minute, "the least time given to the hashing of a volume's snapshots (see --hash-rate), and to the copy of a temporary replica (see --copy-rate)")
	fs.StringVar(&o.copyRate, "copy-rate", "100Mi", "the rate, per second, at which Longhorn is expected to build a volume's temporary replica under spec.replicaPolicy add-first (a quantity): "+
		"the wait for it is not reported stalled before --hash-floor plus the volume's actual size at this rate")
	o.health.register(fs)
	o.log.register(fs)
}

// validate refuses flags that cannot work together, as usage errors, and
// completes the NATS user a password names.
func (o *workerOptions) validate() error {
	nf := &o.nats
	switch {
	case o.node == "":
		return fmt.Errorf("--node (or $NODE_NAME) is required: %w", errUsage)
	case nf.url == "":
		// The controller creates the streams and this node's consumer on the
		// shared NATS; a worker's own embedded server would have neither.
		return fmt.Errorf("--nats-url is required: a worker joins the controller's NATS: %w", errUsage)
	case o.tokenFile != "" && (nf.nkey != "" || nf.creds != "" || nf.user != "" || nf.passwordFile != ""):
		return fmt.Errorf("--nats-token-file and another NATS credential: give one (the token, through the auth callout, in the default install): %w", errUsage)
	}
	q, err := resource.ParseQuantity(o.hashRate)
	if err != nil || q.Sign() <= 0 {
		return fmt.Errorf("--hash-rate %q: a positive quantity, such as 64Mi: %w", o.hashRate, errUsage)
	}
	o.hashRateBytes = q.Value()
	if q, err = resource.ParseQuantity(o.copyRate); err != nil || q.Sign() <= 0 {
		return fmt.Errorf("--copy-rate %q: a positive quantity, such as 100Mi: %w", o.copyRate, errUsage)
	}
	o.copyRateBytes = q.Value()
	if nf.user == "" && nf.passwordFile != "" {
		// The generated user name encodes the node name (dots are not
		// subject tokens), which a DaemonSet's $(NODE_NAME) cannot.
		nf.user = natsauth.WorkerUser(o.node)
	}
	return nil
}

// run serves health first (binding waits for the controller, and a liveness
// probe must not restart a worker that is only waiting), then connects,
// binds to the node's consumer and works until ctx ends.
func (o *workerOptions) run(ctx context.Context, stderr io.Writer) error {
	log := o.log.logger(stderr).With("node", o.node)
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
	health, err := o.health.serve(ctx, log, ready, metricsHandler(metrics.NewReady(ready)))
	if err != nil {
		return err
	}
	defer health.Close()
	c, err := o.nats.connect(ctx, "switchback-worker-"+o.node, log, connectOptions{worker: o.node, tokenFile: o.tokenFile})
	if err != nil {
		return err
	}
	defer c.Close()
	var cfg *rest.Config
	host := ""
	if o.dataPlane.kind == "longhorn" {
		if cfg, err = o.kube.config(); err != nil {
			return err
		}
		host = o.sysfs
	}
	plane, err := o.dataPlane.open(ctx, cfg, c.nc, log)
	if err != nil {
		return err
	}
	w, err := nodeworker.New(nodeworker.Config{
		Node: o.node, Store: c.store, Queue: c.queue, DataPlane: plane, Sysfs: host,
		StallAfter: o.stallAfter, FailAfter: o.failAfter, Resync: o.resync, HashRate: o.hashRateBytes, HashFloor: o.hashFloor, CopyRate: o.copyRateBytes, Log: log,
	})
	if err != nil {
		return err
	}
	if err := waitForNodeConsumer(ctx, c.js, o.node, log); err != nil {
		return err
	}
	conn.Store(c)
	log.Info("worker started", "nats", redactURL(c.nc.ConnectedUrl()))
	if err := w.Run(ctx); err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}

func workerCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "worker", Args: noArgs}
	o := &workerOptions{}
	o.addFlags(cmd.Flags())
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if err := o.validate(); err != nil {
			return err
		}
		return o.run(cmd.Context(), cmd.ErrOrStderr())
	}
	return cmd
}
