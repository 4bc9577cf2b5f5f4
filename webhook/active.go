package webhook

import (
	"context"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/switchback-dev/switchback/api/v1beta2"
	"github.com/switchback-dev/switchback/events"
)

// ActiveFromStore lists the active managers from an informer's store (for
// example kubeclient's Managers(ns).Informer(0).GetStore()): admission makes
// no apiserver request, so a flood of reviews costs the apiserver nothing and
// cannot use up the controller's client rate limit, which its status writes
// need. A manager created a moment ago may not be in the store yet; the
// controller's own SingleActiveUpgrade check at start covers that window.
type ActiveFromStore struct {
	// Store holds *v1beta2.DataEngineUpgradeManager objects.
	Store cache.Store
	// Namespace is the managed namespace; the store's managers elsewhere
	// are left out.
	Namespace string
	// HasSynced, when set, must report true before the store is trusted: an
	// informer that has not listed yet would make every upgrade look alone.
	HasSynced func() bool
}

// ActiveUpgrades implements ActiveUpgrades.
func (s ActiveFromStore) ActiveUpgrades(_ context.Context, except types.UID) ([]string, error) {
	if s.Namespace == "" {
		return nil, fmt.Errorf("list DataEngineUpgradeManagers: no managed namespace")
	}
	if s.HasSynced != nil && !s.HasSynced() {
		return nil, fmt.Errorf("the DataEngineUpgradeManager informer has not synced yet")
	}
	var items []*v1beta2.DataEngineUpgradeManager
	for _, obj := range s.Store.List() {
		if m, ok := obj.(*v1beta2.DataEngineUpgradeManager); ok && m.Namespace == s.Namespace {
			items = append(items, m)
		}
	}
	return activeNames(items, except), nil
}

// ActiveFunc adapts a function to ActiveUpgrades.
type ActiveFunc func(ctx context.Context, except types.UID) ([]string, error)

// ActiveUpgrades calls f.
func (f ActiveFunc) ActiveUpgrades(ctx context.Context, except types.UID) ([]string, error) {
	return f(ctx, except)
}

// activeNames returns namespace/name of the managers that are not in a
// terminal state, sorted. A manager being deleted still counts: its cancel
// flow is bringing a node back to a safe point until the finalizer goes.
func activeNames(items []*v1beta2.DataEngineUpgradeManager, except types.UID) []string {
	var out []string
	for _, m := range items {
		// The orchestrator's definition (upgrade.Upgrade.Active): the status
		// state is the manager aggregate's state, spelt the same.
		if events.ManagerState(m.Status.State).Terminal() || (except != "" && m.UID == except) {
			continue
		}
		out = append(out, m.Namespace+"/"+m.Name)
	}
	slices.Sort(out)
	return out
}
