package nodeupgrade

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/aggregate"
	"github.com/switchback-dev/switchback/aggregate/internal/machinetest"
	"github.com/switchback-dev/switchback/events"
)

// TestDecideCommandMatrix decides every command kind (canonicalCommands) in
// every fixture and checks the outcome the matrix (decisions) expects.
func TestDecideCommandMatrix(t *testing.T) {
	machinetest.DecideMatrix(t, machine, fixtures(), canonicalCommands, decisions)
}

var cmdStart = Start{Meta: aggregate.Meta{ID: "start"}, Node: node, DataEngine: "v2", InstanceManagerImage: image, Attempt: 1}

// canonicalCommands returns, per command kind, the command most likely to be
// accepted in s.
func canonicalCommands(s State) map[string]Command {
	step := s.State
	if stepIndex(step) < 0 {
		step = events.NodePending
	}
	other := cmdStart
	other.ID, other.Attempt = "start-2", 2
	return map[string]Command{
		"start":               cmdStart,
		"start-other":         other,
		"complete-step":       CompleteStep{Meta: aggregate.Meta{ID: "step"}, From: step},
		"complete-pending":    CompleteStep{Meta: aggregate.Meta{ID: "step-pending"}, From: events.NodePending},
		"complete-finalizing": CompleteStep{Meta: aggregate.Meta{ID: "step-final"}, From: events.NodeFinalizing},
		"volume":              SetVolumeState{Meta: aggregate.Meta{ID: "vol"}, Volume: "vol-new", To: events.VolumePending},
		"stall":               ReportStall{Meta: aggregate.Meta{ID: "stall"}, Volume: "vol-a", Reason: "TargetMoveBlocked", Message: "vol-a: no ready node for its target"},
		"progress":            ReportProgress{Meta: aggregate.Meta{ID: "progress"}, Message: "moving again"},
		"fail":                Fail{Meta: aggregate.Meta{ID: "fail"}, Reason: "InstanceManagerNotRunning", Message: "im did not start"},
		"cancel":              RequestCancel{Meta: aggregate.Meta{ID: "cancel"}, Reason: "manager deleted"},
		"confirm":             ConfirmCancelled{Meta: aggregate.Meta{ID: "confirm"}},
	}
}

const (
	tStart   = events.TypeNodeUpgradeStarted
	tChanged = events.TypeNodeStateChanged
	tVol     = events.TypeVolumeStateChanged
	tStall   = events.TypeNodeStalled
	tResume  = events.TypeNodeResumed
	tDone    = events.TypeNodeUpgradeCompleted
	tFailed  = events.TypeNodeUpgradeFailed
	tCReq    = events.TypeNodeCancelRequested
	tCanc    = events.TypeNodeUpgradeCancelled
)

type outcome = machinetest.Outcome

var (
	emits                             = machinetest.Emits
	none, refused, conflict, notFound = machinetest.None, machinetest.Refused, machinetest.Conflict, machinetest.NotFound
	notReady                          = outcome{Err: ErrVolumesNotReady}
)

// terminalD is every command on a terminal node upgrade.
var (
	terminalD = map[string]outcome{
		"start": none, "start-other": conflict, "complete-step": none, "complete-pending": none,
		"complete-finalizing": none, "volume": none, "stall": none, "progress": none, "fail": none,
		"cancel": none, "confirm": none,
	}
)

// workingStep is the expectation for a step before finalizing with its
// volume work done; pastPending says whether CompleteStep{pending} is stale.
func workingStep(pastPending bool) map[string]outcome {
	o := map[string]outcome{
		"start": none, "start-other": conflict, "complete-step": emits(tChanged),
		"complete-pending": none, "complete-finalizing": refused, "volume": emits(tVol),
		"stall": emits(tStall), "progress": none, "fail": emits(tFailed), "cancel": emits(tCReq),
		"confirm": refused,
	}
	if !pastPending {
		o["complete-pending"] = emits(tChanged)
	}
	return o
}

