package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"

	"sigs.k8s.io/yaml"

	"github.com/spf13/cobra"

	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/plan"
	"github.com/switchback-dev/switchback/precheck"
)

func planCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "plan", Args: noArgs,
		Long: "plan reads the cluster and says what an upgrade would do: the Longhorn detected, the prechecks,\n" +
			"the node order, which nodes can be upgraded live (and why not), which targets move where. It appends nothing.\n" +
			"The simulated cluster's flags are listed with --data-plane sim --help.",
		Example: "  switchback plan --context prod                 # every v2 node of the cluster prod\n" +
			"  switchback plan --node worker-3 -o yaml        # one node, machine-readable\n" +
			"  switchback plan --data-plane sim --nodes 6     # the demo's simulated cluster"}
	fs := cmd.Flags()
	var df dataPlaneFlags
	inSection(fs, flagsDataPlane, func() {
		fs.StringVar(&df.kind, "data-plane", "longhorn", "where the cluster is read from: longhorn (a cluster's Longhorn, read only) or sim (the demo's simulated cluster)")
	})
	df.registerLonghorn(fs)
	var sf simFlags
	sf.register(fs)
	hideUnless(cmd, flagsSimulated, func() bool { return df.kind == "sim" })
	var kf kubeFlags
	kf.register(fs, "with --data-plane longhorn: ")
	var nodes stringList
	fs.Var(&nodes, "node", "a node to upgrade (repeat; none = every v2 node), as in spec.nodes")
	allowUnschedulable := fs.Bool("allow-nodes-without-replica-scheduling", false,
		"as spec.allowNodesWithoutReplicaScheduling: accept nodes to upgrade that do not allow replica scheduling")
	output := fs.StringP("output", "o", "table", "output format: table, json or yaml")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		ctx, stdout := cmd.Context(), cmd.OutOrStdout()
		if *output != "table" && *output != "json" && *output != "yaml" {
			return fmt.Errorf("-o %q: want table, json or yaml: %w", *output, errUsage)
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
			cfg, err := kf.config()
			if err != nil {
				return err
			}
			ctx, cancel := context.WithCancel(ctx)
			defer cancel() // stops the adapter's informers
			plane, err := df.longhorn(ctx, cfg, slog.New(slog.DiscardHandler))
			if err != nil {
				return explainKube(cfg.Host, "read Longhorn in "+df.namespace, err)
			}
			reader = plane
		default:
			return fmt.Errorf("--data-plane %q: want sim or longhorn: %w", df.kind, errUsage)
		}
		snap, err := plan.Read(ctx, reader)
		if err != nil {
			return err
		}
		results := precheck.Run(precheck.Input{Cluster: snap, DataEngine: "v2", RequestedNodes: nodes, TargetImage: snap.DefaultImage,
			AllowNodesWithoutReplicaScheduling: *allowUnschedulable})
		built := plan.Build(snap, nodes, snap.DefaultImage)
		if *output != "table" {
			if err := writeStructured(stdout, *output, planOutput{Prechecks: results, Plan: built}); err != nil {
				return err
			}
			if !precheck.Passed(results) {
				return refusedError{precheck.Summary(results)}
			}
			return nil
		}
		fmt.Fprintln(stdout, "Prechecks (in the order the controller runs them):")
		for _, r := range results {
			mark := "ok  "
			if !r.Passed {
				mark = "FAIL"
			}
			fmt.Fprintf(stdout, "  %s %-28s %s\n", mark, r.Check, r.Message)
		}
		fmt.Fprintln(stdout)
		fmt.Fprint(stdout, built.String())
		if !precheck.Passed(results) {
			return refusedError{precheck.Summary(results)}
		}
		return nil
	}
	return cmd
}

// refusedError: the prechecks would refuse the upgrade (exit code 4, so
// that a script tells a refusal from a failure to read the cluster).
type refusedError struct{ summary string }

func (e refusedError) Error() string { return e.summary + ": the upgrade would not start" }

// ExitCode implements exitCoder.
func (refusedError) ExitCode() int { return 4 }

// planOutput is plan's machine-readable form: the prechecks in the order the
// controller runs them, and the plan.
type planOutput struct {
	Prechecks []precheck.Result `json:"prechecks"`
	Plan      plan.Plan         `json:"plan"`
}

// writeStructured writes v as indented JSON or as YAML.
func writeStructured(w io.Writer, format string, v any) error {
	if format == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	b, err := yaml.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}
