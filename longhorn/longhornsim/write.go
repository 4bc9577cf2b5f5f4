package longhornsim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/longhorn"
)

// write brings the objects in line with the simulator: creates what it
// has, updates what changed (status always; spec fields only when no spec
// change of someone else's is waiting to be mirrored), and removes what it
// no longer has. Objects already right are not written, so their
// resourceVersion changes only when the simulator's state does.
func (m *Manager) write(ctx context.Context) error {
	nodes, err := m.sim.Nodes(ctx)
	if err != nil {
		return err
	}
	ims, err := m.sim.InstanceManagers(ctx, "")
	if err != nil {
		return err
	}
	vols, err := m.sim.Volumes(ctx)
	if err != nil {
		return err
	}
	image, err := m.sim.DefaultInstanceManagerImage(ctx)
	if err != nil {
		return err
	}
	return errors.Join(
		m.writeSetting(ctx, image),
		m.writeNodes(ctx, nodes),
		m.writeIMs(ctx, ims),
		m.writeVolumes(ctx, vols, ims),
	)
}

func (m *Manager) writeSetting(ctx context.Context, image string) error {
	name := longhorn.SettingDefaultInstanceManagerImage
	have := byName[longhorn.Setting](m.settings)[name]
	if have == nil {
		_, err := m.create(ctx, longhorn.SettingsResource, longhorn.KindSetting,
			&longhorn.Setting{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: m.ns}, Value: image}, nil)
		return err
	}
	if have.Value == image {
		return nil
	}
	return m.patch(ctx, longhorn.SettingsResource, name, map[string]any{"value": image})
}

func (m *Manager) writeNodes(ctx context.Context, nodes []dataplane.Node) error {
	var errs []error
	kube := byName[longhorn.KubeNode](m.kubeNodes)
	lh := byName[longhorn.LonghornNode](m.lhNodes)
	exists := map[string]bool{}
	for _, n := range nodes {
		exists[n.Name] = true
		want := kubeNode(n, m.ns)
		if have := kube[n.Name]; have == nil {
			_, err := m.create(ctx, longhorn.KubeNodesResource, "Node", want, want.Status)
			errs = append(errs, err)
		} else if !apiequality.Semantic.DeepEqual(have.Status, want.Status) {
			errs = append(errs, m.putStatus(ctx, longhorn.KubeNodesResource, n.Name, want.Status))
		}
		wantLH := longhornNode(n, m.ns)
		have := lh[n.Name]
		if have == nil {
			_, err := m.create(ctx, longhorn.NodesResource, longhorn.KindNode, wantLH, wantLH.Status)
			errs = append(errs, err)
			continue
		}
		if !apiequality.Semantic.DeepEqual(have.Status, wantLH.Status) {
			errs = append(errs, m.putStatus(ctx, longhorn.NodesResource, n.Name, wantLH.Status))
		}
		if have.Spec.DataEngineUpgradeRequested != n.UpgradeRequested {
			errs = append(errs, m.writeSpec(ctx, longhorn.NodesResource, have.Name, have.ResourceVersion, have.Generation,
				map[string]any{"dataEngineUpgradeRequested": n.UpgradeRequested}))
		}
	}
	// Nodes the simulator deleted (a fault) disappear from both APIs.
	for name := range lh {
		if !exists[name] {
			errs = append(errs, m.remove(ctx, longhorn.NodesResource, name, false))
		}
	}
	for name := range kube {
		if !exists[name] {
			errs = append(errs, m.remove(ctx, longhorn.KubeNodesResource, name, false))
		}
	}
	return errors.Join(errs...)
}

func (m *Manager) writeIMs(ctx context.Context, ims []dataplane.InstanceManager) error {
	var errs []error
	have := byName[longhorn.InstanceManager](m.ims)
	exists := map[string]bool{}
	for _, im := range ims {
		exists[im.Name] = true
		want := instanceManager(im, m.ns)
		if h := have[im.Name]; h == nil {
			_, err := m.create(ctx, longhorn.InstanceManagersResource, longhorn.KindInstanceManager, want, want.Status)
			errs = append(errs, err)
		} else if !apiequality.Semantic.DeepEqual(h.Status, want.Status) {
			errs = append(errs, m.putStatus(ctx, longhorn.InstanceManagersResource, im.Name, want.Status))
		}
	}
	// An IM the simulator dropped (its replacement runs, or its node is
	// gone): Longhorn's cleanup is done, the finalizer goes.
	for name, h := range have {
		if !exists[name] {
			errs = append(errs, m.remove(ctx, longhorn.InstanceManagersResource, name, h.DeletionTimestamp != nil))
		}
	}
	return errors.Join(errs...)
}

