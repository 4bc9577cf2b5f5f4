package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/eventstore"
	"github.com/switchback-dev/switchback/report"
)

func reportCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "report MANAGER", Args: exactArgs(1, "one MANAGER name"),
		Example: "  switchback report upgrade-v2 --data-dir /var/lib/switchback -o upgrade.html\n" +
			"  switchback report upgrade-v2 --nats-url tls://switchback-nats:4222 --nats-ca ca.crt --until-seq 120 -o at-120.html"}
	o := &reportOptions{}
	o.addFlags(cmd.Flags())
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		return o.run(cmd.Context(), args[0], cmd.OutOrStdout(), cmd.ErrOrStderr())
	}
	return cmd
}

// reportOptions are `switchback report`'s flags.
type reportOptions struct {
	nats              natsFlags
	namespace, output string
	untilSeq          uint64
}

func (o *reportOptions) addFlags(fs *pflag.FlagSet) {
	o.nats.register(fs, true)
	fs.StringVarP(&o.namespace, "namespace", "n", "", "the manager's namespace (default: any)")
	fs.StringVarP(&o.output, "output", "o", "-", "the HTML file to write (- for standard output)")
	fs.Uint64Var(&o.untilSeq, "until-seq", 0, "stop after this stream sequence (the upgrade as it was then)")
}

// run reads the history of the manager named name (its latest incarnation)
// and writes its page.
func (o *reportOptions) run(ctx context.Context, name string, stdout, stderr io.Writer) error {
	filter := events.ManagerNameSubjects(o.namespace, name)
	conn, err := o.nats.connect(ctx, "switchback-report", slog.New(slog.DiscardHandler), connectOptions{inProcessOnly: true, readOnly: true})
	if err != nil {
		return err
	}
	defer conn.Close()
	// The range is fixed up front, so a page made while the upgrade runs is
	// the history up to one sequence, like --until-seq's.
	until := o.untilSeq
	if until == 0 {
		if until, err = conn.store.LastSequence(ctx); err != nil {
			return err
		}
	}
	var history []events.Envelope
	parked := 0
	err = conn.store.Scan(ctx, eventstore.ScanOptions{Subjects: []string{filter}, UntilSeq: until}, func(e events.Envelope) error {
		history = append(history, e)
		return nil
	}, func(*events.DecodeError) { parked++ })
	if err != nil {
		return err
	}
	ref, history, incarnations := report.Latest(history)
	if len(history) == 0 {
		return fmt.Errorf("no events for manager %q up to sequence %d", name, until)
	}
	if incarnations > 1 {
		fmt.Fprintf(stderr, "%d upgrades named %q in the history: reporting the latest, %s (uid %s)\n", incarnations, name, ref, ref.UID)
	}
	if parked > 0 {
		fmt.Fprintf(stderr, "WARNING: %d event(s) did not decode and are left out (switchback history lists them)\n", parked)
	}
	t := report.BuildTimeline(history)
	t.UntilSeq = o.untilSeq
	var page bytes.Buffer
	if err := report.Render(&page, t); err != nil {
		return err
	}
	return writeOutput(stdout, o.output, page.Bytes())
}

// writeOutput writes the whole page to path, or to stdout for "-": the
// page is rendered first, so a failure leaves no half-written file.
func writeOutput(stdout io.Writer, path string, data []byte) error {
	if path == "-" {
		_, err := stdout.Write(data)
		return err
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("--output: %w", err)
	}
	return nil
}
