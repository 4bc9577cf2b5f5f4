package main

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/client-go/tools/leaderelection"

	"github.com/switchback-dev/switchback/historystorage"
	"github.com/switchback-dev/switchback/natsauth/callout"
	"github.com/switchback-dev/switchback/webhook"
)

// leaseName is the leader-election Lease; RBAC grants update on this name only.
const leaseName = "switchback-controller"

// controllerOptions are `switchback controller`'s flags: addFlags registers
// them, validate refuses a wrong combination before anything is read of the
// cluster, run (controller_run.go) runs the controller.
type controllerOptions struct {
	nats      natsFlags
	kube      kubeFlags
	dataPlane dataPlaneFlags
	health    healthFlags
	log       logFlags

	namespace, identity string
	ackWait             time.Duration
	qps                 float64
	burst               int

	leaderElect                               bool
	leaseDuration, renewDeadline, retryPeriod time.Duration

	webhookAddr, certDir string
	guard                bool
	trusted              stringList

	historyVolumes    string
	historyOnLonghorn bool
	keepSnapshots     bool

	calloutDir, calloutSA string
	calloutTTL            time.Duration
}

func (o *controllerOptions) addFlags(fs *pflag.FlagSet) {
	o.nats.register(fs, true)
	o.kube.register(fs, "")
	fs.StringVarP(&o.namespace, "namespace", "n", "longhorn-system", "namespace of the managers, and of the leader-election lease")
	fs.StringVar(&o.identity, "id", hostnameOr("switchback-controller"), "this replica's identity for leader election")
	fs.DurationVar(&o.ackWait, "command-ack-wait", 10*time.Second, "how long a node's command waits for a worker that stopped answering before it is redelivered (workers keep live commands with heartbeats)")
	fs.Float64Var(&o.qps, "kube-api-qps", defaultKubeQPS, "requests per second to the kube-apiserver (status writes, Events, the lease)")
	fs.IntVar(&o.burst, "kube-api-burst", defaultKubeBurst, "burst of requests to the kube-apiserver above --kube-api-qps")
	fs.BoolVar(&o.leaderElect, "leader-elect", true, "run intake, orchestrator and projector only while holding the lease")
	fs.DurationVar(&o.leaseDuration, "leader-elect-lease-duration", 15*time.Second, "how long a lease is valid without renewal: a crashed leader is replaced after at most this long")
	fs.DurationVar(&o.renewDeadline, "leader-elect-renew-deadline", 10*time.Second, "how long the leader keeps trying to renew before it stops leading")
	fs.DurationVar(&o.retryPeriod, "leader-elect-retry-period", 2*time.Second, "how often replicas try to acquire or renew the lease")
	o.dataPlane.register(fs)
	fs.StringVar(&o.webhookAddr, "webhook-addr", fmt.Sprintf(":%d", webhook.DefaultPort), "admission webhook address (empty = no webhook)")
	fs.StringVar(&o.certDir, "webhook-cert-dir", "/etc/switchback/webhook", "directory with the webhook's tls.crt and tls.key (reloaded on change)")
	fs.StringVar(&o.historyVolumes, "history-volumes", historystorage.DefaultSelector, "label selector of the bundled NATS servers' volume claims in --namespace, refused on Longhorn's storage at start (empty = no check, e.g. an external NATS)")
	fs.BoolVar(&o.keepSnapshots, "keep-snapshots", false, "keep the snapshots the upgrade takes of the attached volumes once it completed (default: removed then; always kept on cancel and error)")
	fs.BoolVar(&o.historyOnLonghorn, "allow-history-on-longhorn", false, "start even when the NATS servers' volumes are Longhorn's: the upgrade's history then lives on the storage it upgrades")
	fs.BoolVar(&o.guard, "guard-longhorn", true, "serve the guard that refuses new v2 attachments and engine moves onto a node being upgraded (deploy/webhook/guard.yaml sends it the writes)")
	fs.Var(&o.trusted, "guard-trusted-user", "a user whose writes the guard lets through, besides the workers' service account system:serviceaccount:<namespace>:switchback-worker (repeat)")
	fs.StringVar(&o.calloutDir, "nats-callout", "", "serve the NATS auth callout with the keys in this directory (the Secret "+callout.SecretName+"; `switchback nats-auth --callout` makes it): "+
		"each worker presenting its pod's ServiceAccount token gets its node's NATS user; every replica serves, leading or not")
	fs.StringVar(&o.calloutSA, "nats-callout-service-account", callout.DefaultServiceAccount, "with --nats-callout: the workers' ServiceAccount in --namespace, the only one admitted")
	fs.DurationVar(&o.calloutTTL, "nats-callout-max-ttl", callout.DefaultMaxTTL, "with --nats-callout: the longest a worker's NATS user lives (never past its token); it then reconnects with its current token")
	o.health.register(fs)
	o.log.register(fs)
}

// validate refuses flags that cannot work together, as usage errors.
func (o *controllerOptions) validate() error {
	if o.ackWait < time.Second {
		return fmt.Errorf("--command-ack-wait %s: want at least 1s: %w", o.ackWait, errUsage)
	}
	if err := o.nats.validate(); err != nil {
		return err
	}
	// client-go panics on these (RunOrDie); say which flag is wrong instead.
	if o.leaseDuration <= o.renewDeadline || float64(o.renewDeadline) <= leaderelection.JitterFactor*float64(o.retryPeriod) || o.retryPeriod <= 0 {
		return fmt.Errorf("want --leader-elect-lease-duration (%s) > --leader-elect-renew-deadline (%s) > %.1f × --leader-elect-retry-period (%s) > 0: %w",
			o.leaseDuration, o.renewDeadline, leaderelection.JitterFactor, o.retryPeriod, errUsage)
	}
	return nil
}

func controllerCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "controller", Args: noArgs}
	o := &controllerOptions{}
	o.addFlags(cmd.Flags())
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if err := o.validate(); err != nil {
			return err
		}
		return o.run(cmd.Context(), cmd.ErrOrStderr())
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
