package main

import (
	"fmt"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/switchback-dev/switchback/natsreload"
)

// natsReloaderCommand is the NATS pods' sidecar: it has the server read
// its configuration again (twice) whenever the files under --watch change.
func natsReloaderCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "nats-reloader", Args: noArgs}
	o := &natsReloaderOptions{}
	o.addFlags(cmd.Flags())
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if err := o.validate(); err != nil {
			return err
		}
		cfg := o.cfg
		cfg.Watch, cfg.Log = o.watch, o.log.logger(cmd.ErrOrStderr())
		r, err := natsreload.New(cfg)
		if err != nil {
			return err
		}
		return r.Run(cmd.Context())
	}
	return cmd
}

// natsReloaderOptions are `switchback nats-reloader`'s flags: the
// reloader's configuration as given.
type natsReloaderOptions struct {
	cfg   natsreload.Config
	watch stringList
	log   logFlags
}

func (o *natsReloaderOptions) addFlags(fs *pflag.FlagSet) {
	fs.Var(&o.watch, "watch", "a directory of the server's configuration (repeat, or comma-separate): its main file and what it includes, Secret and ConfigMap volumes included")
	fs.DurationVar(&o.cfg.Interval, "interval", natsreload.DefaultInterval, "how often to look at the files")
	fs.StringVar(&o.cfg.ProcessName, "process", natsreload.DefaultProcessName, "the server's command name in the shared process namespace")
	fs.StringVar(&o.cfg.MonitorURL, "monitor-url", natsreload.DefaultMonitorURL, "the server's monitoring endpoint, where each reload is confirmed (varz)")
	fs.DurationVar(&o.cfg.ReloadTimeout, "reload-timeout", natsreload.DefaultReloadTimeout, "how long one reload may take to show")
	o.log.register(fs)
}

func (o *natsReloaderOptions) validate() error {
	if len(o.watch) == 0 {
		return fmt.Errorf("--watch: at least one directory: %w", errUsage)
	}
	return nil
}
