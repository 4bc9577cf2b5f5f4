package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/switchback-dev/switchback/api/v1beta2"
	"github.com/switchback-dev/switchback/commands/intake"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/kubeclient"
	"github.com/switchback-dev/switchback/nodeworker"
	"github.com/switchback-dev/switchback/orchestrator"
	"github.com/switchback-dev/switchback/plan"
	"github.com/switchback-dev/switchback/replay"
	"github.com/switchback-dev/switchback/sim"
	"github.com/switchback-dev/switchback/sim/simremote"
	"github.com/switchback-dev/switchback/topology"
)

// demoNamespace (the default of --namespace) and demoName name the manager
// the demo creates.
const (
	demoNamespace = "longhorn-system"
	demoName      = "upgrade-v2"
)

func demoCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "demo", Args: noArgs,
		Example: "  switchback demo --nodes 6 --volumes 30\n" +
			"  switchback demo --stuck-volume --heal-after 5s     # a stall, then the upgrade resumes\n" +
			"  switchback demo --kubeconfig ~/.kube/kind --keep-running"}
	o := &demoOptions{}
	o.addFlags(cmd.Flags())
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if err := o.validate(); err != nil {
			return err
		}
		return o.run(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr())
	}
	return cmd
}

// demoOptions are `switchback demo`'s flags.
type demoOptions struct {
	sim                                 simFlags
	nats                                natsFlags
	kube                                kubeFlags
	namespace                           string
	timeout, stallAfter                 time.Duration
	moveWorkloads, verbose, keepRunning bool
}

func (o *demoOptions) addFlags(fs *pflag.FlagSet) {
	o.sim.register(fs)
	o.nats.register(fs, true)
	o.kube.register(fs, "use this cluster's API for the manager objects instead of an in-memory one: ")
	fs.StringVarP(&o.namespace, "namespace", "n", demoNamespace, "the manager's namespace")
	fs.DurationVar(&o.timeout, "timeout", 5*time.Minute, "give up (exit 1) if the upgrade has not ended by then")
	fs.DurationVar(&o.stallAfter, "stall-after", time.Second, "report a step stalled after this long without progress")
	fs.BoolVar(&o.moveWorkloads, "move-workloads", true, "create the manager with spec.initiatorPolicy move-workloads: the upgrade moves the pods off a node that cannot be upgraded live (false: the default, wait, and the demo ends stalled there)")
	fs.BoolVarP(&o.verbose, "verbose", "v", false, "log every component's messages to stderr")
	fs.BoolVar(&o.keepRunning, "keep-running", false, "after the end, keep NATS serving until interrupted (Ctrl-C), so that the printed nats and replay commands reach it")
}

// validate refuses a simulated cluster its flags cannot build, and a NATS
// of the user's: the demo runs its own.
func (o *demoOptions) validate() error {
	if err := o.sim.validate(); err != nil {
		return err
	}
	if o.nats.url != "" {
		return errors.New("the demo runs its own embedded NATS server; use --data-dir and --nats-port, not --nats-url")
	}
	return nil
}

