package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/spf13/cobra"

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
	fs := cmd.Flags()
	var sf simFlags
	sf.register(fs)
	var nf natsFlags
	nf.register(fs, true)
	var kf kubeFlags
	kf.register(fs, "use this cluster's API for the manager objects instead of an in-memory one: ")
	namespace := fs.StringP("namespace", "n", demoNamespace, "the manager's namespace")
	timeout := fs.Duration("timeout", 5*time.Minute, "give up (exit 1) if the upgrade has not ended by then")
	stallAfter := fs.Duration("stall-after", time.Second, "report a step stalled after this long without progress")
	moveWorkloads := fs.Bool("move-workloads", true, "act as the cluster's user: move the workloads off a node that cannot be upgraded live (false: the demo ends stalled there)")
	verbose := fs.BoolP("verbose", "v", false, "log every component's messages to stderr")
	keepRunning := fs.Bool("keep-running", false, "after the end, keep NATS serving until interrupted (Ctrl-C), so that the printed nats and replay commands reach it")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		ctx, stdout, stderr := cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr()
		if err := sf.validate(); err != nil {
			return err
		}
		if nf.url != "" {
			return errors.New("the demo runs its own embedded NATS server; use --data-dir and --nats-port, not --nats-url")
		}
		if nf.dataDir == "" {
			dir, err := os.MkdirTemp("", "switchback-demo-*")
			if err != nil {
				return err
			}
			nf.dataDir = dir
		}
		log := slog.New(slog.DiscardHandler)
		if *verbose {
			log = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
		}
		parent := ctx
		ctx, cancel := context.WithTimeout(ctx, *timeout)
		defer cancel()

		cluster, err := sf.build()
		if err != nil {
			return err
		}
		conn, err := nf.connect(ctx, "switchback-demo", log, connectOptions{})
		if err != nil {
			return err
		}
		defer conn.Close()
		kc, cs, where, err := demoKube(&kf)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "switchback demo: %d nodes, %d volumes (simulated Longhorn, profile %s); NATS on %s (store %s); manager API: %s\n",
			sf.nodes, sf.volumes, sf.profile, conn.server.ClientURL(), nf.dataDir, where)
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
				StallAfter: *stallAfter, FailAfter: 10 * *stallAfter, Log: log})
			if err != nil {
				return err
			}
			start("worker "+n.Name, w.Run)
		}
		in, err := intake.New(intake.Config{Client: kc, Store: conn.store, Namespace: *namespace, Log: log})
		if err != nil {
			return err
		}
		start("intake", in.Run)
		if err := startProjector(runCtx, conn, kc, cs, log, start); err != nil {
			return err
		}
		// Outside workers (`switchback worker --data-plane sim --nats-url …`)
		// can reach the simulated cluster too.
		simServer, err := simremote.Serve(conn.nc, topology.SimPrefix, cluster)
		if err != nil {
			return err
		}
		defer simServer.Stop()

		if sf.stuckVolume {
			vol, err := stuckCandidate(ctx, cluster)
			if err != nil {
				return err
			}
			if err := cluster.InjectTargetMoveFailure(vol); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "fault: the switch-overs of volume %s keep failing", vol)
			if sf.healAfter > 0 {
				fmt.Fprintf(stdout, " (fixed after %s)", sf.healAfter)
				time.AfterFunc(sf.healAfter, func() { _ = cluster.HealTargetMoveFailure(vol) })
			}
			fmt.Fprintln(stdout)
		}

		m, err := kc.Managers(*namespace).Create(ctx, &v1beta2.DataEngineUpgradeManager{
			ObjectMeta: metav1.ObjectMeta{Name: demoName, Namespace: *namespace, UID: types.UID(fmt.Sprintf("demo-%d", time.Now().UnixNano())), Generation: 1},
			Spec:       v1beta2.DataEngineUpgradeManagerSpec{DataEngine: v1beta2.DataEngineTypeV2},
		})
		if err != nil {
			return fmt.Errorf("create the DataEngineUpgradeManager: %w", err)
		}
		ref := events.ManagerRef{Namespace: m.Namespace, Name: m.Name, UID: string(m.UID)}
		fmt.Fprintf(stdout, "created DataEngineUpgradeManager %s/%s (every v2 node)\n\n", ref.Namespace, ref.Name)

		final, err := watchDemo(ctx, conn, cluster, &demoOperator{cluster: cluster, enabled: *moveWorkloads}, ref, stdout)
		if err == nil {
			// The history has ended; the cluster's objects show it once the
			// projector has written the last status and, after a cancel, the
			// intake has let the manager go: only then may they stop.
			err = waitForTheEnd(ctx, kc, conn.store, ref)
		}
		stopAll()
		wg.Wait()

		fmt.Fprintln(stdout)
		res, rerr := replay.Run(context.Background(), conn.store, replay.Options{Manager: ref.Name, Namespace: ref.Namespace})
		if rerr == nil {
			_ = res.WriteTable(stdout)
		}
		io := cluster.IOStats()
		fmt.Fprintf(stdout, "\nI/O checker: %d I/Os issued, %d failed (%d caused by the upgrade)\n", io.Issued, io.Failed, io.FailedByActions())
		fmt.Fprintf(stdout, "I/O checker: %s\n", describeWorstStall(io))
		if *keepRunning {
			url := conn.server.ClientURL()
			fmt.Fprintf(stdout, "replay this history:  switchback replay --nats-url %s\n", url)
			fmt.Fprintf(stdout, "its timeline:         switchback history %s --nats-url %s\n", ref.Name, url)
			fmt.Fprintf(stdout, "its picture:          switchback report %s --nats-url %s -o upgrade.html\n", ref.Name, url)
			fmt.Fprintf(stdout, "tail it:              nats --server %s stream view %s\n", url, topology.EventStream)
			fmt.Fprintf(stdout, "NATS keeps serving at %s until interrupted (Ctrl-C)\n", url)
			<-parent.Done()
		} else {
			fmt.Fprintf(stdout, "replay this history:  switchback replay --data-dir %s\n", nf.dataDir)
			fmt.Fprintf(stdout, "its timeline:         switchback history %s --data-dir %s\n", ref.Name, nf.dataDir)
			fmt.Fprintf(stdout, "its picture:          switchback report %s --data-dir %s -o upgrade.html\n", ref.Name, nf.dataDir)
		}
		if err != nil {
			return err
		}
		if final.State != events.ManagerCompleted {
			return fmt.Errorf("the upgrade ended %s: %s", final.State, final.Message)
		}
		if io.FailedByActions() > 0 {
			return fmt.Errorf("%d I/Os failed because of the upgrade", io.FailedByActions())
		}
		return nil
	}
	return cmd
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