func with(base map[string]outcome, over map[string]outcome) map[string]outcome {
	out := make(map[string]outcome, len(base))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		out[k] = v
	}
	return out
}

// decisions is the command matrix: every command kind in every fixture
// (TestDecideCommandMatrix).
var decisions = map[string]map[string]outcome{
	"absent": {
		"start": emits(tStart), "start-other": emits(tStart), "complete-step": notFound, "complete-pending": notFound,
		"complete-finalizing": notFound, "volume": notFound, "stall": notFound, "progress": notFound,
		"fail": notFound, "cancel": notFound, "confirm": notFound,
	},
	"pending":                    workingStep(false),
	"initializing":               workingStep(true),
	"failing-replicas":           workingStep(true),
	"switching-over":             workingStep(true),
	"upgrading-instance-manager": workingStep(true),
	"switching-back":             workingStep(true),
	"rebuilding-replica":         workingStep(true),
	"finalizing": with(workingStep(true), map[string]outcome{
		"complete-step": emits(tDone), "complete-finalizing": emits(tDone),
	}),
	"stalled": with(workingStep(true), map[string]outcome{
		"complete-step": emits(tResume, tChanged), "progress": emits(tResume),
	}),
	"target-in-transit": with(workingStep(true), map[string]outcome{"complete-step": notReady}),
	"cancel-target-away": with(workingStep(true), map[string]outcome{
		"cancel": none, "confirm": notReady,
	}),
	"cancel-safe": with(workingStep(true), map[string]outcome{
		"cancel": none, "confirm": emits(tCanc),
	}),
	"completed": terminalD,
	"error":     terminalD,
	"cancelled": terminalD,
}

