package main

import (
	"context"
	"log/slog"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	"github.com/switchback-dev/switchback/kubeclient"
	"github.com/switchback-dev/switchback/projector"
)

// startProjector runs the projector: history onto the custom resources'
// status, conditions and Kubernetes Events. With no clientset (cs nil: the
// demo's in-memory API, which nothing outside the process can read) the
// Events are dropped: client-go's fake clientset would keep every one and
// a deep copy of every call that wrote it for the whole run
// (hack/benchreport/notes.md).
func startProjector(ctx context.Context, conn *natsConn, kc *kubeclient.Client, cs kubernetes.Interface, log *slog.Logger, run func(string, func(context.Context) error)) error {
	cfg := projector.Config{Store: conn.store, Client: kc, Events: cs, Log: log}
	if cs == nil {
		cfg.Recorder = droppedEvents{}
	}
	p, err := projector.New(cfg)
	if err != nil {
		return err
	}
	run("projector", p.Run)
	return nil
}

// droppedEvents is an Event recorder that records nothing.
type droppedEvents struct{}

func (droppedEvents) Eventf(runtime.Object, runtime.Object, string, string, string, string, ...any) {}
