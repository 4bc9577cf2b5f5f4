package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/eventstore"
	"github.com/switchback-dev/switchback/replay"
)

func replayCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "replay", Args: noArgs,
		Example: "  switchback replay --data-dir ./store                        # every upgrade, as the stream tells it\n" +
			"  switchback replay --data-dir ./store --until-seq 120 -o yaml   # the state after event 120\n" +
			"  switchback replay --nats-url ... --verify --context prod       # compare with the live status (exit 3 on a difference)"}
	o := &replayOptions{}
	o.addFlags(cmd.Flags())
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if err := o.validate(); err != nil {
			return err
		}
		return o.run(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr())
	}
	return cmd
}

// replayOptions are `switchback replay`'s flags.
type replayOptions struct {
	nats                       natsFlags
	verify                     verifyFlags
	manager, namespace, output string
	untilSeq                   uint64
	untilTime                  string
	// until is untilTime parsed (validate).
	until time.Time
}

func (o *replayOptions) addFlags(fs *pflag.FlagSet) {
	o.nats.register(fs, true)
	fs.StringVar(&o.manager, "manager", "", "only this manager (by name)")
	fs.StringVarP(&o.namespace, "namespace", "n", "", "only managers in this namespace")
	fs.Uint64Var(&o.untilSeq, "until-seq", 0, "stop after this stream sequence (state as it was then)")
	fs.StringVar(&o.untilTime, "until-time", "", "stop at this time (RFC 3339, e.g. 2026-11-29T18:30:00Z)")
	fs.StringVarP(&o.output, "output", "o", "table", "output format: table, json or yaml")
	o.verify.register(fs)
}

// validate refuses an unknown output and a bound given twice, and parses
// --until-time.
func (o *replayOptions) validate() error {
	if o.output != "table" && o.output != "json" && o.output != "yaml" {
		return fmt.Errorf("-o %q: want table, json or yaml: %w", o.output, errUsage)
	}
	if o.untilTime != "" {
		t, err := time.Parse(time.RFC3339Nano, o.untilTime)
		if err != nil {
			return fmt.Errorf("--until-time: %w", err)
		}
		o.until = t
	}
	if o.untilSeq != 0 && o.untilTime != "" {
		return fmt.Errorf("give --until-seq or --until-time, not both")
	}
	return nil
}

// run folds the history (up to the bound) and writes every upgrade, then
// compares it with the live status when asked (--verify).
func (o *replayOptions) run(ctx context.Context, stdout, stderr io.Writer) error {
	opts := replay.Options{Manager: o.manager, Namespace: o.namespace, ScanOptions: eventstore.ScanOptions{UntilSeq: o.untilSeq, UntilTime: o.until}}
	conn, err := o.nats.connect(ctx, "switchback-replay", slog.New(slog.DiscardHandler), connectOptions{inProcessOnly: true, readOnly: true})
	if err != nil {
		return err
	}
	defer conn.Close()
	// Upgrades are printed as the replay hands them out (the ended ones in
	// the order they ended, then those in progress), so that replaying a
	// long history holds the upgrades in progress, not all.
	table := replay.NewTableWriter(stdout)
	var refs, managers []events.ManagerRef
	res, err := replay.Stream(ctx, conn.store, opts, func(u *replay.Upgrade) error {
		refs, managers = append(refs, u.Ref), append(managers, u.Manager.Ref)
		if o.output == "table" {
			return table.Add(u)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if o.manager != "" && len(refs) == 0 {
		return unknownManager(o.manager, o.namespace, res.LastSequence)
	}
	if res.LastSequence == 0 {
		fmt.Fprintln(stderr, "note: the stream holds no event: no upgrade was ever requested through this NATS (is it the controller's? is --data-dir the right store?)")
	}
	if o.output == "table" {
		err = table.Close(res)
	} else {
		err = writeObjects(ctx, stdout, conn.store, refs, res.LastSequence, o.output)
	}
	if err != nil {
		return err
	}
	if err := res.MissingErr(); err != nil {
		// On stderr too: json and yaml have no place for it, and a piped
		// table may not be read.
		fmt.Fprintf(stderr, "WARNING: %v\n", err)
	}
	if o.verify.enabled {
		return o.verify.verify(ctx, conn.store, res, managers, stdout)
	}
	return nil
}