func TestDecidePayloads(t *testing.T) {
	t.Run("complete step while stalled resumes first", func(t *testing.T) {
		s := fold(t, append(upTo(events.NodeFailingReplicas), stallReplicas)...)
		evs, err := Decide(s, CompleteStep{Meta: aggregate.Meta{ID: "c"}, From: events.NodeFailingReplicas, Message: "replicas removed"})
		require.NoError(t, err)
		require.Equal(t, []events.Event{
			events.NodeResumed{Step: events.NodeFailingReplicas, Message: "step completed"},
			events.NodeStateChanged{From: events.NodeFailingReplicas, To: events.NodeSwitchingOver, Message: "replicas removed"},
		}, evs)
	})
	t.Run("volume change carries from, target and message", func(t *testing.T) {
		s := fold(t, upTo(events.NodeFailingReplicas)...)
		evs, err := Decide(s, SetVolumeState{Meta: aggregate.Meta{ID: "v"}, Volume: "vol-a", To: events.VolumeSwitchingOver, TargetNode: "node-2", Message: "moving target"})
		require.NoError(t, err)
		require.Equal(t, []events.Event{events.VolumeStateChanged{
			Volume: "vol-a", From: events.VolumePending, To: events.VolumeSwitchingOver, TargetNode: "node-2", Message: "moving target",
		}}, evs)
	})
	t.Run("a redirect keeps the volume switching over, with its new target only", func(t *testing.T) {
		s := fold(t, append(upTo(events.NodeFailingReplicas), evVolume("vol-a", events.VolumePending, events.VolumeSwitchingOver, "node-2"))...)
		redirect := SetVolumeState{Meta: aggregate.Meta{ID: "r"}, Volume: "vol-a", To: events.VolumeSwitchingOver, RedirectFrom: "node-2", TargetNode: "node-3", Message: "node-2 lost its IM"}
		evs, err := Decide(s, redirect)
		require.NoError(t, err)
		require.Equal(t, []events.Event{events.VolumeStateChanged{
			Volume: "vol-a", From: events.VolumeSwitchingOver, To: events.VolumeSwitchingOver, TargetNode: "node-3", Message: "node-2 lost its IM",
		}}, evs)
		s = fold(t, append(append(upTo(events.NodeFailingReplicas), evVolume("vol-a", events.VolumePending, events.VolumeSwitchingOver, "node-2")), evs...)...)
		assert.Equal(t, Volume{State: events.VolumeSwitchingOver, TargetNode: "node-3", Message: "node-2 lost its IM"}, s.Volumes["vol-a"])
		evs, err = Decide(s, redirect)
		require.NoError(t, err)
		assert.Empty(t, evs, "redelivered once done")
	})
	t.Run("stall defaults to the current step", func(t *testing.T) {
		s := fold(t, upTo(events.NodeSwitchingOver)...)
		evs, err := Decide(s, ReportStall{Meta: aggregate.Meta{ID: "s"}, Volume: "vol-a", Reason: "R", Message: "m"})
		require.NoError(t, err)
		require.Equal(t, []events.Event{events.NodeStalled{Step: events.NodeSwitchingOver, Volume: "vol-a", Reason: "R", Message: "m"}}, evs)
	})
	t.Run("a changed stall is recorded again", func(t *testing.T) {
		s := fold(t, append(upTo(events.NodeFailingReplicas), stallReplicas)...)
		evs, err := Decide(s, ReportStall{Meta: aggregate.Meta{ID: "s"}, Reason: stallReplicas.Reason, Message: "replica vol-a-r-1 still running after 10m"})
		require.NoError(t, err)
		require.Len(t, evs, 1)
		evs, err = Decide(s, ReportStall{Meta: aggregate.Meta{ID: "s"}, Reason: stallReplicas.Reason, Message: stallReplicas.Message})
		require.NoError(t, err)
		require.Empty(t, evs)
	})
	t.Run("stale reports decide nothing", func(t *testing.T) {
		s := fold(t, append(upTo(events.NodeSwitchingOver), stallReplicasAt(events.NodeSwitchingOver))...)
		for _, cmd := range []Command{
			CompleteStep{Meta: aggregate.Meta{ID: "c"}, From: events.NodeInitializing},
			ReportStall{Meta: aggregate.Meta{ID: "s"}, Step: events.NodeFailingReplicas, Reason: "R", Message: "m"},
			ReportProgress{Meta: aggregate.Meta{ID: "p"}, Step: events.NodeFailingReplicas},
		} {
			evs, err := Decide(s, cmd)
			require.NoError(t, err)
			require.Empty(t, evs, "%T", cmd)
		}
	})
	t.Run("confirm cancelled at the current step", func(t *testing.T) {
		s := fold(t, append(upTo(events.NodeFailingReplicas), events.NodeCancelRequested{})...)
		evs, err := Decide(s, ConfirmCancelled{Meta: aggregate.Meta{ID: "c"}})
		require.NoError(t, err)
		require.Equal(t, []events.Event{events.NodeUpgradeCancelled{
			Step: events.NodeFailingReplicas, Message: "node upgrade cancelled at failing-replicas; every target is on its own node",
		}}, evs)
	})
}

