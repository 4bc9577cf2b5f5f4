package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/plan"
	"github.com/switchback-dev/switchback/precheck"
)

func runPlan(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("plan", "plan [--data-plane sim [--nodes N --volumes V] | --data-plane longhorn [--kubeconfig PATH] [--context C]] [--node NAME ...]", stderr)
	var df dataPlaneFlags
	fs.StringVar(&df.kind, "data-plane", "sim", "where the cluster is read from: sim (the demo's simulated cluster) or longhorn (a cluster's Longhorn, read only)")
	df.registerLonghorn(fs)
	var sf simFlags
	sf.register(fs)
	kubeconfig := fs.String("kubeconfig", "", "with --data-plane longhorn: the kubeconfig (default: $KUBECONFIG or ~/.kube/config with --context, else in-cluster)")
	kubeContext := fs.String("context", "", "with --data-plane longhorn: the kubeconfig context to use")
	var nodes stringList
	fs.Var(&nodes, "node", "a node to upgrade (repeat; none = every v2 node), as in spec.nodes")
	if err := parse(fs, args); err != nil {
		return err
	}
	var reader dataplane.Reader
	switch df.kind {
	case "sim":
		if err := sf.validate(); err != nil {
			return err
		}
		cluster, err := sf.build()
		if err != nil {
			return err
		}
		reader = cluster
	case "longhorn":
		cfg, err := kubeConfigContext(*kubeconfig, *kubeContext)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithCancel(ctx)
		defer cancel() // stops the adapter's informers
		plane, err := df.longhorn(ctx, cfg, slog.New(slog.DiscardHandler))
		if err != nil {
			return err
		}
		reader = plane
	default:
		return fmt.Errorf("--data-plane %q: want sim or longhorn: %w", df.kind, errUsage)
	}
	snap, err := plan.Read(ctx, reader)
	if err != nil {
		return err
	}
	results := precheck.Run(precheck.Input{Cluster: snap, DataEngine: "v2", RequestedNodes: nodes, TargetImage: snap.DefaultImage})
	fmt.Fprintln(stdout, "Prechecks (in the order the controller runs them):")
	for _, r := range results {
		mark := "ok  "
		if !r.Passed {
			mark = "FAIL"
		}
		fmt.Fprintf(stdout, "  %s %-28s %s\n", mark, r.Check, r.Message)
	}
	fmt.Fprintln(stdout)
	fmt.Fprint(stdout, plan.Build(snap, nodes, snap.DefaultImage).String())
	if !precheck.Passed(results) {
		return fmt.Errorf("%s: the upgrade would not start", precheck.Summary(results))
	}
	return nil
}
