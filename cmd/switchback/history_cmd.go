package main

import (
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/eventstore"
	"github.com/switchback-dev/switchback/replay"
)

func historyCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "history MANAGER", Args: exactArgs(1, "one MANAGER name"),
		Example: "  switchback history upgrade-v2 --nats-url tls://switchback-nats:4222 --nats-ca ca.crt\n" +
			"  switchback history upgrade-v2 --data-dir /var/lib/switchback --follow -o json"}
	fs := cmd.Flags()
	var nf natsFlags
	nf.register(fs, true)
	namespace := fs.StringP("namespace", "n", "", "the manager's namespace (default: any)")
	follow := fs.Bool("follow", false, "keep printing new events until interrupted")
	output := fs.StringP("output", "o", "table", "output format: table, json (with --follow: one JSON object a line) or yaml (not with --follow)")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		ctx, stdout := cmd.Context(), cmd.OutOrStdout()
		out, err := newLineWriter(stdout, *output, *follow)
		if err != nil {
			return err
		}
		name := args[0]
		filter := events.ManagerNameSubjects(*namespace, name)

		conn, err := nf.connect(ctx, "switchback-history", slog.New(slog.DiscardHandler), connectOptions{inProcessOnly: !*follow, readOnly: true})
		if err != nil {
			return err
		}
		defer conn.Close()
		out.header()
		printed := 0
		last, err := conn.store.LastSequence(ctx)
		if err != nil {
			return err
		}
		err = conn.store.Scan(ctx, eventstore.ScanOptions{Subjects: []string{filter}, UntilSeq: last}, func(e events.Envelope) error {
			printed++
			return out.line(replay.Describe(e))
		}, func(de *events.DecodeError) { out.skipped(de.Sequence, de) })
		if err != nil {
			return err
		}
		if !*follow {
			if printed == 0 {
				return unknownManager(name, *namespace, last)
			}
			return out.flush()
		}
		return followEvents(ctx, conn, filter, last+1, func(e events.Envelope, _ uint64) bool {
			_ = out.line(replay.Describe(e))
			return false
		}, out.skipped)
	}
	return cmd
}
