// Command switchback live-upgrades the V2 data engine of a Longhorn cluster,
// node by node, without interrupting volume I/O. Run `switchback help`.
//
// Installed as kubectl-switchback on the PATH it is a kubectl plugin:
// `kubectl switchback plan`.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
)

// Command groups of the top-level help, in the order a newcomer needs them.
const (
	groupUpgrade = "upgrade"
	groupRun     = "run"
	groupInstall = "install"
)

// pluginName is the executable name under which kubectl runs Switchback as
// its plugin `kubectl switchback`.
const pluginName = "kubectl-switchback"

// newRoot builds the command tree. displayName is how the help names the
// program: "switchback", or "kubectl switchback" when run as the plugin.
func newRoot(displayName string) *cobra.Command {
	root := &cobra.Command{
		Use:   "switchback",
		Short: "Live-upgrade the V2 (SPDK) data engine of a Longhorn cluster, node by node",
		Long: "switchback live-upgrades the V2 (SPDK) data engine of a Longhorn cluster, node by node,\n" +
			"while volume I/O keeps flowing. Every intent and state change is a CloudEvent on NATS JetStream.",
		Annotations:       map[string]string{cobra.CommandDisplayNameAnnotation: displayName},
		SilenceErrors:     true,
		SilenceUsage:      true,
		CompletionOptions: cobra.CompletionOptions{HiddenDefaultCmd: false},
	}
	root.AddGroup(
		&cobra.Group{ID: groupUpgrade, Title: "Plan and follow an upgrade:"},
		&cobra.Group{ID: groupRun, Title: "Run Switchback:"},
		&cobra.Group{ID: groupInstall, Title: "Install and remove:"},
	)
	add := func(group, short string, c *cobra.Command) {
		c.GroupID, c.Short = group, short
		root.AddCommand(c)
	}
	add(groupRun, "run a whole upgrade of a simulated cluster on embedded NATS and show it", demoCommand())
	add(groupUpgrade, "dry run: node order, target moves and prechecks, appending nothing", planCommand())
	add(groupUpgrade, "print the timeline of an upgrade", historyCommand())
	add(groupUpgrade, "render an upgrade's timeline as one self-contained HTML page", reportCommand())
	add(groupUpgrade, "rebuild upgrades from the event stream alone", replayCommand())
	add(groupRun, "run the controller (intake, orchestrator, projector, webhook)", controllerCommand())
	add(groupRun, "run the worker of one node", workerCommand())
	add(groupInstall, "generate the per-node NATS users, their permissions and Secrets", natsAuthCommand())
	add(groupRun, "the NATS pods' sidecar: reload the server when its configuration changes", natsReloaderCommand())
	add(groupInstall, "check, or cancel, the upgrades in flight before removing Switchback", uninstallCommand())
	add("", "print the version, the commit, Go and the Longhorn profiles driven", versionCommand())
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return fmt.Errorf("%w: %w", err, errUsage) })
	setGroupedUsage(root)
	completeFlagValues(root)
	return root
}

// errUsage marks a command-line mistake: exit code 2.
var errUsage = errors.New("usage")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	args := os.Args[1:]
	if executable(os.Args[0]) == pluginCompletionName {
		args = append([]string{cobra.ShellCompRequestCmd}, args...)
	}
	code := run(ctx, displayName(os.Args[0]), args, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// displayName is the program's name in its help: kubectl runs a plugin by
// its file name, and the user typed `kubectl switchback`.
func displayName(argv0 string) string {
	switch executable(argv0) {
	case pluginName, pluginCompletionName:
		return "kubectl switchback"
	}
	return "switchback"
}

// executable is the file name the program was run as.
func executable(argv0 string) string {
	return strings.TrimSuffix(filepath.Base(argv0), ".exe")
}

// run executes one command line and returns the process's exit code (see
// exitCoder). display is the program's name in help and errors
// (displayName).
func run(ctx context.Context, display string, args []string, stdout, stderr io.Writer) int {
	root := newRoot(display)
	root.SetOut(stdout)
	root.SetErr(stderr)
	args = singleDashLongFlags(root, args, stderr)
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return 0
	}
	if cmd == nil {
		cmd = root
	}
	path := cmd.CommandPath()
	if isUsage(err) {
		fmt.Fprintf(stderr, "%s: %s\nSee '%s --help'.\n", path, strings.TrimSuffix(err.Error(), ": "+errUsage.Error()), path)
		return 2
	}
	fmt.Fprintf(stderr, "%s: %v\n", path, err)
	var ec exitCoder
	if errors.As(err, &ec) {
		return ec.ExitCode()
	}
	return 1
}

// isUsage says whether err is a command-line mistake: one of the commands'
// own (errUsage) or cobra's (an unknown command, which it does not wrap).
func isUsage(err error) bool {
	return errors.Is(err, errUsage) || strings.HasPrefix(err.Error(), "unknown command ")
}

// exitCoder lets a command choose its exit code. The codes (README, "Exit
// codes"): 0 done; 1 failed; 2 a usage mistake; 3 replay --verify found
// differences; 4 plan's prechecks refuse the upgrade.
type exitCoder interface{ ExitCode() int }

// noArgs refuses positional arguments, which a command without any would
// otherwise ignore.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("unexpected argument %q: %s takes flags only: %w", args[0], cmd.Name(), errUsage)
	}
	return nil
}

// exactArgs wants n positional arguments, described by what in the error.
func exactArgs(n int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return fmt.Errorf("%s takes %s (got %d arguments): %w", cmd.Name(), what, len(args), errUsage)
		}
		return nil
	}
}

// singleDashLongFlags rewrites -name to --name where name is one of the
// command's long flags: Switchback's flags took one dash before they
// followed kubectl's conventions, and scripts written then keep working.
// Each rewrite is said on stderr, so that they get fixed.
func singleDashLongFlags(root *cobra.Command, args []string, stderr io.Writer) []string {
	cmd, _, err := root.Find(args)
	if err != nil {
		return args
	}
	out := make([]string, 0, len(args))
	for i, a := range args {
		if a == "--" {
			return append(out, args[i:]...)
		}
		name, _, _ := strings.Cut(strings.TrimPrefix(a, "-"), "=")
		if strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && len(name) > 1 && cmd.Flags().Lookup(name) != nil {
			fmt.Fprintf(stderr, "switchback: -%s is read as --%s: write two dashes, as kubectl does\n", name, name)
			a = "-" + a
		}
		out = append(out, a)
	}
	return out
}
