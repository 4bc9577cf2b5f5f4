package report_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/report"
)

var (
	sw   = events.NodeSwitchingOver
	swim = events.NodeUpgradingInstanceManager
)

func stepNames(n *report.Node) []events.NodeState {
	var out []events.NodeState
	for _, s := range n.Steps {
		out = append(out, s.Name)
	}
	return out
}

func nodeNames(t *report.Timeline) []string {
	var out []string
	for _, n := range t.Nodes {
		out = append(out, n.Name)
	}
	return out
}

func TestFold(t *testing.T) {
	all := len(events.NodeSteps)
	cases := []struct {
		name    string
		history func() *hist
		check   func(t *testing.T, tl *report.Timeline)
	}{{
		name:    "an empty history has nothing to draw",
		history: func() *hist { return &hist{} },
		check: func(t *testing.T, tl *report.Timeline) {
			assert.Empty(t, tl.Nodes)
			assert.Nil(t, tl.Outcome)
			assert.Zero(t, tl.Totals.Duration)
		},
	}, {
		name: "nodes in plan order, one bar per step back to back, a node not started has none",
		history: func() *hist {
			h := planned("n2", "n1", "n3")
			end := h.steps("n2", 0, 10, all)
			h.steps("n1", end, 20, all)
			return h
		},
		check: func(t *testing.T, tl *report.Timeline) {
			assert.Equal(t, []string{"n2", "n1", "n3"}, nodeNames(tl))
			n2 := tl.Nodes[0]
			assert.Equal(t, events.NodeSteps, stepNames(n2))
			for i, s := range n2.Steps {
				assert.Equal(t, ms(10*i), s.Start, s.Name)
				assert.Equal(t, 10*time.Millisecond, s.Duration(), s.Name)
				assert.False(t, s.Open)
			}
			assert.Equal(t, "completed", n2.Steps[all-1].Outcome)
			assert.Equal(t, "next", n2.Steps[0].Outcome)
			assert.Equal(t, events.NodeCompleted, n2.State)
			assert.Empty(t, tl.Nodes[2].Steps)
			assert.Equal(t, ms(80+160), tl.End)
		},
	}, {
		name: "a stall keeps when it began and collects its messages until resumed",
		history: func() *hist {
			h := planned("n1")
			at := h.steps("n1", 0, 10, 3)
			h.node("n1", at+100, events.NodeStalled{Step: sw, Volume: "pvc-1", Reason: "SwitchoverFailing", Message: "pvc-1 refused"})
			h.node("n1", at+200, events.NodeStalled{Step: sw, Volume: "pvc-1", Reason: "SwitchoverFailing", Message: "pvc-1 still refused"})
			h.node("n1", at+200, events.NodeStalled{Step: sw, Volume: "pvc-1", Reason: "SwitchoverFailing", Message: "pvc-1 refused"})
			h.node("n1", at+300, events.NodeStalled{Step: sw, Volume: "pvc-1", Reason: "TargetNotMoved", Message: "pvc-1 moving"})
			h.node("n1", at+500, events.NodeResumed{Step: sw, Message: "step completed"})
			h.to("n1", at+500, 10, sw, swim)
			return h
		},
		check: func(t *testing.T, tl *report.Timeline) {
			n := tl.Nodes[0]
			require.Len(t, n.Stalls, 1)
			st := n.Stalls[0]
			assert.Equal(t, sw, st.Step)
			assert.Equal(t, ms(130), st.Start)
			assert.Equal(t, ms(530), st.End)
			assert.Equal(t, []string{"pvc-1 refused", "pvc-1 still refused", "pvc-1 moving"}, st.Messages)
			assert.Equal(t, "SwitchoverFailing, then TargetNotMoved", st.Reason, "its reasons in turn")
			assert.Equal(t, "step completed", st.CloseMessage)
			assert.True(t, n.Steps[3].Stalled, "the switching-over bar is marked")
			assert.False(t, n.Steps[2].Stalled)
			assert.Equal(t, 400*time.Millisecond, tl.Totals.Stalled)
		},
	}, {
		name: "the next step ends a stall, as the node's fold has it",
		history: func() *hist {
			h := planned("n1")
			at := h.steps("n1", 0, 10, 1)
			h.node("n1", at+50, events.NodeStalled{Step: events.NodeInitializing, Reason: "InitiatorsOnNode", Message: "move workloads"})
			h.to("n1", at+90, 0, events.NodeInitializing, events.NodeFailingReplicas)
			return h
		},
		check: func(t *testing.T, tl *report.Timeline) {
			st := tl.Nodes[0].Stalls[0]
			assert.False(t, st.Open)
			assert.Equal(t, ms(100), st.End)
			assert.True(t, tl.Nodes[0].Steps[1].Stalled)
		},
	}, {
		name: "a failed node: its last bar says so, and the error is marked",
		history: func() *hist {
			h := planned("n1", "n2")
			at := h.steps("n1", 0, 10, 4)
			h.node("n1", at+10, events.NodeUpgradeFailed{Step: swim, Reason: "InstanceManagerNotRunning", Message: "im crashlooping"})
			h.mgr(at+10, events.NodeFinished{Node: "n1", State: events.NodeError, Message: "im crashlooping"})
			h.mgr(at+20, events.UpgradeFailed{Reason: "NodeUpgradeFailed", Message: "n1 failed", Node: "n1"})
			return h
		},
		check: func(t *testing.T, tl *report.Timeline) {
			n := tl.Nodes[0]
			last := n.Steps[len(n.Steps)-1]
			assert.Equal(t, swim, last.Name)
			assert.Equal(t, "failed", last.Outcome)
			assert.Equal(t, "InstanceManagerNotRunning: im crashlooping", last.CloseMessage)
			assert.Equal(t, events.NodeError, n.State)
			require.Len(t, tl.Errors, 2)
			assert.Equal(t, "n1", tl.Errors[0].Node)
			assert.Equal(t, "FAILED in upgrading-instance-manager", tl.Errors[0].What)
			require.NotNil(t, tl.Outcome)
			assert.Equal(t, "upgrade FAILED", tl.Outcome.What)
			assert.Equal(t, events.ManagerError, tl.State)
		},
	}, {
		name: "a cancel: the point it was asked at, and the step the node stopped in",
		history: func() *hist {
			h := planned("n1", "n2")
			at := h.steps("n1", 0, 10, 3)
			h.mgr(at+40, events.CancelRequested{Reason: "manager deleted"})
			h.node("n1", at+41, events.NodeCancelRequested{Reason: "manager deleted"})
			h.node("n1", at+60, events.NodeUpgradeCancelled{Step: sw, Message: "targets back"})
			h.mgr(at+61, events.NodeFinished{Node: "n1", State: events.NodeCancelled})
			h.mgr(at+62, events.UpgradeCancelled{Message: "safe point reached", Node: "n1"})
			return h
		},
		check: func(t *testing.T, tl *report.Timeline) {
			require.NotNil(t, tl.Cancel)
			assert.Equal(t, ms(70), tl.Cancel.At)
			assert.Equal(t, "manager deleted", tl.Cancel.Message)
			last := tl.Nodes[0].Steps[3]
			assert.Equal(t, "cancelled", last.Outcome)
			assert.Equal(t, ms(90), last.End)
			assert.Equal(t, events.ManagerCancelled, tl.State)
			assert.Equal(t, "upgrade cancelled", tl.Outcome.What)
			assert.Empty(t, tl.Nodes[1].Steps)
		},
	}, {
		name: "a history cut short: the step in flight runs to its end",
		history: func() *hist {
			h := planned("n1")
			at := h.steps("n1", 0, 10, 3)
			h.node("n1", at+35, events.NodeStalled{Step: sw, Reason: "SwitchoverFailing", Message: "refused"})
			return h
		},
		check: func(t *testing.T, tl *report.Timeline) {
			n := tl.Nodes[0]
			last := n.Steps[len(n.Steps)-1]
			assert.True(t, last.Open)
			assert.Equal(t, tl.End, last.End)
			assert.True(t, n.Stalls[0].Open)
			assert.Equal(t, ms(65), n.End, "the node is drawn up to the end of the history")
			assert.Nil(t, tl.Outcome)
			assert.Equal(t, events.ManagerUpgrading, tl.State)
		},
	}, {
		name: "an event the fold refuses is listed and drawn nowhere",
		history: func() *hist {
			h := planned("n1")
			at := h.steps("n1", 0, 10, 1)
			h.node("n1", at+10, events.NodeStateChanged{From: sw, To: swim})
			return h
		},
		check: func(t *testing.T, tl *report.Timeline) {
			require.Len(t, tl.Refused, 1)
			assert.Equal(t, uint64(7), tl.Refused[0].Sequence)
			assert.Contains(t, tl.Refused[0].Message, "change from switching-over but the node is at initializing")
			assert.Equal(t, []events.NodeState{events.NodePending, events.NodeInitializing}, stepNames(tl.Nodes[0]))
			assert.Equal(t, ms(10), tl.End, "a refused event does not stretch the span")
		},
	}, {
		name: "volumes: only switch-over moves, away from the first move to the switch back",
		history: func() *hist {
			h := planned("n1")
			at := h.steps("n1", 0, 10, 3)
			for _, v := range []string{"pvc-a", "pvc-b", "pvc-c"} {
				h.node("n1", at, events.VolumeStateChanged{Volume: v, To: events.VolumePending})
			}
			h.node("n1", at+5, events.VolumeStateChanged{Volume: "pvc-a", From: events.VolumePending, To: events.VolumeSwitchingOver, TargetNode: "n2", Message: "moving to n2"})
			h.node("n1", at+6, events.VolumeStateChanged{Volume: "pvc-b", From: events.VolumePending, To: events.VolumeSwitchingOver, TargetNode: "n3"})
			h.node("n1", at+20, events.VolumeStateChanged{Volume: "pvc-a", From: events.VolumeSwitchingOver, To: events.VolumeSwitchedOver, TargetNode: "n2"})
			h.node("n1", at+30, events.VolumeStateChanged{Volume: "pvc-a", From: events.VolumeSwitchedOver, To: events.VolumeSwitchingBack})
			h.node("n1", at+45, events.VolumeStateChanged{Volume: "pvc-a", From: events.VolumeSwitchingBack, To: events.VolumeSwitchedBack, TargetNode: "n1"})
			h.node("n1", at+50, events.VolumeStateChanged{Volume: "pvc-c", From: events.VolumePending, To: events.VolumeCompleted})
			h.node("n1", at+100, events.VolumeStateChanged{Volume: "pvc-b", From: events.VolumeSwitchingOver, To: events.VolumeError, Message: "lost"})
			return h
		},
		check: func(t *testing.T, tl *report.Timeline) {
			n := tl.Nodes[0]
			require.Len(t, n.Volumes, 2, "pvc-c never moved")
			a, b := n.Volumes[0], n.Volumes[1]
			assert.Equal(t, "pvc-a", a.Name)
			require.Len(t, a.Moves, 4)
			assert.Equal(t, report.Move{At: ms(35), From: events.VolumePending, To: events.VolumeSwitchingOver, TargetNode: "n2", Message: "moving to n2"}, a.Moves[0])
			assert.Equal(t, 40*time.Millisecond, a.Away(tl.End))
			assert.Equal(t, 94*time.Millisecond, b.Away(tl.End))
			assert.Equal(t, []report.VolumeTotal{{Node: "n1", Volume: "pvc-b", Away: 94 * time.Millisecond}, {Node: "n1", Volume: "pvc-a", Away: 40 * time.Millisecond}},
				tl.Totals.Volumes, "slowest first")
			require.Len(t, tl.Errors, 1)
			assert.Equal(t, "volume pvc-b: switching-over → error", tl.Errors[0].What)
		},
	}, {
		name: "totals: time per step over the nodes, nodes slowest first",
		history: func() *hist {
			h := planned("n1", "n2")
			end := h.steps("n1", 0, 10, all)
			h.steps("n2", end, 30, all)
			return h
		},
		check: func(t *testing.T, tl *report.Timeline) {
			require.Len(t, tl.Totals.Steps, all)
			for _, s := range tl.Totals.Steps {
				assert.Equal(t, report.StepTotal{Step: s.Step, Nodes: 2, Total: 40 * time.Millisecond}, s)
			}
			assert.Equal(t, []report.NodeTotal{
				{Node: "n2", State: events.NodeCompleted, Duration: 240 * time.Millisecond},
				{Node: "n1", State: events.NodeCompleted, Duration: 80 * time.Millisecond},
			}, tl.Totals.Nodes)
			assert.Equal(t, 320*time.Millisecond, tl.Totals.Duration)
		},
	}, {
		name: "holds: from held to released, the last one open",
		history: func() *hist {
			h := planned("n1", "n2")
			end := h.steps("n1", 0, 10, all)
			h.mgr(end+10, events.UpgradeHeld{Reason: "OtherUpgraderActive", Message: "on"})
			h.mgr(end+20, events.UpgradeHeld{Reason: "OtherUpgraderActive", Message: "still on"})
			h.mgr(end+30, events.UpgradeReleased{Message: "off"})
			h.mgr(end+40, events.UpgradeHeld{Reason: "OtherUpgraderActive", Message: "on again"})
			return h
		},
		check: func(t *testing.T, tl *report.Timeline) {
			require.Len(t, tl.Holds, 2)
			assert.Equal(t, report.Span{Start: ms(90), End: ms(110), Reason: "OtherUpgraderActive", Message: "still on", CloseMessage: "off"}, tl.Holds[0])
			assert.True(t, tl.Holds[1].Open)
			assert.Equal(t, ms(120), tl.Holds[1].End)
		},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.check(t, report.BuildTimeline(tc.history().out))
		})
	}
}

func TestLatestPicksTheLastIncarnation(t *testing.T) {
	old := planned("n1").out
	again := ref
	again.UID = "uid-2"
	newer := events.New(events.ManagerAggregate(again), events.SourceIntake, "c", ms(5),
		events.UpgradeRequested{Namespace: again.Namespace, Name: again.Name, UID: again.UID, DataEngine: "v2"})
	got, history, n := report.Latest(append(old, newer...))
	assert.Equal(t, again, got)
	assert.Equal(t, newer, history)
	assert.Equal(t, 2, n)

	_, history, n = report.Latest(nil)
	assert.Empty(t, history)
	assert.Zero(t, n)
}
