package main

import (
	"context"
	"log/slog"

	"k8s.io/client-go/kubernetes"

	"github.com/switchback-dev/switchback/kubeclient"
	"github.com/switchback-dev/switchback/projector"
)

// startProjector runs the projector: history onto the custom resources'
// status, conditions and Kubernetes Events.
func startProjector(ctx context.Context, conn *natsConn, kc *kubeclient.Client, cs kubernetes.Interface, log *slog.Logger, run func(string, func(context.Context) error)) error {
	p, err := projector.New(projector.Config{Store: conn.store, Client: kc, Events: cs, Log: log})
	if err != nil {
		return err
	}
	run("projector", p.Run)
	return nil
}
