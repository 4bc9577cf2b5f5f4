// Command switchback live-upgrades the V2 data engine of a Longhorn cluster,
// node by node, without interrupting volume I/O. Run `switchback help`.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

// command is one subcommand.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

func subcommands() []command {
	return []command{
		{"demo", "run a whole upgrade of a simulated cluster on embedded NATS and show it", runDemo},
		{"controller", "run the controller (intake, orchestrator, projector, webhook)", runController},
		{"worker", "run the worker of one node", runWorker},
		{"replay", "rebuild upgrades from the event stream alone", runReplay},
		{"history", "print the timeline of an upgrade", runHistory},
		{"plan", "dry run: node order, target moves and prechecks, appending nothing", runPlan},
		{"nats-auth", "generate the per-node NATS users, their permissions and Secrets", runNATSAuth},
		{"uninstall", "check, or cancel, the upgrades in flight before removing Switchback", runUninstall},
		{"version", "print the version, the commit, Go and the Longhorn profiles driven", runVersion},
	}
}

// errUsage marks a command-line mistake: exit code 2, usage already printed.
var errUsage = errors.New("usage")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(stdout)
		return 0
	}
	for _, c := range subcommands() {
		if c.name != args[0] {
			continue
		}
		err := c.run(ctx, args[1:], stdout, stderr)
		switch {
		case err == nil:
			return 0
		case errors.Is(err, flag.ErrHelp):
			return 0
		case errors.Is(err, errUsage):
			// A bare errUsage follows the usage the flag package printed;
			// a wrapped one says what is wrong.
			if err != errUsage {
				fmt.Fprintf(stderr, "switchback %s: %s\n", c.name, strings.TrimSuffix(err.Error(), ": "+errUsage.Error()))
			}
			return 2
		}
		fmt.Fprintf(stderr, "switchback %s: %v\n", c.name, err)
		var ec exitCoder
		if errors.As(err, &ec) {
			return ec.ExitCode()
		}
		return 1
	}
	fmt.Fprintf(stderr, "switchback: unknown command %q\n\n", args[0])
	usage(stderr)
	return 2
}

// exitCoder lets a command choose its exit code. The codes (README, "Exit
// codes"): 0 done; 1 failed; 2 a usage mistake; 3 replay --verify found
// differences; 4 plan's prechecks refuse the upgrade.
type exitCoder interface{ ExitCode() int }

func usage(w io.Writer) {
	fmt.Fprintln(w, "switchback live-upgrades the V2 (SPDK) data engine of a Longhorn cluster, node by node,")
	fmt.Fprintln(w, "while volume I/O keeps flowing. Every intent and state change is a CloudEvent on NATS JetStream.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Usage: switchback <command> [flags]   (switchback <command> --help for its flags)")
	fmt.Fprintln(w)
	for _, c := range subcommands() {
		fmt.Fprintf(w, "  %-11s %s\n", c.name, c.summary)
	}
}

// newFlags returns a flag set that prints its usage on stderr and reports
// errors instead of exiting.
func newFlags(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("switchback "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: switchback %s\n\n", synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parse parses args, mapping a bad flag to errUsage. Flags may come before
// or after positional arguments (`history NAME --follow`), unlike the flag
// package's default; the positional arguments are left in fs.Args.
func parse(fs *flag.FlagSet, args []string) error {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return err
			}
			return errUsage
		}
		if fs.NArg() == 0 {
			break
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
	return fs.Parse(append([]string{"--"}, positional...))
}
