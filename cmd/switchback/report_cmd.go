package main

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/eventstore"
	"github.com/switchback-dev/switchback/report"
)

func reportCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "report MANAGER", Args: exactArgs(1, "one MANAGER name"),
		Example: "  switchback report upgrade-v2 --data-dir /var/lib/switchback -o upgrade.html\n" +
			"  switchback report upgrade-v2 --nats-url tls://switchback-nats:4222 --nats-ca ca.crt --until-seq 120 -o at-120.html"}
	fs := cmd.Flags()
	var nf natsFlags
	nf.register(fs, true)
	namespace := fs.StringP("namespace", "n", "", "the manager's namespace (default: any)")
	output := fs.StringP("output", "o", "-", "the HTML file to write (- for standard output)")
	untilSeq := fs.Uint64("until-seq", 0, "stop after this stream sequence (the upgrade as it was then)")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		ctx, stderr := cmd.Context(), cmd.ErrOrStderr()
		name := args[0]
		filter := events.ManagerNameSubjects(*namespace, name)
		conn, err := nf.connect(ctx, "switchback-report", slog.New(slog.DiscardHandler), connectOptions{inProcessOnly: true, readOnly: true})
		if err != nil {
			return err
		}
		defer conn.Close()
		// The range is fixed up front, so a page made while the upgrade
		// runs is the history up to one sequence, like --until-seq's.
		until := *untilSeq
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
		t.UntilSeq = *untilSeq
		var page bytes.Buffer
		if err := report.Render(&page, t); err != nil {
			return err
		}
		return writeOutput(cmd.OutOrStdout(), *output, page.Bytes())
	}
	return cmd
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
