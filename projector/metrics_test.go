package projector_test

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/aggregate/nodeupgrade"
	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/metrics"
	"github.com/switchback-dev/switchback/sim"
	"github.com/switchback-dev/switchback/test/harness/enginetest"
)

// A stuck volume, seen by Prometheus: while n1 is stalled,
// switchback_stalled_nodes has one series for it, with the step and the
// worker's reason the fold holds, and switchback_upgrading_node names n1
// at that step; once the volume is fixed and the upgrade completed, neither
// has a series for the manager. A projector that stops drops the
// manager's series altogether: it no longer keeps them true.
func TestStallIsAPrometheusSeriesUntilItResumes(t *testing.T) {
	cluster := threeNodes(t, sim.Config{Profile: dataplane.ProfileInPlace})
	// vol-0 is attached to n1 with its target there: n1's switch-over hangs.
	require.NoError(t, cluster.InjectTargetMoveFailure("vol-0"))
	h := newHarness(t, cluster, enginetest.Options{})
	ref := h.createManager("stalled-metric", "n1", "n2", "n3")
	manager := ref.String()
	proj := h.startProjector(nil)
	h.e.Request(ref)

	n1 := h.e.WaitNode(ref, "n1", 30*time.Second, "n1 stalled", func(s nodeupgrade.State) bool { return s.Stalled })
	require.NotEmpty(t, n1.StallReason)
	want := []labeled{{labels: map[string]string{"manager": manager, "node": "n1", "step": string(n1.StallStep), "reason": n1.StallReason}, value: 1}}
	eventually(t, 30*time.Second, "switchback_stalled_nodes for n1", func() ([]labeled, error) {
		return gathered(t, "switchback_stalled_nodes", manager), nil
	}, func(got []labeled) bool { return equalSeries(got, want) })
	// The node in flight is n1, at the step it is stalled at.
	inFlight := []labeled{{labels: map[string]string{"manager": manager, "node": "n1", "state": string(n1.StallStep)}, value: 1}}
	eventually(t, 10*time.Second, "switchback_upgrading_node names n1", func() ([]labeled, error) {
		return gathered(t, "switchback_upgrading_node", manager), nil
	}, func(got []labeled) bool { return equalSeries(got, inFlight) })

	// The user fixes the volume: the stall's series goes, with the upgrade.
	require.NoError(t, cluster.HealTargetMoveFailure("vol-0"))
	h.waitCaughtUp(ref, 30*time.Second)
	eventually(t, 10*time.Second, "no switchback_stalled_nodes or switchback_upgrading_node left", func() ([]labeled, error) {
		return append(gathered(t, "switchback_stalled_nodes", manager), gathered(t, "switchback_upgrading_node", manager)...), nil
	}, func(got []labeled) bool { return len(got) == 0 })
	assert.Equal(t, 3.0, series(t, "switchback_nodes", map[string]string{"manager": manager, "state": "completed"}))

	proj.stop()
	assert.Empty(t, gathered(t, "switchback_nodes", manager), "a stopped projector keeps no series")
}

// labeled is one series of a family: its labels and value.
type labeled struct {
	labels map[string]string
	value  float64
}

// gathered returns the series of a gauge family of Switchback's registry
// whose label manager is manager.
func gathered(t *testing.T, name, manager string) []labeled {
	t.Helper()
	families, err := metrics.Registry.Gather()
	require.NoError(t, err)
	var out []labeled
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			if l["manager"] == manager {
				out = append(out, labeled{labels: l, value: m.GetGauge().GetValue()})
			}
		}
	}
	return out
}

func equalSeries(a, b []labeled) bool {
	key := func(l labeled) string {
		keys := slices.Sorted(maps.Keys(l.labels))
		var s strings.Builder
		for _, k := range keys {
			s.WriteString(k + "=" + l.labels[k] + ",")
		}
		return s.String()
	}
	return slices.EqualFunc(a, b, func(x, y labeled) bool { return key(x) == key(y) && x.value == y.value })
}
