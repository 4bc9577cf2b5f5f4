package longhornsim

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/longhorn"
	"github.com/switchback-dev/switchback/sim"
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
	disks, err := m.sim.Disks(ctx)
	if err != nil {
		return err
	}
	for i := range nodes {
		nodes[i].Disks = disks[nodes[i].Name]
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
	platform, err := m.sim.Platform(ctx)
	if err != nil {
		return err
	}
	upgrader, err := m.sim.LonghornUpgrader(ctx)
	if err != nil {
		return err
	}
	byIM, byVolume := m.sim.Instances()
	return errors.Join(
		m.writeSetting(ctx, longhorn.SettingDefaultInstanceManagerImage, image),
		m.writeSetting(ctx, longhorn.SettingCurrentLonghornVersion, platform.LonghornVersion),
		m.writeSetting(ctx, longhorn.SettingReplicaReplenishmentWaitInterval, strconv.FormatInt(int64(m.sim.ReplenishWait()/time.Second), 10)),
		m.writeSetting(ctx, longhorn.SettingFastReplicaRebuildEnabled, fmt.Sprintf(`{"v1":"true","v2":"%t"}`, !m.sim.Config().NoFastReplicaRebuild)),
		m.writeUpgraderSettings(ctx, upgrader.Settings),
		m.writeUpgraderObjects(ctx, upgrader, image),
		m.writeNodes(ctx, nodes),
		m.writeIMs(ctx, ims, byIM),
		m.writeVolumes(ctx, vols, ims, byVolume),
	)
}

// writeSetting keeps a setting at value; an empty value means no such
// setting.
func (m *Manager) writeSetting(ctx context.Context, name, value string) error {
	have := byName[longhorn.Setting](m.settings)[name]
	switch {
	case value == "":
		return nil
	case have == nil:
		_, err := m.create(ctx, longhorn.SettingsResource, longhorn.KindSetting,
			&longhorn.Setting{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: m.ns}, Value: value}, nil)
		return err
	case have.Value == value:
		return nil
	}
	return m.patch(ctx, longhorn.SettingsResource, name, map[string]any{"value": value})
}

// writeUpgraderSettings keeps the automatic-upgrade settings of Longhorn's
// own upgrader (dataplane.AutoUpgradeSettings) as the simulator has them:
// created or updated with its value (an empty one included), deleted when
// it has none. Other settings are left alone.
func (m *Manager) writeUpgraderSettings(ctx context.Context, settings map[string]string) error {
	have := byName[longhorn.Setting](m.settings)
	var errs []error
	for _, name := range dataplane.AutoUpgradeSettings {
		value, want := settings[name]
		h := have[name]
		switch {
		case want && h == nil:
			_, err := m.create(ctx, longhorn.SettingsResource, longhorn.KindSetting,
				&longhorn.Setting{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: m.ns}, Value: value}, nil)
			errs = append(errs, err)
		case want && h.Value != value:
			errs = append(errs, m.patch(ctx, longhorn.SettingsResource, name, map[string]any{"value": value}))
		case !want && h != nil:
			errs = append(errs, m.remove(ctx, longhorn.SettingsResource, name, h.DeletionTimestamp != nil))
		}
	}
	return errors.Join(errs...)
}

