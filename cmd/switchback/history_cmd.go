package main

import (
	"context"
	"log/slog"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/eventstore"
	"github.com/switchback-dev/switchback/replay"
)

func historyCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "history MANAGER", Args: exactArgs(1, "one MANAGER name"),
		Example: "  switchback history upgrade-v2 --nats-url tls://switchback-nats:4222 --nats-ca ca.crt\n" +
			"  switchback history upgrade-v2 --data-dir /var/lib/switchback --follow -o json"}
	o := &historyOptions{}
	o.addFlags(cmd.Flags())
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		out, err := newLineWriter(cmd.OutOrStdout(), o.output, o.follow)
		if err != nil {
			return err
		}
		return o.run(cmd.Context(), args[0], out)
	}
	return cmd
}

// historyOptions are `switchback history`'s flags.
type historyOptions struct {
	nats      natsFlags
	namespace string
	follow    bool
	output    string
}

func (o *historyOptions) addFlags(fs *pflag.FlagSet) {
	o.nats.register(fs, true)
	fs.StringVarP(&o.namespace, "namespace", "n", "", "the manager's namespace (default: any)")
	fs.BoolVar(&o.follow, "follow", false, "keep printing new events until interrupted")
	fs.StringVarP(&o.output, "output", "o", "table", "output format: table, json (with --follow: one JSON object a line) or yaml (not with --follow)")
}

// run prints the events of the manager named name, then, with --follow,
// those appended after.
func (o *historyOptions) run(ctx context.Context, name string, out *lineWriter) error {
	filter := events.ManagerNameSubjects(o.namespace, name)
	conn, err := o.nats.connect(ctx, "switchback-history", slog.New(slog.DiscardHandler), connectOptions{inProcessOnly: !o.follow, readOnly: true})
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
	if !o.follow {
		if printed == 0 {
			return unknownManager(name, o.namespace, last)
		}
		return out.flush()
	}
	return followEvents(ctx, conn, filter, last+1, func(e events.Envelope, _ uint64) bool {
		_ = out.line(replay.Describe(e))
		return false
	}, out.skipped)
}
