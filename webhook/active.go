package webhook

import (
	"context"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/switchback-dev/switchback/api/v1beta2"
	"github.com/switchback-dev/switchback/kubeclient"
)

// ActiveFromList lists the active managers with a List through kubeclient at
// each admission: always current (a manager created a moment ago is seen),
// at the cost of one apiserver round trip per CREATE, which is rare.
type ActiveFromList struct {
	// Client reaches the DataEngineUpgradeManager resource.
	Client *kubeclient.Client
	// Namespace is the managed namespace, the only one listed.
	Namespace string
}

// ActiveUpgrades implements ActiveUpgrades.
func (l ActiveFromList) ActiveUpgrades(ctx context.Context, except types.UID) ([]string, error) {
	if l.Namespace == "" {
		return nil, fmt.Errorf("list DataEngineUpgradeManagers: no managed namespace")
	}
	list, err := l.Client.Managers(l.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list DataEngineUpgradeManagers in %s: %w", l.Namespace, err)
	}
	items := make([]*v1beta2.DataEngineUpgradeManager, len(list.Items))
	for i := range list.Items {
		items[i] = &list.Items[i]
	}
	return activeNames(items, except), nil
}

// ActiveFromStore lists the active managers from an informer's store (for
// example kubeclient's Managers("").Informer(0).GetStore()), which the
// controller keeps anyway: no round trip, but a manager created a moment ago
// may not be in it yet. The controller's own check at start covers that
// window.
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
		if m.Status.State.IsTerminal() || (except != "" && m.UID == except) {
			continue
		}
		out = append(out, m.Namespace+"/"+m.Name)
	}
	slices.Sort(out)
	return out
}
