package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/eventstore"
	"github.com/switchback-dev/switchback/replay"
)

func runHistory(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("history", "history MANAGER [--namespace NS] [--follow]", stderr)
	var nf natsFlags
	nf.register(fs, false)
	namespace := fs.String("namespace", "", "the manager's namespace (default: any)")
	follow := fs.Bool("follow", false, "keep printing new events until interrupted")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return errUsage
	}
	name := fs.Arg(0)
	ns := "*"
	if *namespace != "" {
		ns = events.EncodeToken(*namespace)
	}
	filter := fmt.Sprintf("%s.%s.%s.>", events.SubjectPrefix, ns, events.EncodeToken(name))

	conn, err := nf.connect(ctx, "switchback-history", slog.New(slog.DiscardHandler), connectOptions{inProcessOnly: !*follow, readOnly: true})
	if err != nil {
		return err
	}
	defer conn.Close()
	fmt.Fprintf(stdout, "%6s  %-12s  %-14s %s\n", "SEQ", "TIME", "NODE", "WHAT")
	printed := 0
	last, err := conn.store.LastSequence(ctx)
	if err != nil {
		return err
	}
	err = conn.store.Scan(ctx, eventstore.ScanOptions{Subjects: []string{filter}, UntilSeq: last}, func(e events.Envelope) error {
		fmt.Fprintln(stdout, replay.Describe(e))
		printed++
		return nil
	}, func(de *events.DecodeError) {
		fmt.Fprintf(stdout, "%6d  (skipped a message that does not decode: %v)\n", de.Sequence, de)
	})
	if err != nil {
		return err
	}
	if !*follow {
		if printed == 0 {
			return fmt.Errorf("no events for manager %q", name)
		}
		return nil
	}
	return followHistory(ctx, conn, filter, last+1, stdout)
}

// followHistory prints new events as they are appended, until ctx ends.
func followHistory(ctx context.Context, conn *natsConn, filter string, from uint64, stdout io.Writer) error {
	return followEvents(ctx, conn, filter, from, func(e events.Envelope, _ uint64) bool {
		fmt.Fprintln(stdout, replay.Describe(e))
		return false
	}, func(seq uint64, err error) {
		fmt.Fprintf(stdout, "%6d  (skipped a message that does not decode: %v)\n", seq, err)
	})
}