// writeUpgraderObjects keeps the upgrade controls and per-node upgrades of
// Longhorn's own upgrader as the simulator shows them. Their CRDs are
// served only by a Longhorn with that upgrader, so nothing is asked of the
// apiserver until the simulator shows one. They are not watched either:
// the objects are listed and brought in line whenever the simulator's view
// of them (or the image they aim at) changed since the last time they were.
func (m *Manager) writeUpgraderObjects(ctx context.Context, u dataplane.LonghornUpgrader, image string) error {
	want := upgraderObjects{controls: u.Controls, upgrades: u.Upgrades, image: image}
	shows := len(u.Controls) > 0 || len(u.Upgrades) > 0
	if (!shows && m.upgrader == nil) || (m.upgrader != nil && reflect.DeepEqual(*m.upgrader, want)) {
		return nil
	}
	haveControls, err := byNameServed[longhorn.InstanceManagerUpgradeControl](ctx, m, longhorn.InstanceManagerUpgradeControlsResource)
	if err != nil {
		return err
	}
	haveUpgrades, err := byNameServed[longhorn.InstanceManagerUpgrade](ctx, m, longhorn.InstanceManagerUpgradesResource)
	if err != nil {
		return err
	}
	var wantControls, wantUpgrades []*whole
	for _, c := range u.Controls {
		obj := upgradeControl(c, image, m.ns)
		wantControls = append(wantControls, &whole{gvr: longhorn.InstanceManagerUpgradeControlsResource,
			kind: longhorn.KindInstanceManagerUpgradeControl, name: obj.Name, obj: obj, spec: obj.Spec, status: obj.Status})
	}
	for _, up := range u.Upgrades {
		obj := imUpgrade(up, image, m.ns)
		wantUpgrades = append(wantUpgrades, &whole{gvr: longhorn.InstanceManagerUpgradesResource,
			kind: longhorn.KindInstanceManagerUpgrade, name: obj.Name, obj: obj, spec: obj.Spec, status: obj.Status})
	}
	errs := []error{
		m.keepWhole(ctx, longhorn.InstanceManagerUpgradeControlsResource, wantControls, wholes(haveControls,
			func(c *longhorn.InstanceManagerUpgradeControl) *whole { return &whole{spec: c.Spec, status: c.Status} })),
		m.keepWhole(ctx, longhorn.InstanceManagerUpgradesResource, wantUpgrades, wholes(haveUpgrades,
			func(u *longhorn.InstanceManagerUpgrade) *whole { return &whole{spec: u.Spec, status: u.Status} })),
	}
	if err := errors.Join(errs...); err != nil {
		return err // the next round tries again
	}
	if shows {
		m.upgrader = &want
	} else {
		m.upgrader = nil
	}
	return nil
}

// upgraderObjects is what the upgrader's objects were last brought in line
// with.
type upgraderObjects struct {
	controls []dataplane.UpgradeControl
	upgrades []dataplane.IMUpgrade
	image    string
}

// byNameServed lists a resource's objects in the namespace from the
// apiserver (none when it is not served), by name.
func byNameServed[T any, PT interface {
	*T
	metav1.Object
}](ctx context.Context, m *Manager, gvr schema.GroupVersionResource) (map[string]PT, error) {
	objs, err := longhorn.ListServed[T](ctx, m.ri(gvr), gvr, m.ns)
	if err != nil {
		return nil, err
	}
	out := make(map[string]PT, len(objs))
	for _, o := range objs {
		out[PT(o).GetName()] = PT(o)
	}
	return out, nil
}

