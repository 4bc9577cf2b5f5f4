package main

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/eventstore"
	"github.com/switchback-dev/switchback/replay"
)

func replayCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "replay", Args: noArgs,
		Example: "  switchback replay --data-dir ./store                        # every upgrade, as the stream tells it\n" +
			"  switchback replay --data-dir ./store --until-seq 120 -o yaml   # the state after event 120\n" +
			"  switchback replay --nats-url ... --verify --context prod       # compare with the live status (exit 3 on a difference)"}
	fs := cmd.Flags()
	var nf natsFlags
	nf.register(fs, true)
	manager := fs.String("manager", "", "only this manager (by name)")
	namespace := fs.StringP("namespace", "n", "", "only managers in this namespace")
	untilSeq := fs.Uint64("until-seq", 0, "stop after this stream sequence (state as it was then)")
	untilTime := fs.String("until-time", "", "stop at this time (RFC 3339, e.g. 2026-11-29T18:30:00Z)")
	output := fs.StringP("output", "o", "table", "output format: table, json or yaml")
	var vf verifyFlags
	vf.register(fs)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		ctx, stdout, stderr := cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr()
		if *output != "table" && *output != "json" && *output != "yaml" {
			return fmt.Errorf("-o %q: want table, json or yaml: %w", *output, errUsage)
		}
		opts := replay.Options{Manager: *manager, Namespace: *namespace, ScanOptions: eventstore.ScanOptions{UntilSeq: *untilSeq}}
		if *untilTime != "" {
			t, err := time.Parse(time.RFC3339Nano, *untilTime)
			if err != nil {
				return fmt.Errorf("--until-time: %w", err)
			}
			opts.UntilTime = t
		}
		if *untilSeq != 0 && *untilTime != "" {
			return fmt.Errorf("give --until-seq or --until-time, not both")
		}
		conn, err := nf.connect(ctx, "switchback-replay", slog.New(slog.DiscardHandler), connectOptions{inProcessOnly: true, readOnly: true})
		if err != nil {
			return err
		}
		defer conn.Close()
		// Upgrades are printed as the replay hands them out (the ended
		// ones in the order they ended, then those in progress), so that
		// replaying a long history holds the upgrades in progress, not all.
		table := replay.NewTableWriter(stdout)
		var refs, managers []events.ManagerRef
		res, err := replay.Stream(ctx, conn.store, opts, func(u *replay.Upgrade) error {
			refs, managers = append(refs, u.Ref), append(managers, u.Manager.Ref)
			if *output == "table" {
				return table.Add(u)
			}
			return nil
		})
		if err != nil {
			return err
		}
		if *manager != "" && len(refs) == 0 {
			return unknownManager(*manager, *namespace, res.LastSequence)
		}
		if res.LastSequence == 0 {
			fmt.Fprintln(stderr, "note: the stream holds no event: no upgrade was ever requested through this NATS (is it the controller's? is --data-dir the right store?)")
		}
		if *output == "table" {
			err = table.Close(res)
		} else {
			err = writeObjects(ctx, stdout, conn.store, refs, res.LastSequence, *output)
		}
		if err != nil {
			return err
		}
		if err := res.MissingErr(); err != nil {
			// On stderr too: json and yaml have no place for it, and a piped
			// table may not be read.
			fmt.Fprintf(stderr, "WARNING: %v\n", err)
		}
		if vf.enabled {
			return vf.verify(ctx, conn.store, res, managers, stdout)
		}
		return nil
	}
	return cmd
}
