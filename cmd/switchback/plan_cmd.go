package main

import (
	"context"
	"fmt"
	"io"

	"github.com/switchback-dev/switchback/plan"
	"github.com/switchback-dev/switchback/precheck"
)

func runPlan(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("plan", "plan [--data-plane sim --nodes N --volumes V] [--node NAME ...]", stderr)
	dataPlane := fs.String("data-plane", "sim", "where the cluster is read from: sim (the demo's simulated cluster)")
	var sf simFlags
	sf.register(fs)
	var nodes stringList
	fs.Var(&nodes, "node", "a node to upgrade (repeat; none = every v2 node), as in spec.nodes")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *dataPlane != "sim" {
		return fmt.Errorf("--data-plane %q: only sim is available in this build", *dataPlane)
	}
	if err := sf.validate(); err != nil {
		return err
	}
	cluster, err := sf.build()
	if err != nil {
		return err
	}
	snap, err := plan.Read(ctx, cluster)
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
