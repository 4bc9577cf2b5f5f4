package longhornsim

import (
	"context"
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/switchback-dev/switchback/longhorn"
)

// ---- apiserver writes ----

func (m *Manager) ri(gvr schema.GroupVersionResource) dynamic.ResourceInterface {
	if gvr == longhorn.KubeNodesResource {
		return m.dyn.Resource(gvr)
	}
	return m.dyn.Resource(gvr).Namespace(m.ns)
}

// create creates obj, then sets its status (the status subresource ignores
// it on create), and records its spec as applied.
func (m *Manager) create(ctx context.Context, gvr schema.GroupVersionResource, kind string, obj, status any) (string, error) {
	u, err := longhorn.ToUnstructured(obj, kind)
	if err != nil {
		return "", err
	}
	out, err := m.ri(gvr).Create(ctx, u, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("create %s %s: %w", gvr.Resource, u.GetName(), err)
	}
	m.applied[gvr.Resource+"/"+out.GetName()] = out.GetGeneration()
	if status != nil {
		if err := m.putStatus(ctx, gvr, out.GetName(), status); err != nil {
			return "", err
		}
	}
	return out.GetName(), nil
}

// putStatus replaces the object's whole status: the manager owns it.
func (m *Manager) putStatus(ctx context.Context, gvr schema.GroupVersionResource, name string, status any) error {
	return m.replace(ctx, gvr, name, "/status", status, "status")
}

// replace sets one top-level member with a JSON patch "add", which
// replaces a member that exists and creates one that does not.
func (m *Manager) replace(ctx context.Context, gvr schema.GroupVersionResource, name, path string, value any, subresource string) error {
	body, err := json.Marshal([]map[string]any{{"op": "add", "path": path, "value": value}})
	if err != nil {
		return fmt.Errorf("%s %s: %w", gvr.Resource, name, err)
	}
	var subs []string
	if subresource != "" {
		subs = []string{subresource}
	}
	if _, err := m.ri(gvr).Patch(ctx, name, types.JSONPatchType, body, metav1.PatchOptions{}, subs...); err != nil {
		return fmt.Errorf("patch %s %s%s: %w", gvr.Resource, name, path, err)
	}
	return nil
}

// patch applies a merge patch to the object.
func (m *Manager) patch(ctx context.Context, gvr schema.GroupVersionResource, name string, body map[string]any) error {
	data, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("%s %s: %w", gvr.Resource, name, err)
	}
	if _, err := m.ri(gvr).Patch(ctx, name, types.MergePatchType, data, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("patch %s %s: %w", gvr.Resource, name, err)
	}
	return nil
}

// writeSpec changes spec fields the simulator changed on its own, unless
// someone else's spec change is still to be mirrored (it would be
// overwritten). The resourceVersion precondition closes the race with a
// change arriving meanwhile: a conflict just waits for the next round.
func (m *Manager) writeSpec(ctx context.Context, gvr schema.GroupVersionResource, name, rv string, generation int64, spec map[string]any) error {
	key := gvr.Resource + "/" + name
	if generation != m.applied[key] {
		return nil
	}
	data, err := json.Marshal(map[string]any{"metadata": map[string]any{"resourceVersion": rv}, "spec": spec})
	if err != nil {
		return fmt.Errorf("%s %s: %w", gvr.Resource, name, err)
	}
	out, err := m.ri(gvr).Patch(ctx, name, types.MergePatchType, data, metav1.PatchOptions{})
	switch {
	case apierrors.IsConflict(err):
		return nil
	case err != nil:
		return fmt.Errorf("patch %s %s spec: %w", gvr.Resource, name, err)
	}
	m.applied[key] = out.GetGeneration()
	return nil
}

// deleteForeground deletes an object with foreground propagation, as
// Longhorn's datastore deletes instance managers: it stays, deleting, with
// the foregroundDeletion finalizer until its dependents are gone.
func (m *Manager) deleteForeground(ctx context.Context, gvr schema.GroupVersionResource, name string) error {
	fg := metav1.DeletePropagationForeground
	if err := m.ri(gvr).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &fg}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete %s %s: %w", gvr.Resource, name, err)
	}
	return nil
}

// remove drops the finalizer of an object the simulator no longer has and
// deletes it unless its deletion is already under way.
func (m *Manager) remove(ctx context.Context, gvr schema.GroupVersionResource, name string, deleting bool) error {
	err := m.patch(ctx, gvr, name, map[string]any{"metadata": map[string]any{"finalizers": nil}})
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if deleting {
		return nil
	}
	if err := m.ri(gvr).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete %s %s: %w", gvr.Resource, name, err)
	}
	delete(m.applied, gvr.Resource+"/"+name)
	return nil
}
