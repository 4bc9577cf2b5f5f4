// Package managertest is what the tests that run the engine and its
// projector against the test apiserver (package testenv) share about a
// DataEngineUpgradeManager: creating one as a user does, with its identity
// as the intake records it, and the status the projector must have written
// once it caught up.
package managertest

import (
	"context"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/switchback-dev/switchback/api/v1beta2"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/eventstore"
	"github.com/switchback-dev/switchback/kubeclient"
	"github.com/switchback-dev/switchback/projector"
)

// Create creates the v2 DataEngineUpgradeManager name in namespace ns,
// upgrading nodes (every v2 node when none), and returns its identity as the
// intake would record it.
func Create(t testing.TB, ctx context.Context, kc *kubeclient.Client, ns, name string, nodes ...string) events.ManagerRef {
	t.Helper()
	obj, err := kc.Managers(ns).Create(ctx, &v1beta2.DataEngineUpgradeManager{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v1beta2.DataEngineUpgradeManagerSpec{DataEngine: v1beta2.DataEngineTypeV2, Nodes: nodes},
	})
	require.NoError(t, err)
	return events.ManagerRef{Namespace: ns, Name: name, UID: string(obj.UID)}
}

// ReplayedStatus returns what the status of the manager ref must be once the
// projector caught up: the fold of its history as projector.Replay computes
// it offline, stamped with the generation of the manager as Kubernetes has it
// now (got, returned too). The whole projection comes with them, for the
// node upgrades, unstamped.
func ReplayedStatus(t testing.TB, ctx context.Context, store *eventstore.Store, kc *kubeclient.Client, ref events.ManagerRef) (want v1beta2.DataEngineUpgradeManagerStatus, got *v1beta2.DataEngineUpgradeManager, p projector.Projection) {
	t.Helper()
	p, err := projector.Replay(ctx, store, ref)
	require.NoError(t, err)
	got, err = kc.Managers(ref.Namespace).Get(ctx, ref.Name)
	require.NoError(t, err)
	want = p.Manager
	want.ObservedGeneration = got.Generation
	want.Conditions = slices.Clone(want.Conditions)
	for i := range want.Conditions {
		want.Conditions[i].ObservedGeneration = got.Generation
	}
	return want, got, p
}