// run builds the simulated cluster, runs every component on embedded NATS,
// creates the manager and shows the upgrade until it ends.
func (o *demoOptions) run(ctx context.Context, stdout, stderr io.Writer) error {
	if o.nats.dataDir == "" {
		dir, err := os.MkdirTemp("", "switchback-demo-*")
		if err != nil {
			return err
		}
		o.nats.dataDir = dir
	}
	log := slog.New(slog.DiscardHandler)
	if o.verbose {
		log = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()

	cluster, err := o.sim.build()
	if err != nil {
		return err
	}
	conn, err := o.nats.connect(ctx, "switchback-demo", log, connectOptions{})
	if err != nil {
		return err
	}
	defer conn.Close()
	kc, cs, where, err := demoKube(&o.kube)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "switchback demo: %d nodes, %d volumes (simulated Longhorn, profile %s); NATS on %s (store %s); manager API: %s\n",
		o.sim.nodes, o.sim.volumes, o.sim.profile, conn.server.ClientURL(), o.nats.dataDir, where)
	fmt.Fprintf(stdout, "  tail it:  nats --server %s sub 'sb.evt.>'   ·   nats --server %s stream view SWITCHBACK_EVENTS\n\n",
		conn.server.ClientURL(), conn.server.ClientURL())

	var wg sync.WaitGroup
	runCtx, stopAll := context.WithCancel(ctx)
	defer func() { stopAll(); wg.Wait() }()
	start := func(name string, run func(context.Context) error) {
		wg.Go(func() {
			if err := run(runCtx); err != nil && runCtx.Err() == nil {
				log.Error("component stopped", "component", name, "error", err)
			}
		})
	}
	if err := o.startComponents(ctx, runCtx, conn, cluster, kc, cs, log, start); err != nil {
		return err
	}
	// Outside workers (`switchback worker --data-plane sim --nats-url …`)
	// can reach the simulated cluster too.
	simServer, err := simremote.Serve(conn.nc, topology.SimPrefix, cluster)
	if err != nil {
		return err
	}
	defer simServer.Stop()
	if err := o.injectStuckVolume(ctx, cluster, stdout); err != nil {
		return err
	}

	policy := v1beta2.InitiatorPolicyWait
	if o.moveWorkloads {
		policy = v1beta2.InitiatorPolicyMoveWorkloads
	}
	m, err := kc.Managers(o.namespace).Create(ctx, &v1beta2.DataEngineUpgradeManager{
		ObjectMeta: metav1.ObjectMeta{Name: demoName, Namespace: o.namespace, UID: types.UID(fmt.Sprintf("demo-%d", time.Now().UnixNano())), Generation: 1},
		Spec:       v1beta2.DataEngineUpgradeManagerSpec{DataEngine: v1beta2.DataEngineTypeV2, InitiatorPolicy: policy},
	})
	if err != nil {
		return fmt.Errorf("create the DataEngineUpgradeManager: %w", err)
	}
	ref := events.ManagerRef{Namespace: m.Namespace, Name: m.Name, UID: string(m.UID)}
	fmt.Fprintf(stdout, "created DataEngineUpgradeManager %s/%s (every v2 node, initiatorPolicy %s)\n\n", ref.Namespace, ref.Name, policy)

	final, err := watchDemo(ctx, conn, cluster, ref, stdout)
	if err == nil {
		// The history has ended; the cluster's objects show it once the
		// projector has written the last status and, after a cancel, the
		// intake has let the manager go: only then may they stop.
		err = waitForTheEnd(ctx, kc, conn.store, ref)
	}
	stopAll()
	wg.Wait()

	ios := o.printEnd(parent, conn, cluster, ref, stdout)
	if err != nil {
		return err
	}
	if final.State != events.ManagerCompleted {
		return fmt.Errorf("the upgrade ended %s: %s", final.State, final.Message)
	}
	if ios.FailedByActions() > 0 {
		return fmt.Errorf("%d I/Os failed because of the upgrade", ios.FailedByActions())
	}
	return nil
}

// startComponents starts what the controller and the workers run: the
// orchestrator, a worker per node, the intake and the projector.
func (o *demoOptions) startComponents(ctx, runCtx context.Context, conn *natsConn, cluster *sim.Sim, kc *kubeclient.Client, cs kubernetes.Interface,
	log *slog.Logger, start func(string, func(context.Context) error)) error {
	orch, err := orchestrator.New(orchestrator.Config{Store: conn.store, Queue: conn.queue, Cluster: cluster, Log: log})
	if err != nil {
		return err
	}
	start("orchestrator", orch.Run)
	nodes, err := cluster.Nodes(ctx)
	if err != nil {
		return err
	}
	for _, n := range nodes {
		w, err := nodeworker.New(nodeworker.Config{Node: n.Name, Store: conn.store, Queue: conn.queue, DataPlane: cluster,
			StallAfter: o.stallAfter, FailAfter: 10 * o.stallAfter, Log: log})
		if err != nil {
			return err
		}
		start("worker "+n.Name, w.Run)
	}
	in, err := intake.New(intake.Config{Client: kc, Store: conn.store, Namespace: o.namespace, Log: log})
	if err != nil {
		return err
	}
	start("intake", in.Run)
	return startProjector(runCtx, conn, kc, cs, log, start)
}

