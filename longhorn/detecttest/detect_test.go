// Package detecttest proves the Longhorn adapter's detection, and its report
// of a pruned field, on a real kube-apiserver serving one Longhorn after
// another: an older one, v1.12.1, and one with the in-place upgrader. It is
// a package of its own because CRDs are cluster-wide: the other tests'
// apiserver must keep serving v1.12.1.
package detecttest

import (
	"context"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/longhorn"
	"github.com/switchback-dev/switchback/longhorn/longhornsim"
	"github.com/switchback-dev/switchback/plan"
	"github.com/switchback-dev/switchback/precheck"
	"github.com/switchback-dev/switchback/sim"
	"github.com/switchback-dev/switchback/test/harness/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

const ns = "longhorn-system"

func TestDetectionOnARealAPIServer(t *testing.T) {
	env := testenv.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	root, err := testenv.RepoRoot()
	require.NoError(t, err)
	cfg := rest.CopyConfig(env.Config)
	cfg.WarningHandler = rest.NoWarnings{}
	dyn, err := dynamic.NewForConfig(cfg)
	require.NoError(t, err)
	w := &world{t: t, ctx: ctx, cfg: cfg, dyn: dyn, disc: memoryless(cfg), root: root}
	_, err = dyn.Resource(namespaces).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}}}, metav1.CreateOptions{})
	require.NoError(t, err)

	t.Run("no Longhorn at all", func(t *testing.T) {
		_, err := w.surface().Platform(false)
		require.ErrorIs(t, err, longhorn.ErrUnsupportedLonghorn)
		assert.ErrorContains(t, err, "volumes.longhorn.io is not served")
	})

	t.Run("an older Longhorn is refused, naming its version and what it lacks", func(t *testing.T) {
		w.install("longhorn-crds", both(without("enginefrontends"),
			drop("volumes", "spec.engineNodeID", "status.currentEngineNodeID", "status.switchoverState")))
		setVersion(t, w, "v1.11.2")
		s := w.until("volumes without spec.engineNodeID", lacksField("volumes", "spec.engineNodeID"))
		_, err := s.Platform(false)
		require.ErrorIs(t, err, longhorn.ErrUnsupportedLonghorn)
		for _, want := range []string{"Longhorn v1.11.2", "enginefrontends.longhorn.io is not served",
			"volumes.longhorn.io has no spec.engineNodeID", "volumes.longhorn.io has no status.switchoverState"} {
			assert.ErrorContains(t, err, want)
		}
	})

	t.Run("a field the served CRD prunes is reported, naming it", func(t *testing.T) {
		w.install("longhorn-crds", drop("volumes", "spec.engineNodeID"))
		w.until("volumes still without spec.engineNodeID, enginefrontends served", func(s longhorn.Surface) bool {
			return slices.Contains(s.Served, "enginefrontends") && lacksField("volumes", "spec.engineNodeID")(s)
		})
		create(t, w, longhorn.NodesResource, map[string]any{"name": "n1", "allowScheduling": true}, "n1")
		create(t, w, longhorn.VolumesResource, map[string]any{"nodeID": "n1", "dataEngine": "v2", "numberOfReplicas": int64(1)}, "pvc-1")
		create(t, w, longhorn.SettingsResource, nil, "default-instance-manager-image")
		// As if detection were skipped: the adapter told it drives v1.12.
		plane, err := longhorn.New(ctx, dyn, longhorn.Options{Namespace: ns, Platform: dataplane.Platform{Profile: dataplane.ProfileV112},
			WriteSyncTimeout: 100 * time.Millisecond})
		require.NoError(t, err)
		err = plane.SetEngineNode(ctx, "pvc-1", "n1")
		require.ErrorIs(t, err, longhorn.ErrFieldUnsupported)
		assert.ErrorIs(t, err, dataplane.ErrRefused, "retrying cannot help")
		assert.ErrorContains(t, err, "spec.engineNodeID")
		assert.ErrorContains(t, err, `"pvc-1"`)
		assert.NoError(t, plane.SetEngineNode(ctx, "pvc-1", ""), "asking for what the object has is a no-op")
	})

	t.Run("v1.12.1", func(t *testing.T) {
		w.install("longhorn-crds", nil)
		setVersion(t, w, "v1.12.1")
		s := w.until("volumes with spec.engineNodeID", hasField("volumes", "spec.engineNodeID"))
		p, err := s.Platform(false)
		require.NoError(t, err)
		assert.Equal(t, dataplane.ProfileV112, p.Profile)
		assert.Equal(t, "v1.12.1", p.LonghornVersion)
	})

	t.Run("a Longhorn with the in-place upgrader: refused without the opt-in, experimental with it", func(t *testing.T) {
		w.install("longhorn-crds-inplace", nil)
		setVersion(t, w, "v1.13.0")
		s := w.until("the upgrader's CRDs served", func(s longhorn.Surface) bool {
			return slices.Contains(s.Served, "instancemanagerupgrades") && slices.Contains(s.Served, "instancemanagerupgradecontrols")
		})
		_, err := s.Platform(false)
		require.ErrorIs(t, err, longhorn.ErrExperimentalLonghorn)
		assert.ErrorContains(t, err, "Longhorn v1.13.0 updates instance managers in place")
		assert.ErrorContains(t, err, "--allow-experimental-longhorn")
		p, err := s.Platform(true)
		require.NoError(t, err)
		assert.Equal(t, dataplane.ProfileInPlace, p.Profile)
		assert.True(t, p.Profile.Experimental())

		// NewForConfig, the production entry, detects the same.
		_, err = longhorn.NewForConfig(ctx, cfg, longhorn.Options{Namespace: ns})
		assert.ErrorIs(t, err, longhorn.ErrExperimentalLonghorn)
		plane, err := longhorn.NewForConfig(ctx, cfg, longhorn.Options{Namespace: ns, AllowExperimental: true, SyncTimeout: 30 * time.Second})
		require.NoError(t, err)
		got, err := plane.Platform(ctx)
		require.NoError(t, err)
		assert.Equal(t, dataplane.ProfileInPlace, got.Profile)

		w.uninstall("longhorn-crds-inplace")
		p, err = w.surface().Platform(false)
		require.NoError(t, err)
		assert.Equal(t, dataplane.ProfileV112, p.Profile)
	})

	t.Run("Longhorn's own upgrader at work: NoOtherUpgrader refuses, naming its objects, until both are over", func(t *testing.T) {
		w.install("longhorn-crds-inplace", nil)
		w.until("the upgrader's CRDs served", servesUpgrader)
		ensureSetting(t, w, longhorn.SettingDefaultInstanceManagerImage, "longhornio/longhorn-instance-manager:v1.13.0")
		// Switched off by the operator while a node is in flight: the
		// in-flight node still finishes, so the objects decide.
		ensureSetting(t, w, dataplane.SettingV2IMAutoUpgrade, "false")
		control := createWithStatus(t, w, longhorn.InstanceManagerUpgradeControlsResource, longhorn.KindInstanceManagerUpgradeControl,
			longhorn.InstanceManagerUpgradeControlName, map[string]any{"targetImage": "longhornio/longhorn-instance-manager:v1.13.0"},
			map[string]any{"ownerID": "n1", "currentNode": "n2", "nodes": map[string]any{
				"n1": map[string]any{"state": "completed", "imuName": "upgrade-n1-20261130120000"},
				"n2": map[string]any{"state": "in-progress", "imuName": "upgrade-n2-20261130121500", "retryCount": int64(1)},
				"n3": map[string]any{"state": "pending"},
			}})
		createWithStatus(t, w, longhorn.InstanceManagerUpgradesResource, longhorn.KindInstanceManagerUpgrade, "upgrade-n1-20261130120000",
			map[string]any{"nodeID": "n1", "targetImage": "longhornio/longhorn-instance-manager:v1.13.0"}, map[string]any{"state": "completed"})
		inFlight := createWithStatus(t, w, longhorn.InstanceManagerUpgradesResource, longhorn.KindInstanceManagerUpgrade, "upgrade-n2-20261130121500",
			map[string]any{"nodeID": "n2", "targetImage": "longhornio/longhorn-instance-manager:v1.13.0"},
			map[string]any{"state": "relocating-engines", "engines": map[string]any{"pvc-1": map[string]any{"originalNodeID": "n2", "temporaryNodeID": "n3"}}})

		// The caches are synced and the objects listed live when read: the
		// first read shows everything created above.
		plane, err := longhorn.NewForConfig(ctx, cfg, longhorn.Options{Namespace: ns, AllowExperimental: true, SyncTimeout: 30 * time.Second})
		require.NoError(t, err)
		cluster, err := plan.Read(ctx, plane)
		require.NoError(t, err)
		assert.Equal(t, dataplane.LonghornUpgrader{
			Settings: map[string]string{dataplane.SettingV2IMAutoUpgrade: "false"},
			Controls: []dataplane.UpgradeControl{{Name: longhorn.InstanceManagerUpgradeControlName, CurrentNode: "n2",
				Nodes: map[string]string{"n1": "completed", "n2": "in-progress", "n3": "pending"}}},
			Upgrades: []dataplane.IMUpgrade{{Name: "upgrade-n1-20261130120000", Node: "n1", State: "completed"},
				{Name: "upgrade-n2-20261130121500", Node: "n2", State: "relocating-engines"}},
		}, cluster.Upgrader)
		const prefix = "Longhorn's own instance-manager upgrader would race this upgrade: "
		controlBusy := "instancemanagerupgradecontrols.longhorn.io longhorn-instance-manager-upgrade-control is upgrading node n2: wait until it ends"
		r := precheck.OtherUpgrader(cluster.Upgrader)
		assert.False(t, r.Passed)
		assert.Equal(t, precheck.ReasonOtherUpgraderActive, r.Reason)
		assert.Equal(t, prefix+controlBusy+"; instancemanagerupgrades.longhorn.io upgrade-n2-20261130121500 (node n2) is relocating-engines: wait until it is completed or failed", r.Message)

		// The node's upgrade is over, the control not yet past it: still refused.
		setStatus(t, w, longhorn.InstanceManagerUpgradesResource, inFlight, map[string]any{"state": "completed"})
		cluster, err = plan.Read(ctx, plane)
		require.NoError(t, err)
		r = precheck.OtherUpgrader(cluster.Upgrader)
		assert.False(t, r.Passed)
		assert.Equal(t, prefix+controlBusy, r.Message)

		// The cycle is over (n3 failed its retries): no current node.
		setStatus(t, w, longhorn.InstanceManagerUpgradeControlsResource, control, map[string]any{"ownerID": "n1", "nodes": map[string]any{
			"n1": map[string]any{"state": "completed"}, "n2": map[string]any{"state": "completed"},
			"n3": map[string]any{"state": "failed", "retryCount": int64(5), "errorMsg": "no replica off the node"},
		}})
		cluster, err = plan.Read(ctx, plane)
		require.NoError(t, err)
		r = precheck.OtherUpgrader(cluster.Upgrader)
		assert.True(t, r.Passed, r.Message)
		assert.Equal(t, "Longhorn's own instance-manager upgrader is off and idle (allow-v2-instance-manager-automatic-upgrade)", r.Message)
	})

	t.Run("the simulated manager renders Longhorn's own upgrader, and the adapter reads it back", func(t *testing.T) {
		w.until("the upgrader's CRDs served", servesUpgrader)
		const simNS = "longhornsim-upgrader"
		_, err := dyn.Resource(namespaces).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": simNS}}}, metav1.CreateOptions{})
		require.NoError(t, err)
		s := sim.New(sim.Config{Profile: dataplane.ProfileInPlace, LonghornVersion: "v1.13.0"})
		require.NoError(t, s.AddNode("n1"))
		require.NoError(t, s.AddNode("n2"))
		mgr, err := longhornsim.Start(ctx, dyn, s, longhornsim.Options{Namespace: simNS})
		require.NoError(t, err)
		t.Cleanup(mgr.Close)
		plane, err := longhorn.NewForConfig(ctx, cfg, longhorn.Options{Namespace: simNS, AllowExperimental: true, SyncTimeout: 30 * time.Second})
		require.NoError(t, err)

		control := func(current string, nodes map[string]string) []dataplane.UpgradeControl {
			return []dataplane.UpgradeControl{{Name: longhorn.InstanceManagerUpgradeControlName, CurrentNode: current, Nodes: nodes}}
		}
		for _, step := range []struct {
			name   string
			u      dataplane.LonghornUpgrader
			passed bool
		}{
			{"on, a node in flight", dataplane.LonghornUpgrader{
				Settings: map[string]string{dataplane.SettingIMAutoUpgrade: `{"v1":"false","v2":"true"}`},
				Controls: control("n1", map[string]string{"n1": "in-progress", "n2": "pending"}),
				Upgrades: []dataplane.IMUpgrade{{Name: "upgrade-n1-20261130120000", Node: "n1", State: "waiting-for-healthy-volumes"}}}, false},
			{"off, the next node started before it was turned off", dataplane.LonghornUpgrader{
				Settings: map[string]string{dataplane.SettingIMAutoUpgrade: `{"v1":"false","v2":"false"}`},
				Controls: control("n2", map[string]string{"n1": "completed", "n2": "in-progress"}),
				Upgrades: []dataplane.IMUpgrade{{Name: "upgrade-n1-20261130120000", Node: "n1", State: "completed"},
					{Name: "upgrade-n2-20261130121500", Node: "n2", State: "pending"}}}, false},
			{"off and over", dataplane.LonghornUpgrader{
				Settings: map[string]string{dataplane.SettingIMAutoUpgrade: `{"v1":"false","v2":"false"}`},
				Controls: control("", map[string]string{"n1": "completed", "n2": "failed"}),
				Upgrades: []dataplane.IMUpgrade{{Name: "upgrade-n2-20261130121500", Node: "n2", State: "failed"}}}, true},
			{"none left: the objects are deleted", dataplane.LonghornUpgrader{}, true},
		} {
			s.SetLonghornUpgrader(step.u)
			mgr.Kick()
			var got dataplane.LonghornUpgrader
			deadline := time.Now().Add(15 * time.Second)
			for time.Now().Before(deadline) {
				if got, err = plane.LonghornUpgrader(ctx); err == nil && reflect.DeepEqual(got, step.u) {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			require.NoError(t, err, step.name)
			require.Equal(t, step.u, got, "%s: the adapter reads what the simulator shows", step.name)
			assert.Equal(t, step.passed, precheck.OtherUpgrader(got).Passed, step.name)
		}
		for _, gvr := range []schemaGVR{longhorn.InstanceManagerUpgradeControlsResource, longhorn.InstanceManagerUpgradesResource} {
			l, err := dyn.Resource(gvr).Namespace(simNS).List(ctx, metav1.ListOptions{})
			require.NoError(t, err)
			assert.Empty(t, l.Items, gvr.Resource)
		}
		version, err := dyn.Resource(longhorn.SettingsResource).Namespace(simNS).Get(ctx, longhorn.SettingCurrentLonghornVersion, metav1.GetOptions{})
		require.NoError(t, err, "the settings the manager always writes are kept")
		assert.Equal(t, "v1.13.0", version.Object["value"])
	})
}

func servesUpgrader(s longhorn.Surface) bool {
	return slices.Contains(s.Served, "instancemanagerupgrades") && slices.Contains(s.Served, "instancemanagerupgradecontrols")
}

// ensureSetting creates a setting with value, or sets the value of the one
// there.
func ensureSetting(t *testing.T, w *world, name, value string) {
	t.Helper()
	ri := w.dyn.Resource(longhorn.SettingsResource).Namespace(ns)
	u, err := ri.Get(w.ctx, name, metav1.GetOptions{})
	if err == nil {
		u.Object["value"] = value
		_, err = ri.Update(w.ctx, u, metav1.UpdateOptions{})
		require.NoError(t, err, "setting %s", name)
		return
	}
	require.True(t, apierrors.IsNotFound(err), "get setting %s: %v", name, err)
	_, err = ri.Create(w.ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": longhorn.GroupVersion.String(), "kind": longhorn.KindSetting,
		"metadata": map[string]any{"name": name, "namespace": ns}, "value": value}}, metav1.CreateOptions{})
	require.NoError(t, err, "setting %s", name)
}

