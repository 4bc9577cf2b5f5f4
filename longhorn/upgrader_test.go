package longhorn_test

import (
	"maps"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/longhorn"
	"github.com/switchback-dev/switchback/plan"
	"github.com/switchback-dev/switchback/precheck"
	"github.com/switchback-dev/switchback/sim"
)

// TestNoOtherUpgraderThroughTheAdapter: each form of the automatic-upgrade
// settings, set in the simulator, written as Setting objects by the
// simulated manager and read back through the adapter (plan.Read, as the
// controller and the webhook do), gives NoOtherUpgrader's verdict and
// message. The settings go away when the simulator drops them; the other
// settings stay. On the v1.12 profile (this apiserver serves no upgrader
// CRD) the upgrader's objects are not asked for.
func TestNoOtherUpgraderThroughTheAdapter(t *testing.T) {
	const (
		v2Setting  = dataplane.SettingV2IMAutoUpgrade
		anySetting = dataplane.SettingIMAutoUpgrade
		prefix     = "Longhorn's own instance-manager upgrader would race this upgrade: "
	)
	c := newCluster(t, build(t, sim.Config{LonghornVersion: "v1.12.1"}))
	tests := []struct {
		name     string
		settings map[string]string
		passed   bool
		message  string
	}{
		{name: "absent (Longhorn v1.12.1)", passed: true,
			message: "this Longhorn has no instance-manager upgrader of its own"},
		{name: "false", settings: map[string]string{v2Setting: "false"}, passed: true,
			message: "Longhorn's own instance-manager upgrader is off and idle (allow-v2-instance-manager-automatic-upgrade)"},
		{name: "plain true", settings: map[string]string{v2Setting: "true"},
			message: prefix + `setting allow-v2-instance-manager-automatic-upgrade is "true": set it to "false"`},
		{name: "the renamed setting, JSON with v2 true", settings: map[string]string{anySetting: `{"v1":"false","v2":"true"}`},
			message: prefix + `setting allow-instance-manager-automatic-upgrade is "{\"v1\":\"false\",\"v2\":\"true\"}": set "v2" to "false" in it`},
		{name: "the renamed setting, JSON with v2 false", settings: map[string]string{anySetting: `{"v1":"true","v2":"false"}`}, passed: true,
			message: "Longhorn's own instance-manager upgrader is off and idle (allow-instance-manager-automatic-upgrade)"},
		{name: "both names, one on", settings: map[string]string{anySetting: `{"v2":"false"}`, v2Setting: "true"},
			message: prefix + `setting allow-v2-instance-manager-automatic-upgrade is "true": set it to "false"`},
		{name: "absent again: the Setting objects are deleted", passed: true,
			message: "this Longhorn has no instance-manager upgrader of its own"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c.sim.SetLonghornUpgrader(dataplane.LonghornUpgrader{Settings: tt.settings})
			c.mgr.Kick()
			eventually(t, 15*time.Second, "the adapter reads the settings the simulator has", func() bool {
				got, err := c.plane.LonghornUpgrader(c.ctx)
				return err == nil && maps.Equal(got.Settings, tt.settings)
			})
			for _, name := range dataplane.AutoUpgradeSettings {
				value, want := tt.settings[name]
				var found bool
				for _, u := range c.list(longhorn.SettingsResource) {
					if u.GetName() == name {
						found = true
						assert.Equal(t, value, u.Object["value"], "setting %s", name)
					}
				}
				assert.Equal(t, want, found, "setting %s exists exactly when the simulator has it", name)
			}

			cluster, err := plan.Read(c.ctx, c.plane)
			require.NoError(t, err)
			assert.Empty(t, cluster.Upgrader.Controls, "no upgrader CRD served: none listed")
			assert.Empty(t, cluster.Upgrader.Upgrades)
			r := precheck.OtherUpgrader(cluster.Upgrader)
			assert.Equal(t, precheck.NoOtherUpgrader, r.Check)
			assert.Equal(t, tt.passed, r.Passed)
			assert.Equal(t, tt.message, r.Message)
			if !tt.passed {
				assert.Equal(t, precheck.ReasonOtherUpgraderActive, r.Reason)
			}
			// The same verdict among all the prechecks, as the controller runs them.
			var inRun []precheck.Result
			for _, res := range precheck.Run(precheck.Input{Cluster: cluster, DataEngine: dataplane.DataEngineV2, TargetImage: cluster.DefaultImage}) {
				if res.Check == precheck.NoOtherUpgrader {
					inRun = append(inRun, res)
				}
			}
			assert.Equal(t, []precheck.Result{r}, inRun)

			// The settings the manager always writes are kept.
			version := decode[longhorn.Setting](c, longhorn.SettingsResource, longhorn.SettingCurrentLonghornVersion)
			assert.Equal(t, "v1.12.1", version.Value)
			image := decode[longhorn.Setting](c, longhorn.SettingsResource, longhorn.SettingDefaultInstanceManagerImage)
			assert.Equal(t, cluster.DefaultImage, image.Value)
		})
	}
}

// On the in-place profile the upgrader's objects are listed live. Told that
// profile over an apiserver that does not serve their CRDs (as
// TestInPlaceWriteSequence drives it), the read still succeeds: a resource
// not served holds no object. The settings are read as on any profile.
func TestLonghornUpgraderInPlaceWithoutItsCRDs(t *testing.T) {
	s := build(t, sim.Config{Profile: dataplane.ProfileInPlace})
	s.SetLonghornUpgrader(dataplane.LonghornUpgrader{Settings: map[string]string{dataplane.SettingV2IMAutoUpgrade: "false"}})
	c := newClusterWith(t, s, clusterOptions{platform: &dataplane.Platform{Profile: dataplane.ProfileInPlace}})
	eventually(t, 15*time.Second, "the adapter reads the setting", func() bool {
		got, err := c.plane.LonghornUpgrader(c.ctx)
		require.NoError(t, err)
		return maps.Equal(got.Settings, map[string]string{dataplane.SettingV2IMAutoUpgrade: "false"})
	})
	cluster, err := plan.Read(c.ctx, c.plane)
	require.NoError(t, err)
	assert.Equal(t, dataplane.LonghornUpgrader{Settings: map[string]string{dataplane.SettingV2IMAutoUpgrade: "false"}}, cluster.Upgrader)
	assert.True(t, precheck.OtherUpgrader(cluster.Upgrader).Passed)
}