// injectStuckVolume makes one attached volume's switch-overs keep failing
// (--stuck-volume), fixed after --heal-after when given.
func (o *demoOptions) injectStuckVolume(ctx context.Context, cluster *sim.Sim, stdout io.Writer) error {
	if !o.sim.stuckVolume {
		return nil
	}
	vol, err := stuckCandidate(ctx, cluster)
	if err != nil {
		return err
	}
	if err := cluster.InjectTargetMoveFailure(vol); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "fault: the switch-overs of volume %s keep failing", vol)
	if o.sim.healAfter > 0 {
		fmt.Fprintf(stdout, " (fixed after %s)", o.sim.healAfter)
		time.AfterFunc(o.sim.healAfter, func() { _ = cluster.HealTargetMoveFailure(vol) })
	}
	fmt.Fprintln(stdout)
	return nil
}

// printEnd shows the replayed history, the I/O checker's verdict and how to
// read the history again; with --keep-running it serves NATS until parent
// ends. It returns the I/O checker's figures.
func (o *demoOptions) printEnd(parent context.Context, conn *natsConn, cluster *sim.Sim, ref events.ManagerRef, stdout io.Writer) sim.IOStats {
	fmt.Fprintln(stdout)
	res, rerr := replay.Run(context.Background(), conn.store, replay.Options{Manager: ref.Name, Namespace: ref.Namespace})
	if rerr == nil {
		_ = res.WriteTable(stdout)
	}
	ios := cluster.IOStats()
	fmt.Fprintf(stdout, "\nI/O checker: %d I/Os issued, %d failed (%d caused by the upgrade)\n", ios.Issued, ios.Failed, ios.FailedByActions())
	fmt.Fprintf(stdout, "I/O checker: %s\n", describeWorstStall(ios))
	if restarts := cluster.Restarts(); len(restarts) > 0 {
		most := 0
		for _, n := range restarts {
			most = max(most, n)
		}
		fmt.Fprintf(stdout, "workloads moved: %d, each restarted at most %d time(s)\n", len(restarts), most)
	}
	if o.keepRunning {
		url := conn.server.ClientURL()
		fmt.Fprintf(stdout, "replay this history:  switchback replay --nats-url %s\n", url)
		fmt.Fprintf(stdout, "its timeline:         switchback history %s --nats-url %s\n", ref.Name, url)
		fmt.Fprintf(stdout, "its picture:          switchback report %s --nats-url %s -o upgrade.html\n", ref.Name, url)
		fmt.Fprintf(stdout, "tail it:              nats --server %s stream view %s\n", url, topology.EventStream)
		fmt.Fprintf(stdout, "NATS keeps serving at %s until interrupted (Ctrl-C)\n", url)
		<-parent.Done()
	} else {
		dir := o.nats.dataDir
		fmt.Fprintf(stdout, "replay this history:  switchback replay --data-dir %s\n", dir)
		fmt.Fprintf(stdout, "its timeline:         switchback history %s --data-dir %s\n", ref.Name, dir)
		fmt.Fprintf(stdout, "its picture:          switchback report %s --data-dir %s -o upgrade.html\n", ref.Name, dir)
	}
	return ios
}

// demoKube returns the manager API and a clientset for Events: a real
// cluster's, or an in-memory API and no clientset (startProjector drops the
// Events nothing could read).
func demoKube(kf *kubeFlags) (*kubeclient.Client, kubernetes.Interface, string, error) {
	if !kf.given() {
		return kubeclient.NewFake(), nil, "in memory", nil
	}
	cfg, err := kf.config()
	if err != nil {
		return nil, nil, "", err
	}
	kc, err := kubeclient.New(cfg)
	if err != nil {
		return nil, nil, "", err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	return kc, cs, cfg.Host, err
}

// stuckCandidate is an attached v2 volume whose node's upgrade will reach
// switching-over: the first one whose target runs on a node holding no
// initiator (on v1.12 the others' nodes stall before that), else the first.
func stuckCandidate(ctx context.Context, s *sim.Sim) (string, error) {
	vols, err := s.Volumes(ctx)
	if err != nil {
		return "", err
	}
	first := ""
	for _, v := range vols {
		if !v.Attached() || v.DataEngine != "v2" {
			continue
		}
		if first == "" {
			first = v.Name
		}
		if live, _ := plan.LiveVerdict(s.Profile(), v.TargetNode, vols); live {
			return v.Name, nil
		}
	}
	if first == "" {
		return "", errors.New("--stuck-volume: the cluster has no attached v2 volume")
	}
	return first, nil
}
