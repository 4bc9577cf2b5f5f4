package precheck

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/switchback-dev/switchback/api/v1beta2"
)

// TestNamesMatchTheAPI keeps the check names and reasons equal to the
// condition types and reasons the API documents, since a result is projected
// to a condition as is.
func TestNamesMatchTheAPI(t *testing.T) {
	assert.Equal(t, v1beta2.ConditionDataEngineSupported, DataEngineSupported)
	assert.Equal(t, v1beta2.ConditionNodesKnown, NodesKnown)
	assert.Equal(t, v1beta2.ConditionAtLeastTwoNodes, AtLeastTwoNodes)
	assert.Equal(t, v1beta2.ConditionSingleActiveUpgrade, SingleActiveUpgrade)
	assert.Equal(t, v1beta2.ConditionNoOtherUpgrader, NoOtherUpgrader)
	assert.Equal(t, v1beta2.ConditionDefaultImageOnAllNodesReady, DefaultImageOnAllNodesReady)
	assert.Equal(t, v1beta2.ConditionNoVersionDrift, NoVersionDrift)
	assert.Equal(t, v1beta2.ConditionVolumesHealthy, VolumesHealthy)

	assert.Equal(t, v1beta2.ReasonChecksPassed, ReasonChecksPassed)
	assert.Equal(t, v1beta2.ReasonUnknownNodes, ReasonUnknownNodes)
	assert.Equal(t, v1beta2.ReasonNodesWithoutV2Engine, ReasonNodesWithoutV2Engine)
	assert.Equal(t, v1beta2.ReasonUnsupportedDataEngine, ReasonUnsupportedDataEngine)
	assert.Equal(t, v1beta2.ReasonTooFewNodes, ReasonTooFewNodes)
	assert.Equal(t, v1beta2.ReasonAnotherUpgradeActive, ReasonAnotherUpgradeActive)
	assert.Equal(t, v1beta2.ReasonOtherUpgraderActive, ReasonOtherUpgraderActive)
	assert.Equal(t, v1beta2.ReasonOtherUpgraderUnknown, ReasonOtherUpgraderUnknown)
	assert.Equal(t, v1beta2.ReasonImageNotReady, ReasonImageNotReady)
	assert.Equal(t, v1beta2.ReasonVersionDrift, ReasonVersionDrift)
	assert.Equal(t, v1beta2.ReasonVolumeUnhealthy, ReasonVolumeUnhealthy)
	assert.Equal(t, v1beta2.ReasonSingleReplica, ReasonSingleReplica)
}
