package main

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/switchback-dev/switchback/api/v1beta2"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/eventstore"
	"github.com/switchback-dev/switchback/kubeclient"
	"github.com/switchback-dev/switchback/replay"
)

// waitForTheEnd waits until the cluster's objects show the end of ref's
// upgrade: the manager's status written at the last event of its history,
// terminal, with every NodeDataEngineUpgrade's status final; or, after a
// cancel by deletion, the manager gone (the intake removed its finalizer).
// ctx bounds it.
func waitForTheEnd(ctx context.Context, kc *kubeclient.Client, store *eventstore.Store, ref events.ManagerRef) error {
	res, err := replay.Run(ctx, store, replay.Options{Manager: ref.Name, Namespace: ref.Namespace})
	if err != nil {
		return err
	}
	var last uint64
	for _, u := range res.Upgrades {
		if u.Manager.Ref == ref {
			last = u.LastSequence
		}
	}
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		done, err := clusterShowsEnd(ctx, kc, ref, last)
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the cluster does not show the end of the upgrade yet (last error: %v): %w", err, ctx.Err())
		case <-t.C:
		}
	}
}

func clusterShowsEnd(ctx context.Context, kc *kubeclient.Client, ref events.ManagerRef, last uint64) (bool, error) {
	m, err := kc.Managers(ref.Namespace).Get(ctx, ref.Name)
	switch {
	case apierrors.IsNotFound(err) || (err == nil && string(m.UID) != ref.UID):
		return true, nil // deleted: the cancel let it go
	case err != nil:
		return false, err
	case m.DeletionTimestamp != nil || m.Status.StreamSequence < last || !events.ManagerState(m.Status.State).Terminal():
		return false, nil
	}
	nodes, err := kc.NodeUpgrades(ref.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, err
	}
	for _, n := range nodes.Items {
		if c := metav1.GetControllerOf(&n); c == nil || string(c.UID) != ref.UID {
			continue
		}
		if s := n.Status.State; !s.IsTerminal() && s != v1beta2.NodeUpgradeStatePending {
			return false, nil
		}
	}
	return true, nil
}