func TestDecideRefusals(t *testing.T) {
	started := []events.Event{evStarted}
	backAway := append(upTo(events.NodeUpgradingInstanceManager), evChanged(events.NodeUpgradingInstanceManager))
	cases := []machinetest.CommandRefusal[Command]{
		{Name: "nil command", History: started, Cmd: nil, Kind: nil, Reason: "no command"},
		{Name: "missing command id", History: started, Cmd: ReportProgress{}, Kind: nil, Reason: "command id is required"},
		{Name: "start without image", History: nil, Cmd: Start{Meta: aggregate.Meta{ID: "s"}, Node: node, DataEngine: "v2", Attempt: 1}, Kind: nil, Reason: "instanceManagerImage is required"},
		{Name: "start attempt 0", History: nil, Cmd: Start{Meta: aggregate.Meta{ID: "s"}, Node: node, DataEngine: "v2", InstanceManagerImage: image}, Kind: nil, Reason: "attempt 0"},
		{Name: "start another image", History: started, Cmd: Start{Meta: aggregate.Meta{ID: "s"}, Node: node, DataEngine: "v2", InstanceManagerImage: "im:other", Attempt: 1}, Kind: ErrConflict, Reason: "already started"},
		{Name: "complete a terminal state", History: started, Cmd: CompleteStep{Meta: aggregate.Meta{ID: "c"}, From: events.NodeCompleted}, Kind: nil, Reason: "not a working step"},
		{Name: "complete an unknown step", History: started, Cmd: CompleteStep{Meta: aggregate.Meta{ID: "c"}, From: "warming-up"}, Kind: nil, Reason: "not a working step"},
		{Name: "complete a step not reached", History: started, Cmd: CompleteStep{Meta: aggregate.Meta{ID: "c"}, From: events.NodeSwitchingBack}, Kind: nil, Reason: "not reached yet"},
		{Name: "leave switching-back with a target away", History: backAway, Cmd: CompleteStep{Meta: aggregate.Meta{ID: "c"}, From: events.NodeSwitchingBack}, Kind: ErrVolumesNotReady, Reason: "[vol-a]"},
		{Name: "finish with a volume not completed", History: append(upTo(events.NodeRebuildingReplica), evChanged(events.NodeRebuildingReplica)),
			Cmd: CompleteStep{Meta: aggregate.Meta{ID: "c"}, From: events.NodeFinalizing}, Kind: ErrVolumesNotReady, Reason: "[vol-b]"},
		{Name: "volume without name", History: started, Cmd: SetVolumeState{Meta: aggregate.Meta{ID: "v"}, To: events.VolumePending}, Kind: nil, Reason: "volume is required"},
		{Name: "volume illegal move", History: upTo(events.NodeInitializing), Cmd: SetVolumeState{Meta: aggregate.Meta{ID: "v"}, Volume: "vol-a", To: events.VolumeSwitchedBack}, Kind: nil, Reason: "not allowed"},
		{Name: "volume unknown state", History: started, Cmd: SetVolumeState{Meta: aggregate.Meta{ID: "v"}, Volume: "vol-a", To: "moving"}, Kind: nil, Reason: "not allowed"},
		{Name: "volume same state other target", History: upTo(events.NodeSwitchingOver), Cmd: SetVolumeState{Meta: aggregate.Meta{ID: "v"}, Volume: "vol-a", To: events.VolumeSwitchedOver, TargetNode: "node-3"}, Kind: ErrConflict, Reason: "already switched-over"},
		{Name: "redirect of a volume not switching over", History: upTo(events.NodeSwitchingOver),
			Cmd: SetVolumeState{Meta: aggregate.Meta{ID: "r"}, Volume: "vol-a", To: events.VolumeSwitchingOver, RedirectFrom: "node-2", TargetNode: "node-3"}, Kind: ErrConflict, Reason: "not switching over to"},
		{Name: "redirect from another target", History: append(upTo(events.NodeFailingReplicas), evVolume("vol-a", events.VolumePending, events.VolumeSwitchingOver, "node-4")),
			Cmd: SetVolumeState{Meta: aggregate.Meta{ID: "r"}, Volume: "vol-a", To: events.VolumeSwitchingOver, RedirectFrom: "node-2", TargetNode: "node-3"}, Kind: ErrConflict, Reason: `target on "node-4"`},
		{Name: "redirect to another state", History: upTo(events.NodeFailingReplicas),
			Cmd: SetVolumeState{Meta: aggregate.Meta{ID: "r"}, Volume: "vol-a", To: events.VolumeSwitchedOver, RedirectFrom: "node-2", TargetNode: "node-3"}, Kind: nil, Reason: "a redirect is a switch-over sent"},
		{Name: "redirect to the same target", History: upTo(events.NodeFailingReplicas),
			Cmd: SetVolumeState{Meta: aggregate.Meta{ID: "r"}, Volume: "vol-a", To: events.VolumeSwitchingOver, RedirectFrom: "node-2", TargetNode: "node-2"}, Kind: nil, Reason: "a redirect is a switch-over sent"},
		{Name: "stall at a step not reached", History: started, Cmd: ReportStall{Meta: aggregate.Meta{ID: "s"}, Step: events.NodeFinalizing, Reason: "R", Message: "m"}, Kind: nil, Reason: "not reached yet"},
		{Name: "stall without reason", History: started, Cmd: ReportStall{Meta: aggregate.Meta{ID: "s"}, Message: "m"}, Kind: nil, Reason: "reason is required"},
		{Name: "stall without message", History: started, Cmd: ReportStall{Meta: aggregate.Meta{ID: "s"}, Reason: "R"}, Kind: nil, Reason: "message is required"},
		{Name: "progress at a step not reached", History: started, Cmd: ReportProgress{Meta: aggregate.Meta{ID: "p"}, Step: events.NodeFinalizing}, Kind: nil, Reason: "not reached yet"},
		{Name: "fail at another step", History: upTo(events.NodeSwitchingOver), Cmd: Fail{Meta: aggregate.Meta{ID: "f"}, Step: events.NodeFailingReplicas, Reason: "R", Message: "m"}, Kind: nil, Reason: "failure reported for step"},
		{Name: "fail without message", History: started, Cmd: Fail{Meta: aggregate.Meta{ID: "f"}, Reason: "R"}, Kind: nil, Reason: "message is required"},
		{Name: "confirm without cancel", History: started, Cmd: ConfirmCancelled{Meta: aggregate.Meta{ID: "c"}}, Kind: nil, Reason: "no cancel was requested"},
	}
	machinetest.DecideRefusals(t, machine, agg.String(), cases)
}

