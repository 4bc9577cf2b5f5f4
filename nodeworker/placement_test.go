package nodeworker

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/switchback-dev/switchback/aggregate/nodeupgrade"
	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/events"
)

// TestNeedsPlacement: the cluster-wide placement is read for a pending
// volume the switch-over would move now, never for one it waits on or
// has moved, nor for a volume whose target is elsewhere.
func TestNeedsPlacement(t *testing.T) {
	served := volume("vol-a", "c1", "n1", "n2", "n3") // its target on n1
	rebuilding := served
	rebuilding.Replicas = []dataplane.Replica{replica("vol-a", "n2", dataplane.ReplicaRunning), replica("vol-a", "n3", dataplane.ReplicaRebuilding)}
	elsewhere := volume("vol-a", "c1", "n2", "n2", "n3")
	for _, tc := range []struct {
		name  string
		v     dataplane.Volume
		state events.VolumeState
		want  bool
	}{
		{"pending, movable now", served, events.VolumePending, true},
		{"pending, waiting for a rebuild", rebuilding, events.VolumePending, false},
		{"already switching over", served, events.VolumeSwitchingOver, false},
		{"its target on another node", elsewhere, events.VolumePending, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := nodeupgrade.State{Volumes: map[string]nodeupgrade.Volume{"vol-a": {State: tc.state}}}
			assert.Equal(t, tc.want, needsPlacement(st, map[string]dataplane.Volume{"vol-a": tc.v}, "n1"))
		})
	}
}
