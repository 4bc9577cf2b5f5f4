package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"k8s.io/client-go/rest"

	"github.com/switchback-dev/switchback/nodeworker"
)

func runWorker(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("worker", "worker --node NAME [--nats-url URL ...] [--data-plane sim]", stderr)
	var nf natsFlags
	nf.register(fs, false)
	node := fs.String("node", os.Getenv("NODE_NAME"), "the node this worker upgrades (default $NODE_NAME, from the downward API)")
	var dp dataPlaneFlags
	dp.register(fs)
	kubeconfig := fs.String("kubeconfig", os.Getenv("KUBECONFIG"), "with --data-plane longhorn: kubeconfig path; empty = in-cluster configuration")
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
	log := lf.logger(stderr).With("node", *node)
	conn, err := nf.connect(ctx, "switchback-worker-"+*node, log, false)
	if err != nil {
		return err
	}
	defer conn.Close()
	var cfg *rest.Config
	if dp.kind == "longhorn" {
		if cfg, err = kubeConfig(*kubeconfig); err != nil {
			return err
		}
	}
	plane, err := dp.open(ctx, cfg, conn.nc, log)
	if err != nil {
		return err
	}
	w, err := nodeworker.New(nodeworker.Config{
		Node: *node, Store: conn.store, Queue: conn.queue, DataPlane: plane,
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
