package nodeupgrade

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/events"
)

var cmdStart = Start{ID: "start", Node: node, DataEngine: "v2", InstanceManagerImage: image, Attempt: 1}

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
		"complete-step":       CompleteStep{ID: "step", From: step},
		"complete-pending":    CompleteStep{ID: "step-pending", From: events.NodePending},
		"complete-finalizing": CompleteStep{ID: "step-final", From: events.NodeFinalizing},
		"volume":              SetVolumeState{ID: "vol", Volume: "vol-new", To: events.VolumePending},
		"stall":               ReportStall{ID: "stall", Volume: "vol-a", Reason: "TargetMoveBlocked", Message: "vol-a: no ready node for its target"},
		"progress":            ReportProgress{ID: "progress", Message: "moving again"},
		"fail":                Fail{ID: "fail", Reason: "InstanceManagerNotRunning", Message: "im did not start"},
		"cancel":              RequestCancel{ID: "cancel", Reason: "manager deleted"},
		"confirm":             ConfirmCancelled{ID: "confirm"},
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

type outcome struct {
	types []events.Type
	err   error
}

func emits(ts ...events.Type) outcome { return outcome{types: ts} }

var (
	none      = outcome{}
	refused   = outcome{err: ErrIllegalCommand}
	conflict  = outcome{err: ErrConflict}
	notFound  = outcome{err: ErrNotFound}
	notReady  = outcome{err: ErrVolumesNotReady}
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

// decisions is the command matrix: every command kind in every fixture.
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

func TestDecideCommandMatrix(t *testing.T) {
	for _, f := range fixtures() {
		s := fold(t, f.history...)
		want, ok := decisions[f.name]
		require.True(t, ok, "fixture %s missing from matrix", f.name)
		cmds := canonicalCommands(s)
		require.Len(t, want, len(cmds), "fixture %s: every command kind needs an expectation", f.name)
		for kind, cmd := range cmds {
			t.Run(f.name+"/"+kind, func(t *testing.T) {
				exp, ok := want[kind]
				require.True(t, ok)
				before := cloneState(s)
				evs, err := Decide(s, cmd)
				require.Equal(t, before, s, "Decide modified its input")
				if exp.err != nil {
					requireCommandError(t, err, exp.err)
					require.Nil(t, evs)
					require.Contains(t, err.Error(), s.stateName())
					return
				}
				require.NoError(t, err)
				require.Equal(t, exp.types, types(evs))
				h := &harness{t: t, s: s, now: t0}
				h.do(cmd)
			})
		}
	}
}

func TestDecidePayloads(t *testing.T) {
	t.Run("complete step while stalled resumes first", func(t *testing.T) {
		s := fold(t, append(upTo(events.NodeFailingReplicas), stallReplicas)...)
		evs, err := Decide(s, CompleteStep{ID: "c", From: events.NodeFailingReplicas, Message: "replicas removed"})
		require.NoError(t, err)
		require.Equal(t, []events.Event{
			events.NodeResumed{Step: events.NodeFailingReplicas, Message: "step completed"},
			events.NodeStateChanged{From: events.NodeFailingReplicas, To: events.NodeSwitchingOver, Message: "replicas removed"},
		}, evs)
	})
	t.Run("volume change carries from, target and message", func(t *testing.T) {
		s := fold(t, upTo(events.NodeFailingReplicas)...)
		evs, err := Decide(s, SetVolumeState{ID: "v", Volume: "vol-a", To: events.VolumeSwitchingOver, TargetNode: "node-2", Message: "moving target"})
		require.NoError(t, err)
		require.Equal(t, []events.Event{events.VolumeStateChanged{
			Volume: "vol-a", From: events.VolumePending, To: events.VolumeSwitchingOver, TargetNode: "node-2", Message: "moving target",
		}}, evs)
	})
	t.Run("stall defaults to the current step", func(t *testing.T) {
		s := fold(t, upTo(events.NodeSwitchingOver)...)
		evs, err := Decide(s, ReportStall{ID: "s", Volume: "vol-a", Reason: "R", Message: "m"})
		require.NoError(t, err)
		require.Equal(t, []events.Event{events.NodeStalled{Step: events.NodeSwitchingOver, Volume: "vol-a", Reason: "R", Message: "m"}}, evs)
	})
	t.Run("a changed stall is recorded again", func(t *testing.T) {
		s := fold(t, append(upTo(events.NodeFailingReplicas), stallReplicas)...)
		evs, err := Decide(s, ReportStall{ID: "s", Reason: stallReplicas.Reason, Message: "replica vol-a-r-1 still running after 10m"})
		require.NoError(t, err)
		require.Len(t, evs, 1)
		evs, err = Decide(s, ReportStall{ID: "s", Reason: stallReplicas.Reason, Message: stallReplicas.Message})
		require.NoError(t, err)
		require.Empty(t, evs)
	})
	t.Run("stale reports decide nothing", func(t *testing.T) {
		s := fold(t, append(upTo(events.NodeSwitchingOver), stallReplicasAt(events.NodeSwitchingOver))...)
		for _, cmd := range []Command{
			CompleteStep{ID: "c", From: events.NodeInitializing},
			ReportStall{ID: "s", Step: events.NodeFailingReplicas, Reason: "R", Message: "m"},
			ReportProgress{ID: "p", Step: events.NodeFailingReplicas},
		} {
			evs, err := Decide(s, cmd)
			require.NoError(t, err)
			require.Empty(t, evs, "%T", cmd)
		}
	})
	t.Run("confirm cancelled at the current step", func(t *testing.T) {
		s := fold(t, append(upTo(events.NodeFailingReplicas), events.NodeCancelRequested{})...)
		evs, err := Decide(s, ConfirmCancelled{ID: "c"})
		require.NoError(t, err)
		require.Equal(t, []events.Event{events.NodeUpgradeCancelled{
			Step: events.NodeFailingReplicas, Message: "node upgrade cancelled at failing-replicas; every target is on its own node",
		}}, evs)
	})
}

func TestDecideRefusals(t *testing.T) {
	started := []events.Event{evStarted}
	backAway := append(upTo(events.NodeUpgradingInstanceManager), evChanged(events.NodeUpgradingInstanceManager))
	cases := []struct {
		name    string
		history []events.Event
		cmd     Command
		kind    error
		reason  string
	}{
		{"nil command", started, nil, nil, "no command"},
		{"missing command id", started, ReportProgress{}, nil, "command id is required"},
		{"start without image", nil, Start{ID: "s", Node: node, DataEngine: "v2", Attempt: 1}, nil, "instanceManagerImage is required"},
		{"start attempt 0", nil, Start{ID: "s", Node: node, DataEngine: "v2", InstanceManagerImage: image}, nil, "attempt 0"},
		{"start another image", started, Start{ID: "s", Node: node, DataEngine: "v2", InstanceManagerImage: "im:other", Attempt: 1}, ErrConflict, "already started"},
		{"complete a terminal state", started, CompleteStep{ID: "c", From: events.NodeCompleted}, nil, "not a working step"},
		{"complete an unknown step", started, CompleteStep{ID: "c", From: "warming-up"}, nil, "not a working step"},
		{"complete a step not reached", started, CompleteStep{ID: "c", From: events.NodeSwitchingBack}, nil, "not reached yet"},
		{"leave switching-back with a target away", backAway, CompleteStep{ID: "c", From: events.NodeSwitchingBack}, ErrVolumesNotReady, "[vol-a]"},
		{"finish with a volume not completed", append(upTo(events.NodeRebuildingReplica), evChanged(events.NodeRebuildingReplica)),
			CompleteStep{ID: "c", From: events.NodeFinalizing}, ErrVolumesNotReady, "[vol-b]"},
		{"volume without name", started, SetVolumeState{ID: "v", To: events.VolumePending}, nil, "volume is required"},
		{"volume illegal move", upTo(events.NodeInitializing), SetVolumeState{ID: "v", Volume: "vol-a", To: events.VolumeSwitchedBack}, nil, "not allowed"},
		{"volume unknown state", started, SetVolumeState{ID: "v", Volume: "vol-a", To: "moving"}, nil, "not allowed"},
		{"volume same state other target", upTo(events.NodeSwitchingOver), SetVolumeState{ID: "v", Volume: "vol-a", To: events.VolumeSwitchedOver, TargetNode: "node-3"}, ErrConflict, "already switched-over"},
		{"stall at a step not reached", started, ReportStall{ID: "s", Step: events.NodeFinalizing, Reason: "R", Message: "m"}, nil, "not reached yet"},
		{"stall without reason", started, ReportStall{ID: "s", Message: "m"}, nil, "reason is required"},
		{"stall without message", started, ReportStall{ID: "s", Reason: "R"}, nil, "message is required"},
		{"progress at a step not reached", started, ReportProgress{ID: "p", Step: events.NodeFinalizing}, nil, "not reached yet"},
		{"fail at another step", upTo(events.NodeSwitchingOver), Fail{ID: "f", Step: events.NodeFailingReplicas, Reason: "R", Message: "m"}, nil, "failure reported for step"},
		{"fail without message", started, Fail{ID: "f", Reason: "R"}, nil, "message is required"},
		{"confirm without cancel", started, ConfirmCancelled{ID: "c"}, nil, "no cancel was requested"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := fold(t, tc.history...)
			evs, err := Decide(s, tc.cmd)
			require.Nil(t, evs)
			if tc.cmd == nil {
				require.ErrorIs(t, err, ErrIllegalCommand)
			} else {
				requireCommandError(t, err, tc.kind)
			}
			require.Contains(t, err.Error(), tc.reason)
			if s.Exists {
				require.Contains(t, err.Error(), agg.String(), "error must name the aggregate")
			}
		})
	}
}