func (m *Manager) writeNodes(ctx context.Context, nodes []dataplane.Node) error {
	var errs []error
	kube := byName[longhorn.KubeNode](m.kubeNodes)
	lh := byName[longhorn.LonghornNode](m.lhNodes)
	pods := byName[longhorn.Pod](m.managers)
	exists := map[string]bool{}
	for _, n := range nodes {
		exists[n.Name] = true
		want := kubeNode(n, m.ns)
		if have := kube[n.Name]; have == nil {
			_, err := m.create(ctx, longhorn.KubeNodesResource, "Node", want, nodeStatus(want.Status))
			errs = append(errs, err)
		} else {
			if !apiequality.Semantic.DeepEqual(have.Status, want.Status) {
				errs = append(errs, m.putStatus(ctx, longhorn.KubeNodesResource, n.Name, nodeStatus(want.Status)))
			}
			if have.Spec.Unschedulable != n.Cordoned && m.cordons[n.Name] != n.Cordoned {
				errs = append(errs, m.patch(ctx, longhorn.KubeNodesResource, n.Name, map[string]any{"spec": map[string]any{"unschedulable": n.Cordoned}}))
			}
		}
		m.cordons[n.Name] = n.Cordoned
		if n.ManagerIMImage != "" {
			// A pod's command cannot change: a rollout replaces the pod.
			want := managerPod(n, m.ns)
			have := pods[want.Name]
			if have != nil && !slices.Equal(have.Spec.Containers[0].Command, want.Spec.Containers[0].Command) {
				// No kubelet confirms a graceful deletion here.
				now := int64(0)
				if err := m.ri(longhorn.PodsResource).Delete(ctx, have.Name, metav1.DeleteOptions{GracePeriodSeconds: &now}); err != nil && !apierrors.IsNotFound(err) {
					errs = append(errs, fmt.Errorf("delete pod %s: %w", have.Name, err))
				}
				have = nil
			}
			if have == nil {
				_, err := m.create(ctx, longhorn.PodsResource, "Pod", want, nil)
				errs = append(errs, err)
			}
		}
		wantLH := longhornNode(n, m.ns)
		have := lh[n.Name]
		if have == nil {
			_, err := m.create(ctx, longhorn.NodesResource, longhorn.KindNode, wantLH, wantLH.Status)
			errs = append(errs, err)
			m.multipaths[n.Name] = n.NVMeMultipath
			continue
		}
		if last, ok := m.multipaths[n.Name]; !ok || last != n.NVMeMultipath {
			var value any
			if n.NVMeMultipath != dataplane.MultipathUnknown {
				value = string(n.NVMeMultipath)
			}
			errs = append(errs, m.patch(ctx, longhorn.NodesResource, n.Name, map[string]any{"metadata": map[string]any{
				"annotations": map[string]any{longhorn.MultipathAnnotation: value}}}))
			m.multipaths[n.Name] = n.NVMeMultipath
		}
		if !apiequality.Semantic.DeepEqual(have.Status, wantLH.Status) {
			errs = append(errs, m.putStatus(ctx, longhorn.NodesResource, n.Name, wantLH.Status))
		}
		if have.Spec.AllowScheduling != n.AllowScheduling {
			errs = append(errs, m.writeSpec(ctx, longhorn.NodesResource, have.Name, have.ResourceVersion, have.Generation,
				map[string]any{"allowScheduling": n.AllowScheduling}))
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

// writeIMs keeps the IM objects in step with the simulator's IMs, as
// Longhorn's controllers do: an IM Longhorn deletes (the simulator shows it
// deleting) is deleted in the foreground, as Longhorn's datastore deletes
// one, and its status is written no more; the manager plays Kubernetes'
// garbage collector, absent from the test apiserver, removing the
// foregroundDeletion finalizer once the simulator's pod is gone.
func (m *Manager) writeIMs(ctx context.Context, ims []dataplane.InstanceManager, byIM map[string]sim.IMInstances) error {
	var errs []error
	have := byName[longhorn.InstanceManager](m.ims)
	exists := map[string]bool{}
	for _, im := range ims {
		exists[im.Name] = true
		want := instanceManager(im, byIM[im.Name], m.ns)
		h := have[im.Name]
		switch {
		case im.Deleting && h != nil && h.DeletionTimestamp == nil:
			errs = append(errs, m.deleteForeground(ctx, longhorn.InstanceManagersResource, im.Name))
			continue
		case im.Deleting:
			continue
		case h == nil:
			_, err := m.create(ctx, longhorn.InstanceManagersResource, longhorn.KindInstanceManager, want, want.Status)
			errs = append(errs, err)
			continue
		case h.DeletionTimestamp != nil:
			continue // mirrored, not yet taken by the simulator
		}
		if !apiequality.Semantic.DeepEqual(h.Status, want.Status) {
			errs = append(errs, m.putStatus(ctx, longhorn.InstanceManagersResource, im.Name, want.Status))
		}
		if h.Spec.Image != want.Spec.Image {
			errs = append(errs, m.writeSpec(ctx, longhorn.InstanceManagersResource, h.Name, h.ResourceVersion, h.Generation,
				map[string]any{"image": want.Spec.Image}))
		}
	}
	// An IM the simulator dropped (its pod gone, or its node gone): its
	// object goes, the garbage collector's finalizer first.
	for name, h := range have {
		if !exists[name] {
			errs = append(errs, m.remove(ctx, longhorn.InstanceManagersResource, name, h.DeletionTimestamp != nil))
		}
	}
	return errors.Join(errs...)
}

func (m *Manager) writeVolumes(ctx context.Context, vols []dataplane.Volume, ims []dataplane.InstanceManager, byVolume map[string]sim.VolumeInstances) error {
	var errs []error
	haveVols := byName[longhorn.Volume](m.volumes)
	haveEngines := byName[longhorn.Engine](m.engines)
	haveFrontends := byName[longhorn.EngineFrontend](m.frontends)
	haveReplicas := byName[longhorn.Replica](m.replicas)
	// The IM serving each node now: the one not stopped.
	imOn := map[string]string{}
	for _, im := range ims {
		if im.State != dataplane.IMStopped {
			imOn[im.Node] = im.Name
		}
	}
	now := time.Now().UTC().Format(time.RFC3339)
	want := map[string]bool{}
	for _, v := range vols {
		vi := byVolume[v.Name]
		errs = append(errs, m.writeVolume(ctx, v, vi, haveVols[v.Name]), m.writeSnapshotStatus(ctx, v.Name))
		for _, e := range engines(v, vi, m.render, m.ns) {
			want[longhorn.EnginesResource.Resource+"/"+e.Name] = true
			errs = append(errs, m.writeWhole(ctx, engineWhole(e), engineWhole(haveEngines[e.Name])))
		}
		if vi.SwitchoverTo != "" && !vi.NewEngineRunning && m.sim.Config().On(sim.RuleSnapshotCRSync) {
			m.syncSnapshotCRs(ctx, v.Name)
		}
		if v.Attached() && v.DataEngine == dataplane.DataEngineV2 {
			ef := frontend(v, vi, m.render, m.ns)
			want[longhorn.EngineFrontendsResource.Resource+"/"+ef.Name] = true
			errs = append(errs, m.writeWhole(ctx, frontendWhole(ef), frontendWhole(haveFrontends[ef.Name])))
			errs = append(errs, m.writeSwitchoverEvents(ctx, v, vi, ef.Name))
		}
		for _, r := range v.Replicas {
			want[longhorn.ReplicasResource.Resource+"/"+r.Name] = true
			imName := imOn[r.Node]
			if v.DataEngine != dataplane.DataEngineV2 {
				// v1 replicas live in v1 IMs, which the simulator does not
				// model; a fixed name keeps them untouched by v2 changes.
				imName = "instance-manager-v1-" + r.Node
			}
			errs = append(errs, m.writeReplica(ctx, replica(v, vi, r, imName, haveReplicas[r.Name], now, m.ns), haveReplicas[r.Name]))
		}
	}
	// What the simulator no longer has of its volumes: an engine replaced
	// by a switch-over, the engine frontend of a detached volume, a deleted
	// replica. Objects of volumes it does not have are somebody else's.
	ours := map[string]bool{}
	for _, v := range vols {
		ours[v.Name] = true
	}
	for name, h := range haveEngines {
		if ours[h.Spec.VolumeName] && !want[longhorn.EnginesResource.Resource+"/"+name] {
			errs = append(errs, m.remove(ctx, longhorn.EnginesResource, name, h.DeletionTimestamp != nil))
		}
	}
	for name, h := range haveFrontends {
		if ours[h.Spec.VolumeName] && !want[longhorn.EngineFrontendsResource.Resource+"/"+name] {
			errs = append(errs, m.remove(ctx, longhorn.EngineFrontendsResource, name, h.DeletionTimestamp != nil))
		}
	}
	for name, h := range haveReplicas {
		if ours[h.Spec.VolumeName] && !want[longhorn.ReplicasResource.Resource+"/"+name] {
			errs = append(errs, m.remove(ctx, longhorn.ReplicasResource, name, h.DeletionTimestamp != nil))
		}
	}
	return errors.Join(errs...)
}

func (m *Manager) writeVolume(ctx context.Context, v dataplane.Volume, vi sim.VolumeInstances, have *longhorn.Volume) error {
	want := volume(v, vi, m.ns)
	if have == nil {
		_, err := m.create(ctx, longhorn.VolumesResource, longhorn.KindVolume, want, want.Status)
		return err
	}
	var errs []error
	if !apiequality.Semantic.DeepEqual(have.Status, want.Status) {
		errs = append(errs, m.putStatus(ctx, longhorn.VolumesResource, v.Name, want.Status))
	}
	// The simulator changes a volume's attachment (Longhorn's
	// VolumeAttachment controller sets spec.nodeID), and its engine node
	// when its user placed the engine.
	if have.Spec.NodeID != want.Spec.NodeID || have.Spec.EngineNodeID != want.Spec.EngineNodeID {
		errs = append(errs, m.writeSpec(ctx, longhorn.VolumesResource, have.Name, have.ResourceVersion, have.Generation,
			map[string]any{"nodeID": want.Spec.NodeID, "engineNodeID": want.Spec.EngineNodeID}))
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
			map[string]any{"desireState": want.Spec.DesireState, "failedAt": want.Spec.FailedAt, "lastFailedAt": want.Spec.LastFailedAt,
				"healthyAt": want.Spec.HealthyAt, "engineName": want.Spec.EngineName, "migrationEngineName": want.Spec.MigrationEngineName}))
	}
	return errors.Join(errs...)
}

// syncSnapshotCRs is Longhorn's engine controller syncing the Snapshot
// objects of a switch-over's new engine, whose snapshot list is empty until
// it runs (RuleSnapshotCRSync): it deletes every Snapshot object of the
// volume but those still being taken and those already being deleted. A
// deletion refused (by an admission webhook) is retried at the next round,
// as Longhorn requeues the engine, until the new engine runs.
func (m *Manager) syncSnapshotCRs(ctx context.Context, volume string) {
	for _, s := range all[longhorn.Snapshot](m.snapshots) {
		if s.Spec.Volume != volume || s.DeletionTimestamp != nil || (s.Spec.CreateSnapshot && s.Status.CreationTime == "") {
			continue
		}
		if err := m.ri(longhorn.SnapshotsResource).Delete(ctx, s.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			m.log.Info("snapshot sync of a switch-over's new engine: delete refused", "snapshot", s.Name, "volume", volume, "error", err)
			continue
		}
		m.log.Info("snapshot sync of a switch-over's new engine deleted a Snapshot object its empty list lacks", "snapshot", s.Name, "volume", volume)
	}
}

// writeSwitchoverEvents records Longhorn's EngineFrontend controller's
// Events about a volume's switch-overs on its EngineFrontend: a Warning
// FailedSwitchover with the failure's text while attempts fail, a Normal
// Switchover when one succeeded. Like client-go's recorder, a repeat
// updates the Event's count and last time.
func (m *Manager) writeSwitchoverEvents(ctx context.Context, v dataplane.Volume, vi sim.VolumeInstances, ef string) error {
	key := v.Name
	var errs []error
	if v.SwitchoverError != "" && m.failures[key] != v.SwitchoverError {
		errs = append(errs, m.event(ctx, ef, corev1EventWarning, longhorn.ReasonFailedSwitchover, v.SwitchoverError))
		m.failures[key] = v.SwitchoverError
	}
	if v.SwitchoverError == "" {
		delete(m.failures, key)
	}
	if vi.Switchovers > m.switchovers[key] {
		errs = append(errs, m.event(ctx, ef, corev1EventNormal, longhorn.ReasonSwitchover, "Successfully switched over target to "+engineIP(v.TargetNode)))
		m.switchovers[key] = vi.Switchovers
	}
	return errors.Join(errs...)
}

// Event types of core Events.
const (
	corev1EventNormal  = "Normal"
	corev1EventWarning = "Warning"
)

// event records (or repeats) one Event on an EngineFrontend.
func (m *Manager) event(ctx context.Context, ef, typ, reason, message string) error {
	name := ef + "." + strings.ToLower(reason)
	now := metav1.NewTime(time.Now())
	have, err := m.ri(longhorn.EventsResource).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		e := &longhorn.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: name, Namespace: m.ns},
			InvolvedObject: longhorn.ObjectReference{Kind: longhorn.KindEngineFrontend, Namespace: m.ns, Name: ef},
			Reason:         reason, Message: message, Type: typ, Count: 1, FirstTimestamp: now, LastTimestamp: now,
		}
		_, err := m.create(ctx, longhorn.EventsResource, longhorn.KindEvent, e, nil)
		return err
	case err != nil:
		return fmt.Errorf("get event %s: %w", name, err)
	}
	var e longhorn.Event
	if err := longhorn.FromUnstructured(have, &e); err != nil {
		return err
	}
	return m.patch(ctx, longhorn.EventsResource, name, map[string]any{"message": message, "count": e.Count + 1, "lastTimestamp": now})
}
