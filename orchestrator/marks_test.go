package orchestrator

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/switchback-dev/switchback/aggregate/manager"
	"github.com/switchback-dev/switchback/events"
)

// TestMarkChange: a node still to come carries the running manager's
// mark; an upgraded one, or any once the upgrade ended or is cancelled,
// carries none; another manager's mark is replaced, never taken off.
func TestMarkChange(t *testing.T) {
	ref := events.ManagerRef{Namespace: "ns", Name: "m", UID: "uid"}
	running := manager.State{Exists: true, Ref: ref, State: events.ManagerUpgrading, InitiatorPolicy: events.InitiatorPolicyMoveWorkloads,
		Plan: []string{"n1", "n2", "n3"}, UpgradingNode: "n2",
		Nodes: map[string]manager.NodeStatus{"n1": {State: events.NodeCompleted}, "n2": {State: events.NodePending}}}
	cancelling := running
	cancelling.CancelRequested = true
	failed := running
	failed.State = events.ManagerError
	for _, tc := range []struct {
		name      string
		st        manager.State
		node      string
		have      string
		want      string
		wantWrite bool
		ended     bool
	}{
		{"the node in flight, its outcome about to be recorded: unmarked", running, "n2", "uid", "", true, true},
		{"a node to come, unmarked: marked", running, "n3", "", "uid", true, false},
		{"a node to come, marked: nothing", running, "n3", "uid", "uid", false, false},
		{"the node in flight keeps its mark", running, "n2", "uid", "uid", false, false},
		{"an upgraded node: unmarked", running, "n1", "uid", "", true, false},
		{"an upgraded node, unmarked: nothing", running, "n1", "", "", false, false},
		{"another manager's mark on a node to come: replaced", running, "n3", "other", "uid", true, false},
		{"another manager's mark on an upgraded node: left", running, "n1", "other", "other", false, false},
		{"a cancel: unmarked", cancelling, "n3", "uid", "", true, false},
		{"an upgrade in error: unmarked", failed, "n2", "uid", "", true, false},
		{"an upgrade in error, another's mark: left", failed, "n3", "other", "other", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, write := markChange(tc.st, tc.node, tc.have, tc.ended)
			assert.Equal(t, tc.want, want)
			assert.Equal(t, tc.wantWrite, write)
		})
	}
}
