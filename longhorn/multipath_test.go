package longhorn_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/longhorn"
	"github.com/switchback-dev/switchback/sim"
)

// TestMultipathReportReachesTheSteps: a worker's report of its kernel's
// nvme_core.multipath lands on its Longhorn node as the annotation, and
// every reader then sees it on the node and on the volumes attached there,
// which the steps and the plan refuse to switch over; reporting again
// writes nothing; unknown removes it.
func TestMultipathReportReachesTheSteps(t *testing.T) {
	s := sim.New(sim.Config{LonghornVersion: "v1.12.1"})
	for _, n := range []string{"n1", "n2", "n3"} {
		require.NoError(t, s.AddNode(n))
	}
	require.NoError(t, s.AddVolumeSpec(sim.VolumeSpec{Name: "vol", ReplicasOn: []string{"n2", "n3"}, AttachedTo: "n1", EngineOn: "n2"}))
	c := newCluster(t, s)
	ctx := c.ctx

	n1, err := c.plane.Node(ctx, "n1")
	require.NoError(t, err)
	require.Equal(t, dataplane.MultipathOn, n1.NVMeMultipath, "the simulated worker's report, rendered")

	require.NoError(t, c.plane.ReportNVMeMultipath(ctx, "n1", dataplane.MultipathOff))
	assert.Equal(t, "N", c.object(longhorn.NodesResource, "n1").GetAnnotations()[longhorn.MultipathAnnotation])
	n1, err = c.plane.Node(ctx, "n1")
	require.NoError(t, err)
	assert.Equal(t, dataplane.MultipathOff, n1.NVMeMultipath)
	v, err := c.plane.Volume(ctx, "vol")
	require.NoError(t, err)
	assert.Equal(t, dataplane.MultipathOff, v.InitiatorMultipath, "the attached node's reading")
	assert.Contains(t, v.MultipathBlocker(), "nvme_core.multipath is N")
	c.waitInStep("the simulated host follows the report")

	rv := c.object(longhorn.NodesResource, "n1").GetResourceVersion()
	require.NoError(t, c.plane.ReportNVMeMultipath(ctx, "n1", dataplane.MultipathOff))
	assert.Equal(t, rv, c.object(longhorn.NodesResource, "n1").GetResourceVersion(), "the same report writes nothing")

	require.NoError(t, c.plane.ReportNVMeMultipath(ctx, "n1", dataplane.MultipathUnknown))
	assert.NotContains(t, c.object(longhorn.NodesResource, "n1").GetAnnotations(), longhorn.MultipathAnnotation)
	v, err = c.plane.Volume(ctx, "vol")
	require.NoError(t, err)
	assert.Equal(t, dataplane.MultipathUnknown, v.InitiatorMultipath)
	assert.Empty(t, v.MultipathBlocker(), "unknown blocks nothing")
	assert.ErrorIs(t, c.plane.ReportNVMeMultipath(ctx, "ghost", dataplane.MultipathOn), dataplane.ErrNotFound)
}
