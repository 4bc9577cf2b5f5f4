package nodeworker

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/switchback-dev/switchback/aggregate/nodeupgrade"
	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/events"
)

// TestNeedsPlacement: the cluster-wide placement is read for a pending
// volume the switch-over would move now, never for one it waits on or
// has moved, nor for a volume whose target is elsewhere; and, bringing a
// target home, only for a volume whose replenishment is due.
func TestNeedsPlacement(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	served := volume("vol-a", "c1", "n1", "n2", "n3") // its target on n1
	rebuilding := served
	rebuilding.Replicas = []dataplane.Replica{replica("vol-a", "n2", dataplane.ReplicaRunning), replica("vol-a", "n3", dataplane.ReplicaRebuilding)}
	switchingPaths := served
	switchingPaths.Switchover, switchingPaths.PathsSwitching = dataplane.SwitchoverSwitchingOver, true
	elsewhere := volume("vol-a", "c1", "n2", "n2", "n3")
	due := elsewhere
	due.ReplenishAt = now.Add(replenishMargin / 2)
	later := elsewhere
	later.ReplenishAt = now.Add(time.Hour)
	for _, tc := range []struct {
		name  string
		step  events.NodeState
		v     dataplane.Volume
		state events.VolumeState
		want  bool
	}{
		{"pending, movable now", events.NodeSwitchingOver, served, events.VolumePending, true},
		{"pending, waiting for a rebuild", events.NodeSwitchingOver, rebuilding, events.VolumePending, false},
		{"switching over, its target still on the node: the destination is checked", events.NodeSwitchingOver, served, events.VolumeSwitchingOver, true},
		{"switching over, the initiator switching paths: no redirect", events.NodeSwitchingOver, switchingPaths, events.VolumeSwitchingOver, false},
		{"switching over, its target gone from the node", events.NodeSwitchingOver, elsewhere, events.VolumeSwitchingOver, false},
		{"its target on another node", events.NodeSwitchingOver, elsewhere, events.VolumePending, false},
		{"a late volume, while the IM waits", events.NodeUpgradingInstanceManager, served, events.VolumePending, true},
		{"coming home, replenishment due", events.NodeSwitchingBack, due, events.VolumeSwitchedOver, true},
		{"coming home, replenishment far off", events.NodeSwitchingBack, later, events.VolumeSwitchedOver, false},
		{"cancel, replenishment due", "", due, events.VolumeSwitchingOver, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := nodeupgrade.State{Volumes: map[string]nodeupgrade.Volume{"vol-a": {State: tc.state}}}
			o := observation{now: now, recorded: map[string]dataplane.Volume{"vol-a": tc.v}}
			assert.Equal(t, tc.want, needsPlacement(tc.step, st, o, "n1"))
		})
	}
}
