package orchestrator

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/switchback-dev/switchback/aggregate/nodeupgrade"
	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/events"
)

// TestTargetAwayRecord: the record a volume carries is the projection of
// the node's history, created only when the volume confirms it (its engine
// node the one recorded before, its target on the node), moved with a
// redirect, kept through the switch-back, and removed once the target is
// home; another node's record is left alone.
func TestTargetAwayRecord(t *testing.T) {
	strp := func(s string) *string { return &s }
	// vol runs its target on n1 (attached to c1, spec.engineNodeID n1).
	vol := dataplane.Volume{Name: "v", DataEngine: dataplane.DataEngineV2, AttachedNode: "c1", TargetNode: "n1", EngineNode: "n1"}
	with := func(change func(v *dataplane.Volume)) dataplane.Volume {
		v := vol
		change(&v)
		return v
	}
	toN3 := &dataplane.TargetAway{Node: "n1", EngineNodeBefore: "n1", Temporary: "n3"}
	switching := nodeupgrade.Volume{State: events.VolumeSwitchingOver, TargetNode: "n3", EngineNodeBefore: strp("n1")}
	for _, tc := range []struct {
		name    string
		rec     nodeupgrade.Volume
		v       dataplane.Volume
		want    *dataplane.TargetAway
		write   bool
		refused string
	}{
		{name: "switching over, confirmed by the volume: recorded", rec: switching, v: vol, want: toN3, write: true},
		{name: "switching over, the engine following its attachment to n1: recorded",
			rec:  nodeupgrade.Volume{State: events.VolumeSwitchingOver, TargetNode: "n3", EngineNodeBefore: strp("")},
			v:    with(func(v *dataplane.Volume) { v.AttachedNode, v.TargetNode, v.EngineNode = "n1", "", "" }),
			want: &dataplane.TargetAway{Node: "n1", Temporary: "n3"}, write: true},
		{name: "already recorded: nothing to write", rec: switching, v: with(func(v *dataplane.Volume) { v.Away = toN3 }), want: toN3},
		{name: "redirected: the temporary node follows",
			rec:  nodeupgrade.Volume{State: events.VolumeSwitchingOver, TargetNode: "n2", EngineNodeBefore: strp("n1")},
			v:    with(func(v *dataplane.Volume) { v.EngineNode, v.Away = "n3", toN3 }),
			want: &dataplane.TargetAway{Node: "n1", EngineNodeBefore: "n1", Temporary: "n2"}, write: true},
		{name: "a history the volume's engine node contradicts: not recorded", rec: switching,
			v: with(func(v *dataplane.Volume) { v.EngineNode = "n2" }), refused: `its spec.engineNodeID is "n2", not "n1"`},
		{name: "a history of a target that is not on the node: not recorded",
			rec:     nodeupgrade.Volume{State: events.VolumeSwitchingOver, TargetNode: "n3", EngineNodeBefore: strp("")},
			v:       with(func(v *dataplane.Volume) { v.TargetNode, v.EngineNode = "n2", "" }),
			refused: `its target is on "n2" (engine node "", attached to "c1"), not on n1`},
		{name: "another node's record, confirmed new one: replaced", rec: switching,
			v: with(func(v *dataplane.Volume) {
				v.Away = &dataplane.TargetAway{Node: "n2", EngineNodeBefore: "n2", Temporary: "n1"}
			}),
			want: toN3, write: true},
		{name: "switching back: kept as it is", rec: nodeupgrade.Volume{State: events.VolumeSwitchingBack, TargetNode: "n1", EngineNodeBefore: strp("n1")},
			v: with(func(v *dataplane.Volume) { v.EngineNode, v.Away = "n3", toN3 }), want: toN3},
		{name: "switching back with no record: none created", rec: nodeupgrade.Volume{State: events.VolumeSwitchingBack, TargetNode: "n1", EngineNodeBefore: strp("n1")},
			v: vol},
		{name: "switched back: removed", rec: nodeupgrade.Volume{State: events.VolumeSwitchedBack, TargetNode: "n1"},
			v: with(func(v *dataplane.Volume) { v.Away = toN3 }), write: true},
		{name: "switched back, another node's record: left alone", rec: nodeupgrade.Volume{State: events.VolumeSwitchedBack, TargetNode: "n1"},
			v: with(func(v *dataplane.Volume) { v.Away = &dataplane.TargetAway{Node: "n2", Temporary: "n1"} })},
		{name: "completed with no record: nothing", rec: nodeupgrade.Volume{State: events.VolumeCompleted}, v: vol},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, write, refused := TargetAwayRecord("n1", tc.rec, tc.v)
			assert.Equal(t, tc.write, write, "write")
			if tc.write {
				assert.Equal(t, tc.want, want)
			}
			if tc.refused == "" {
				assert.Empty(t, refused)
			} else {
				assert.Contains(t, refused, tc.refused)
			}
		})
	}
}
