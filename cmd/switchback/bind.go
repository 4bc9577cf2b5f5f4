package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchback-dev/switchback/topology"
)

// bindRetry is how often a worker looks again for what the controller has
// not created yet. A worker usually starts with its node, long before any
// upgrade, so a second of delay costs nothing.
const bindRetry = time.Second

// waitForStreams waits until the controller has created Switchback's streams
// and snapshot bucket: a worker only binds to them.
func waitForStreams(ctx context.Context, js jetstream.JetStream, log *slog.Logger) error {
	for _, name := range []string{topology.EventStream, topology.CommandStream, topology.DeadLetterStream} {
		if err := waitUntil(ctx, log, "stream "+name, func(ctx context.Context) error {
			_, err := js.Stream(ctx, name)
			return err
		}); err != nil {
			return err
		}
	}
	return waitUntil(ctx, log, "bucket "+topology.SnapshotBucket, func(ctx context.Context) error {
		_, err := js.KeyValue(ctx, topology.SnapshotBucket)
		return err
	})
}

// waitForNodeConsumer waits until the controller has created node's command
// consumer (nodequeue.Queue.EnsureNodeConsumers).
func waitForNodeConsumer(ctx context.Context, js jetstream.JetStream, node string, log *slog.Logger) error {
	name := topology.NodeConsumer(node)
	return waitUntil(ctx, log, "consumer "+name+" on "+topology.CommandStream, func(ctx context.Context) error {
		_, err := js.Consumer(ctx, topology.CommandStream, name)
		return err
	})
}

// waitUntil calls probe until it succeeds or ctx ends. The first failure and
// then one a minute are logged, so a worker waiting on a controller that
// never comes says so without flooding the log.
func waitUntil(ctx context.Context, log *slog.Logger, what string, probe func(context.Context) error) error {
	var lastLog time.Time
	for {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := probe(pctx)
		cancel()
		if err == nil {
			if !lastLog.IsZero() {
				log.Info("found "+what, "what", what)
			}
			return nil
		}
		if time.Since(lastLog) >= time.Minute {
			log.Warn("waiting for the controller to create "+what, "what", what, "error", err)
			lastLog = time.Now()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w (last error: %w)", what, ctx.Err(), err)
		case <-time.After(bindRetry):
		}
	}
}