func (m *Manager) writeVolumes(ctx context.Context, vols []dataplane.Volume, ims []dataplane.InstanceManager) error {
	var errs []error
	haveVols := byName[longhorn.Volume](m.volumes)
	haveEngines := byName[longhorn.Engine](m.engines)
	haveReplicas := byName[longhorn.Replica](m.replicas)
	// The IM serving each node now: the one not stopped.
	imOn := map[string]string{}
	for _, im := range ims {
		if im.State != dataplane.IMStopped {
			imOn[im.Node] = im.Name
		}
	}
	now := time.Now().UTC().Format(time.RFC3339)
	simReplicas := map[string]bool{}
	for _, v := range vols {
		errs = append(errs, m.writeVolume(ctx, v, haveVols[v.Name]))
		errs = append(errs, m.writeEngine(ctx, v, haveEngines[engineName(v.Name)]))
		for _, r := range v.Replicas {
			simReplicas[r.Name] = true
			imName := imOn[r.Node]
			if v.DataEngine != dataplane.DataEngineV2 {
				// v1 replicas live in v1 IMs, which the simulator does not
				// model; a fixed name keeps them untouched by v2 changes.
				imName = "instance-manager-v1-" + r.Node
			}
			errs = append(errs, m.writeReplica(ctx, replica(v, r, imName, haveReplicas[r.Name], now, m.ns), haveReplicas[r.Name]))
		}
	}
	for name, h := range haveReplicas {
		if !simReplicas[name] {
			errs = append(errs, m.remove(ctx, longhorn.ReplicasResource, name, h.DeletionTimestamp != nil))
		}
	}
	return errors.Join(errs...)
}

func (m *Manager) writeVolume(ctx context.Context, v dataplane.Volume, have *longhorn.Volume) error {
	want := volume(v, m.ns)
	if have == nil {
		_, err := m.create(ctx, longhorn.VolumesResource, longhorn.KindVolume, want, want.Status)
		return err
	}
	var errs []error
	if !apiequality.Semantic.DeepEqual(have.Status, want.Status) {
		errs = append(errs, m.putStatus(ctx, longhorn.VolumesResource, v.Name, want.Status))
	}
	// The simulator changes a volume's image when its target moves (the
	// engine then runs in the destination IM) and its attachment.
	if have.Spec.Image != want.Spec.Image || have.Spec.NodeID != want.Spec.NodeID {
		errs = append(errs, m.writeSpec(ctx, longhorn.VolumesResource, have.Name, have.ResourceVersion, have.Generation,
			map[string]any{"image": want.Spec.Image, "nodeID": want.Spec.NodeID}))
	}
	return errors.Join(errs...)
}

func (m *Manager) writeEngine(ctx context.Context, v dataplane.Volume, have *longhorn.Engine) error {
	want := engine(v, m.ns)
	if have == nil {
		_, err := m.create(ctx, longhorn.EnginesResource, longhorn.KindEngine, want, want.Status)
		return err
	}
	var errs []error
	if !apiequality.Semantic.DeepEqual(have.Status, want.Status) {
		errs = append(errs, m.putStatus(ctx, longhorn.EnginesResource, want.Name, want.Status))
	}
	if !apiequality.Semantic.DeepEqual(have.Spec, want.Spec) {
		// The engine's spec is Longhorn's own (the adapter only removes a
		// failed replica, which the simulator drops too): replaced whole.
		errs = append(errs, m.replace(ctx, longhorn.EnginesResource, want.Name, "/spec", want.Spec, ""))
	}
	return errors.Join(errs...)
}

func (m *Manager) writeReplica(ctx context.Context, want, have *longhorn.Replica) error {
	if have == nil {
		_, err := m.create(ctx, longhorn.ReplicasResource, longhorn.KindReplica, want, want.Status)
		return err
	}
	var errs []error
	if !apiequality.Semantic.DeepEqual(have.Status, want.Status) {
		errs = append(errs, m.putStatus(ctx, longhorn.ReplicasResource, want.Name, want.Status))
	}
	if !sameReplicaSpec(have.Spec, want.Spec) {
		errs = append(errs, m.writeSpec(ctx, longhorn.ReplicasResource, have.Name, have.ResourceVersion, have.Generation,
			map[string]any{"desireState": want.Spec.DesireState, "failedAt": want.Spec.FailedAt, "healthyAt": want.Spec.HealthyAt}))
	}
	return errors.Join(errs...)
}

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
