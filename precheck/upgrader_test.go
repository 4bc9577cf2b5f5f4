package precheck

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/switchback-dev/switchback/dataplane"
)

func TestOtherUpgrader(t *testing.T) {
	const (
		v2Setting  = dataplane.SettingV2IMAutoUpgrade
		anySetting = dataplane.SettingIMAutoUpgrade
		prefix     = "Longhorn's own instance-manager upgrader would race this upgrade: "
	)
	settings := func(kv ...string) dataplane.LonghornUpgrader {
		u := dataplane.LonghornUpgrader{Settings: map[string]string{}}
		for i := 0; i < len(kv); i += 2 {
			u.Settings[kv[i]] = kv[i+1]
		}
		return u
	}
	tests := []struct {
		name    string
		u       dataplane.LonghornUpgrader
		passed  bool
		message string
	}{
		{name: "no upgrader (Longhorn v1.12.1)", passed: true, message: "this Longhorn has no instance-manager upgrader of its own"},
		{name: "setting false", u: settings(v2Setting, "false"), passed: true,
			message: "Longhorn's own instance-manager upgrader is off and idle (allow-v2-instance-manager-automatic-upgrade)"},
		{name: "plain true", u: settings(v2Setting, "true"),
			message: prefix + `setting allow-v2-instance-manager-automatic-upgrade is "true": set it to "false"`},
		{name: "plain TRUE with spaces", u: settings(v2Setting, " True "),
			message: prefix + `setting allow-v2-instance-manager-automatic-upgrade is " True ": set it to "false"`},
		{name: "the renamed setting, JSON with v2 true", u: settings(anySetting, `{"v1":"false","v2":"true"}`),
			message: prefix + `setting allow-instance-manager-automatic-upgrade is "{\"v1\":\"false\",\"v2\":\"true\"}": set "v2" to "false" in it`},
		{name: "the renamed setting, JSON with v2 false", u: settings(anySetting, `{"v1":"true","v2":"false"}`), passed: true,
			message: "Longhorn's own instance-manager upgrader is off and idle (allow-instance-manager-automatic-upgrade)"},
		{name: "JSON without v2: refused, it does not say", u: settings(anySetting, `{"v1":true}`),
			message: prefix + `setting allow-instance-manager-automatic-upgrade is "{\"v1\":true}", which reads neither as on nor as off for v2 (no "v2" in it): set it to "false"`},
		{name: "an unreadable value fails closed", u: settings(anySetting, "sometimes"),
			message: prefix + `setting allow-instance-manager-automatic-upgrade is "sometimes", which reads neither as on nor as off for v2 (not a boolean nor a JSON object): set it to "false"`},
		{name: "both settings on", u: settings(anySetting, "true", v2Setting, "true"),
			message: prefix + `setting allow-instance-manager-automatic-upgrade is "true": set it to "false"; setting allow-v2-instance-manager-automatic-upgrade is "true": set it to "false"`},
		{name: "switched off while a node is in flight: still refused", u: dataplane.LonghornUpgrader{
			Settings: map[string]string{v2Setting: "false"},
			Controls: []dataplane.UpgradeControl{{Name: "longhorn-instance-manager-upgrade-control", CurrentNode: "n2",
				Nodes: map[string]string{"n1": "completed", "n2": "in-progress", "n3": "pending"}}},
			Upgrades: []dataplane.IMUpgrade{{Name: "upgrade-n1-20261130120000", Node: "n1", State: "completed"},
				{Name: "upgrade-n2-20261130121500", Node: "n2", State: "relocating-engines"}}},
			message: prefix + "instancemanagerupgradecontrols.longhorn.io longhorn-instance-manager-upgrade-control is upgrading node n2: wait until it ends; " +
				"instancemanagerupgrades.longhorn.io upgrade-n2-20261130121500 (node n2) is relocating-engines: wait until it is completed or failed"},
		{name: "a pending upgrade object counts", u: dataplane.LonghornUpgrader{Upgrades: []dataplane.IMUpgrade{{Name: "upgrade-n3-1", Node: "n3", State: "pending"}}},
			message: prefix + "instancemanagerupgrades.longhorn.io upgrade-n3-1 (node n3) is pending: wait until it is completed or failed"},
		{name: "everything over", passed: true, u: dataplane.LonghornUpgrader{
			Controls: []dataplane.UpgradeControl{{Name: "control", Nodes: map[string]string{"n1": "completed", "n2": "failed"}}},
			Upgrades: []dataplane.IMUpgrade{{Name: "a", Node: "n1", State: "completed"}, {Name: "b", Node: "n2", State: "failed"}}},
			message: "Longhorn's own instance-manager upgrader is off and idle"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := OtherUpgrader(tt.u)
			assert.Equal(t, NoOtherUpgrader, r.Check)
			assert.Equal(t, tt.passed, r.Passed)
			assert.Equal(t, tt.message, r.Message)
			if !tt.passed {
				assert.Equal(t, ReasonOtherUpgraderActive, r.Reason)
			}
		})
	}
}

// FuzzSettingOnForV2: any value is read as on, off or an error; never a
// panic, and an error is never "on".
func FuzzSettingOnForV2(f *testing.F) {
	for _, s := range []string{"true", "false", `{"v2":"true"}`, `{"v2":true}`, `{"v2":1}`, "", "{", `{"v2":"maybe"}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, value string) {
		on, err := settingOnForV2(value)
		if err != nil {
			assert.False(t, on)
		}
		r := OtherUpgrader(dataplane.LonghornUpgrader{Settings: map[string]string{dataplane.SettingIMAutoUpgrade: value}})
		assert.Equal(t, on || err != nil, !r.Passed, "refused exactly when on or unreadable")
	})
}
