package precheck

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestCheckDataEngineSupported(t *testing.T) {
	tests := []struct {
		engine string
		want   Result
	}{
		{"v2", Result{DataEngineSupported, true, ReasonChecksPassed, `data engine "v2" is supported`}},
		{"v1", Result{DataEngineSupported, false, ReasonUnsupportedDataEngine, `data engine "v1" is not supported: only "v2" can be upgraded live`}},
		{"", Result{DataEngineSupported, false, ReasonUnsupportedDataEngine, `data engine "" is not supported: only "v2" can be upgraded live`}},
		{"V2", Result{DataEngineSupported, false, ReasonUnsupportedDataEngine, `data engine "V2" is not supported: only "v2" can be upgraded live`}},
	}
	for _, tt := range tests {
		t.Run(tt.engine, func(t *testing.T) {
			in := input(cluster(2))
			in.DataEngine = tt.engine
			assert.Equal(t, tt.want, CheckDataEngineSupported(in))
		})
	}
}

func TestCheckSingleActiveUpgrade(t *testing.T) {
	tests := []struct {
		name   string
		active []string
		want   Result
	}{
		{"none", nil, Result{SingleActiveUpgrade, true, ReasonChecksPassed, "no other upgrade is active"}},
		{"one", []string{"longhorn-system/upgrade-1"}, Result{SingleActiveUpgrade, false, ReasonAnotherUpgradeActive,
			"another upgrade is active: longhorn-system/upgrade-1; wait until it completes or delete it"}},
		{"several, sorted once each", []string{"ns/b", "ns/a", "ns/b"}, Result{SingleActiveUpgrade, false, ReasonAnotherUpgradeActive,
			"another upgrade is active: ns/a, ns/b; wait until it completes or delete it"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := input(cluster(2))
			in.ActiveUpgrades = tt.active
			assert.Equal(t, tt.want, CheckSingleActiveUpgrade(in))
		})
	}
}