// createWithStatus creates an object of Longhorn's own upgrader in ns, then
// writes its status through the status subresource (which drops status on
// create), as Longhorn's controllers do. It returns the object as stored.
func createWithStatus(t *testing.T, w *world, gvr schemaGVR, kind, name string, spec, status map[string]any) *unstructured.Unstructured {
	t.Helper()
	u, err := w.dyn.Resource(gvr).Namespace(ns).Create(w.ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": longhorn.GroupVersion.String(), "kind": kind,
		"metadata": map[string]any{"name": name, "namespace": ns}, "spec": spec}}, metav1.CreateOptions{})
	require.NoError(t, err, "create %s %s", gvr.Resource, name)
	return setStatus(t, w, gvr, u, status)
}

// setStatus replaces an object's status through the status subresource.
func setStatus(t *testing.T, w *world, gvr schemaGVR, u *unstructured.Unstructured, status map[string]any) *unstructured.Unstructured {
	t.Helper()
	u = u.DeepCopy()
	u.Object["status"] = status
	out, err := w.dyn.Resource(gvr).Namespace(ns).UpdateStatus(w.ctx, u, metav1.UpdateOptions{})
	require.NoError(t, err, "update status of %s %s", gvr.Resource, u.GetName())
	*u = *out
	return out
}

