package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"

	"sigs.k8s.io/yaml"

	"github.com/spf13/cobra"

	"github.com/switchback-dev/switchback/api/v1beta2"
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
	o := &planOptions{}
	o.addFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if err := o.validate(); err != nil {
			return err
		}
		return o.run(cmd.Context(), cmd.OutOrStdout())
	}
	return cmd
}

// planOptions are `switchback plan`'s flags.
type planOptions struct {
	dataPlane          dataPlaneFlags
	sim                simFlags
	kube               kubeFlags
	nodes              stringList
	allowUnschedulable bool
	initiatorPolicy    string
	replicaPolicy      string
	maxConcurrent      int
	output             string
}

func (o *planOptions) addFlags(cmd *cobra.Command) {
	fs := cmd.Flags()
	inSection(fs, flagsDataPlane, func() {
		fs.StringVar(&o.dataPlane.kind, "data-plane", "longhorn", "where the cluster is read from: longhorn (a cluster's Longhorn, read only) or sim (the demo's simulated cluster)")
	})
	o.dataPlane.registerLonghorn(fs)
	o.sim.register(fs)
	hideUnless(cmd, flagsSimulated, func() bool { return o.dataPlane.kind == "sim" })
	o.kube.register(fs, "with --data-plane longhorn: ")
	fs.Var(&o.nodes, "node", "a node to upgrade (repeat; none = every v2 node), as in spec.nodes")
	fs.BoolVar(&o.allowUnschedulable, "allow-nodes-without-replica-scheduling", false,
		"as spec.allowNodesWithoutReplicaScheduling: accept nodes to upgrade that do not allow replica scheduling")
	fs.StringVar(&o.initiatorPolicy, "initiator-policy", "wait",
		"as spec.initiatorPolicy: wait, or move-workloads to show, per node that cannot be upgraded live, the pods that would be evicted, the budgets that would hold them now, the share-managers whose NFS would restart and what pins the node")
	fs.StringVar(&o.replicaPolicy, "replica-policy", string(v1beta2.ReplicaPolicyRebuild),
		"as spec.replicaPolicy: rebuild, or add-first to show the temporary replicas, where Longhorn is expected to place them and the room they take per disk")
	fs.IntVar(&o.maxConcurrent, "max-concurrent-nodes", 1,
		"show the waves of up to this many nodes upgraded at once (two nodes share a wave only if no attached volume depends on both), and per node why it could not join an earlier wave")
	fs.StringVarP(&o.output, "output", "o", "table", "output format: table, json or yaml")
}

// validate refuses an unknown output or data plane, and a simulated cluster
// its flags cannot build.
func (o *planOptions) validate() error {
	if o.output != "table" && o.output != "json" && o.output != "yaml" {
		return fmt.Errorf("-o %q: want table, json or yaml: %w", o.output, errUsage)
	}
	if o.initiatorPolicy != string(v1beta2.InitiatorPolicyWait) && o.initiatorPolicy != string(v1beta2.InitiatorPolicyMoveWorkloads) {
		return fmt.Errorf("--initiator-policy %q: want %s or %s: %w", o.initiatorPolicy, v1beta2.InitiatorPolicyWait, v1beta2.InitiatorPolicyMoveWorkloads, errUsage)
	}
	if o.maxConcurrent < 1 {
		return fmt.Errorf("--max-concurrent-nodes %d: want at least 1: %w", o.maxConcurrent, errUsage)
	}
	if o.replicaPolicy != string(v1beta2.ReplicaPolicyRebuild) && o.replicaPolicy != string(v1beta2.ReplicaPolicyAddFirst) {
		return fmt.Errorf("--replica-policy %q: want %s or %s: %w", o.replicaPolicy, v1beta2.ReplicaPolicyRebuild, v1beta2.ReplicaPolicyAddFirst, errUsage)
	}
	switch o.dataPlane.kind {
	case "sim":
		return o.sim.validate()
	case "longhorn":
		return nil
	}
	return fmt.Errorf("--data-plane %q: want sim or longhorn: %w", o.dataPlane.kind, errUsage)
}

// reader is the cluster to read, until ctx ends (the Longhorn adapter's
// informers stop with it).
func (o *planOptions) reader(ctx context.Context) (dataplane.Reader, error) {
	if o.dataPlane.kind == "sim" {
		return o.sim.build()
	}
	cfg, err := o.kube.config()
	if err != nil {
		return nil, err
	}
	plane, err := o.dataPlane.longhorn(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		return nil, explainKube(cfg.Host, "read Longhorn in "+o.dataPlane.namespace, err)
	}
	return plane, nil
}

// run reads the cluster, runs the prechecks, builds the plan and writes
// both; a refusal is refusedError (exit code 4).
func (o *planOptions) run(ctx context.Context, stdout io.Writer) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	reader, err := o.reader(ctx)
	if err != nil {
		return err
	}
	snap, err := plan.Read(ctx, reader)
	if err != nil {
		return err
	}
	results := precheck.Run(precheck.Input{Cluster: snap, DataEngine: "v2", RequestedNodes: o.nodes, TargetImage: snap.DefaultImage,
		AllowNodesWithoutReplicaScheduling: o.allowUnschedulable, ReplicaPolicy: o.replicaPolicy})
	built := plan.BuildWaves(snap, o.nodes, snap.DefaultImage, o.maxConcurrent)
	if o.replicaPolicy == string(v1beta2.ReplicaPolicyAddFirst) {
		built = plan.PlaceTemporaryReplicas(snap, built)
	}
	var moves []nodeMove
	if o.initiatorPolicy == string(v1beta2.InitiatorPolicyMoveWorkloads) {
		if moves, err = readMoves(ctx, reader, snap, built); err != nil {
			return err
		}
	}
	if o.output != "table" {
		if err := writeStructured(stdout, o.output, planOutput{Prechecks: results, Plan: built, Moves: moves}); err != nil {
			return err
		}
	} else {
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
		writeMoves(stdout, moves)
	}
	if !precheck.Passed(results) {
		return refusedError{precheck.Summary(results)}
	}
	return nil
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
	// Moves are, with --initiator-policy move-workloads, how each node
	// that cannot be upgraded live would be emptied of its initiators.
	Moves []nodeMove `json:"moves,omitempty"`
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
