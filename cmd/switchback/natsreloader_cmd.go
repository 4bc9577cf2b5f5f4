package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/switchback-dev/switchback/natsreload"
)

// natsReloaderCommand is the NATS pods' sidecar: it has the server read
// its configuration again (twice) whenever the files under --watch change.
func natsReloaderCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "nats-reloader", Args: noArgs}
	fs := cmd.Flags()
	var watch stringList
	fs.Var(&watch, "watch", "a directory of the server's configuration (repeat, or comma-separate): its main file and what it includes, Secret and ConfigMap volumes included")
	interval := fs.Duration("interval", natsreload.DefaultInterval, "how often to look at the files")
	process := fs.String("process", natsreload.DefaultProcessName, "the server's command name in the shared process namespace")
	monitor := fs.String("monitor-url", natsreload.DefaultMonitorURL, "the server's monitoring endpoint, where each reload is confirmed (varz)")
	timeout := fs.Duration("reload-timeout", natsreload.DefaultReloadTimeout, "how long one reload may take to show")
	var lf logFlags
	lf.register(fs)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if len(watch) == 0 {
			return fmt.Errorf("--watch: at least one directory: %w", errUsage)
		}
		r, err := natsreload.New(natsreload.Config{Watch: watch, Interval: *interval, ProcessName: *process, MonitorURL: *monitor,
			ReloadTimeout: *timeout, Log: lf.logger(cmd.ErrOrStderr())})
		if err != nil {
			return err
		}
		return r.Run(cmd.Context())
	}
	return cmd
}
