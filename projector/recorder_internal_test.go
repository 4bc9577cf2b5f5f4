package projector

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/events"
)

// Each volume change gets the Event reason a user filters on: recorded,
// the state it reaches, or redirected when a switch-over is sent to
// another temporary target.
func TestVolumeChangeReasons(t *testing.T) {
	ref := events.ManagerRef{Namespace: "ns", Name: "m", UID: "uid"}
	for _, tt := range []struct {
		change events.VolumeStateChanged
		reason string
		note   string
	}{
		{events.VolumeStateChanged{Volume: "v", To: events.VolumePending}, "VolumeRecorded", "volume v on node n1: recorded -> pending"},
		{events.VolumeStateChanged{Volume: "v", From: events.VolumePending, To: events.VolumeSwitchingOver, TargetNode: "n2"}, "VolumeSwitchingOver",
			"volume v on node n1: pending -> switching-over (target on n2)"},
		{events.VolumeStateChanged{Volume: "v", From: events.VolumeSwitchingOver, To: events.VolumeSwitchingOver, TargetNode: "n3", Message: "n2 is not ready"},
			"VolumeRedirected", "volume v on node n1: switching-over -> switching-over (target on n3): n2 is not ready"},
	} {
		t.Run(tt.reason, func(t *testing.T) {
			ns := noticesFor(newView(ref), events.Envelope{Aggregate: events.NodeAggregate(ref, "n1"), Data: tt.change})
			require.Len(t, ns, 1)
			assert.Equal(t, tt.reason, ns[0].reason)
			assert.Equal(t, tt.note, ns[0].note)
		})
	}
}

// Moving a node's workloads shows as the Events an operator filters on:
// the taint put and taken off, each pod evicted, each share-manager
// restarted, on the node's objects and the manager.
func TestWorkloadMoveReasons(t *testing.T) {
	ref := events.ManagerRef{Namespace: "ns", Name: "m", UID: "uid"}
	for _, tt := range []struct {
		change events.Event
		reason string
		note   string
	}{
		{events.NodeTainted{Key: "k"}, "NodeTainted", "node n1 tainted k:NoSchedule, so that the pods moved off it are not scheduled back"},
		{events.NodeUntainted{Key: "k"}, "NodeUntainted", "node n1: taint k taken off"},
		{events.PodMoved{Pod: "app/web-1", Volumes: []string{"v"}}, "PodEvicted", "pod app/web-1 evicted off node n1, which it held the initiators of v on"},
		{events.PodMoved{Pod: "longhorn-system/share-manager-v", Volumes: []string{"v"}, Restart: true}, "ShareManagerRestarted",
			"share-manager pod longhorn-system/share-manager-v of v deleted on node n1: Longhorn starts it elsewhere, and its NFS clients reconnect"},
	} {
		t.Run(tt.reason, func(t *testing.T) {
			ns := noticesFor(newView(ref), events.Envelope{Aggregate: events.NodeAggregate(ref, "n1"), Data: tt.change})
			require.Len(t, ns, 1)
			assert.Equal(t, tt.reason, ns[0].reason)
			assert.Equal(t, tt.note, ns[0].note)
			assert.False(t, ns[0].warning)
		})
	}
}
