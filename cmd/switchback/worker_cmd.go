package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/switchback-dev/switchback/nodeworker"
	"github.com/switchback-dev/switchback/sim/simremote"
)

func runWorker(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("worker", "worker --node NAME [--nats-url URL ...] [--data-plane sim]", stderr)
	var nf natsFlags
	nf.register(fs, false)
	node := fs.String("node", os.Getenv("NODE_NAME"), "the node this worker upgrades (default $NODE_NAME, from the downward API)")
	dataPlane := fs.String("data-plane", "sim", "the cluster's data plane: sim (a simulated cluster served on NATS, e.g. by the demo)")
	stallAfter := fs.Duration("stall-after", 2*time.Minute, "report a step stalled after this long without progress")
	failAfter := fs.Duration("fail-after", 10*time.Minute, "fail the node when its new instance manager stays in error this long")
	poll := fs.Duration("poll-interval", 250*time.Millisecond, "how often a waiting step looks at the cluster again")
	var hf healthFlags
	hf.register(fs)
	var lf logFlags
	lf.register(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if *node == "" {
		fs.Usage()
		return fmt.Errorf("--node (or $NODE_NAME) is required: %w", errUsage)
	}
	if *dataPlane != "sim" {
		return fmt.Errorf("--data-plane %q: only sim is available in this build", *dataPlane)
	}
	log := lf.logger(stderr).With("node", *node)
	conn, err := nf.connect(ctx, "switchback-worker-"+*node, log, false)
	if err != nil {
		return err
	}
	defer conn.Close()
	w, err := nodeworker.New(nodeworker.Config{
		Node: *node, Store: conn.store, Queue: conn.queue, DataPlane: simremote.NewClient(conn.nc, simremote.DefaultPrefix),
		StallAfter: *stallAfter, FailAfter: *failAfter, PollInterval: *poll, Log: log,
	})
	if err != nil {
		return err
	}
	health, err := hf.serve(ctx, log, func() error {
		if !conn.nc.IsConnected() {
			return errors.New("not connected to NATS")
		}
		return nil
	}, metricsHandler)
	if err != nil {
		return err
	}
	defer health.Close()
	log.Info("worker started", "nats", conn.nc.ConnectedUrlRedacted())
	if err := w.Run(ctx); err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}