// TestTaintAndMovedPods: the taint is recorded once and taken off once; a
// pod is recorded moved once per uid, so a redelivered record adds nothing
// while the same StatefulSet pod, recreated and moved again, is another
// move; what was recorded survives the fold.
func TestTaintAndMovedPods(t *testing.T) {
	key := "upgrade.switchback.io/moving-workloads"
	hist := upTo(events.NodeInitializing)
	s := fold(t, hist...)
	do := func(c Command) []events.Event {
		t.Helper()
		evs, err := Decide(s, c)
		require.NoError(t, err)
		hist = append(hist, evs...)
		s = fold(t, hist...)
		return evs
	}
	taint := RecordTaint{Meta: aggregate.Meta{ID: "taint"}, Key: key}
	assert.Equal(t, []events.Event{events.NodeTainted{Key: key}}, do(taint))
	assert.Empty(t, do(taint), "recorded once")
	assert.True(t, s.Taint.Pending())

	moved := RecordPodMoved{Meta: aggregate.Meta{ID: "move"}, Pod: "app/db-0", UID: "uid-1", Volumes: []string{"vol-a"}}
	assert.Equal(t, []events.Event{events.PodMoved{Pod: "app/db-0", UID: "uid-1", Volumes: []string{"vol-a"}}}, do(moved))
	assert.Empty(t, do(moved), "a redelivered record adds nothing")
	again := moved
	again.UID = "uid-2"
	assert.Len(t, do(again), 1, "the pod recreated under the same name and moved again")
	assert.True(t, s.HasMoved("app/db-0", "uid-1"))
	assert.Len(t, s.Moved, 2)

	untaint := ConfirmUntainted{Meta: aggregate.Meta{ID: "untaint"}}
	assert.Equal(t, []events.Event{events.NodeUntainted{Key: key}}, do(untaint))
	assert.Empty(t, do(untaint), "taken off once")
	assert.False(t, s.Taint.Pending())
	assert.Empty(t, do(taint), "a taint taken off is not recorded again")
}