// setVersion writes the current-longhorn-version setting.
func setVersion(t *testing.T, w *world, version string) {
	t.Helper()
	ri := w.dyn.Resource(longhorn.SettingsResource).Namespace(ns)
	u, err := ri.Get(w.ctx, longhorn.SettingCurrentLonghornVersion, metav1.GetOptions{})
	if err == nil {
		u.Object["value"] = version
		_, err = ri.Update(w.ctx, u, metav1.UpdateOptions{})
		require.NoError(t, err)
		return
	}
	_, err = ri.Create(w.ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": longhorn.GroupVersion.String(), "kind": longhorn.KindSetting,
		"metadata": map[string]any{"name": longhorn.SettingCurrentLonghornVersion, "namespace": ns}, "value": version}}, metav1.CreateOptions{})
	require.NoError(t, err)
}

// create creates a Longhorn object with spec (a Setting gets a value).
func create(t *testing.T, w *world, gvr schemaGVR, spec map[string]any, name string) {
	t.Helper()
	obj := map[string]any{"apiVersion": longhorn.GroupVersion.String(), "metadata": map[string]any{"name": name, "namespace": ns}}
	switch gvr {
	case longhorn.NodesResource:
		obj["kind"] = longhorn.KindNode
	case longhorn.VolumesResource:
		obj["kind"] = longhorn.KindVolume
	case longhorn.SettingsResource:
		obj["kind"], obj["value"] = longhorn.KindSetting, "longhornio/longhorn-instance-manager:v1.12.1"
	}
	if spec != nil {
		obj["spec"] = spec
	}
	_, err := w.dyn.Resource(gvr).Namespace(ns).Create(w.ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
	require.NoError(t, err)
}

type schemaGVR = schema.GroupVersionResource

var (
	crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	namespaces  = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
)
