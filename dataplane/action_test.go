package dataplane_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/dataplane"
)

// TestActionRoundTrips: an Action applied to an ActionsFunc comes back as
// itself, for every call (Apply passes each field to the argument the
// method takes, and ActionsFunc puts each argument back in its field), and
// writes as the logs and golden files have it.
func TestActionRoundTrips(t *testing.T) {
	for _, tc := range []struct {
		action dataplane.Action
		line   string
	}{
		{dataplane.Action{Call: dataplane.CallSetReplicaScheduling, Object: "n1", Allow: true}, "SetReplicaScheduling n1 allow=true"},
		{dataplane.Action{Call: dataplane.CallSetReplicaScheduling, Object: "n1"}, "SetReplicaScheduling n1 allow=false"},
		{dataplane.Action{Call: dataplane.CallCreateSnapshot, Object: "vol-0", Arg: "snap"}, "CreateSnapshot vol-0 snap"},
		{dataplane.Action{Call: dataplane.CallDeleteSnapshot, Object: "vol-0", Arg: "snap"}, "DeleteSnapshot vol-0 snap"},
		{dataplane.Action{Call: dataplane.CallFailReplica, Object: "vol-0", Arg: "r1"}, "FailReplica vol-0 r1"},
		{dataplane.Action{Call: dataplane.CallStopReplica, Object: "vol-0", Arg: "r1"}, "StopReplica vol-0 r1"},
		{dataplane.Action{Call: dataplane.CallSetEngineNode, Object: "vol-0", Arg: "n2"}, `SetEngineNode vol-0 "n2"`},
		{dataplane.Action{Call: dataplane.CallSetEngineNode, Object: "vol-0"}, `SetEngineNode vol-0 ""`},
		{dataplane.Action{Call: dataplane.CallDeleteInstanceManager, Object: "im-1"}, "DeleteInstanceManager im-1"},
		{dataplane.Action{Call: dataplane.CallSetInstanceManagerImage, Object: "im-1", Arg: "img:v2"}, "SetInstanceManagerImage im-1 img:v2"},
	} {
		t.Run(tc.line, func(t *testing.T) {
			var got []dataplane.Action
			capture := dataplane.ActionsFunc(func(_ context.Context, a dataplane.Action) error {
				got = append(got, a)
				return nil
			})
			require.NoError(t, tc.action.Apply(context.Background(), capture))
			assert.Equal(t, []dataplane.Action{tc.action}, got)
			assert.Equal(t, tc.line, tc.action.String())
		})
	}
}

// TestUnknownActionIsRefused: a call this build does not know (a newer
// peer's) is refused, never made as something else.
func TestUnknownActionIsRefused(t *testing.T) {
	called := false
	err := dataplane.Action{Call: "DetachVolume", Object: "vol-0"}.Apply(context.Background(),
		dataplane.ActionsFunc(func(context.Context, dataplane.Action) error { called = true; return nil }))
	assert.ErrorIs(t, err, dataplane.ErrRefused)
	assert.False(t, called)
}
