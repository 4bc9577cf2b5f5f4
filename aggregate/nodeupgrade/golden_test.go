package nodeupgrade

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/aggregate/internal/history"
	"github.com/switchback-dev/switchback/events"
)

var (
	update = flag.Bool("update", false, "rewrite testdata/*.golden.json from the recorded histories")
	record = flag.Bool("record", false, "re-record testdata/*.history.json by running the scenarios")
)

// walker runs the normal course of a node upgrade as a worker would, one
// call per step; vol-a is attached with its target on the node, vol-b is
// detached.
type walker struct{ h *harness }

func (w walker) step(from events.NodeState, msg string) {
	w.h.do(CompleteStep{ID: "step-" + string(from), From: from, Message: msg})
}

func (w walker) vol(name string, to events.VolumeState, target, msg string) {
	w.h.do(SetVolumeState{ID: "vol-" + name + "-" + string(to), Volume: name, To: to, TargetNode: target, Message: msg})
}

func (w walker) toSwitchingOver() {
	w.h.do(cmdStart)
	w.step(events.NodePending, "node is Ready")
	w.h.do(RecordScheduling{ID: "scheduling", AllowScheduling: true})
	w.vol("vol-a", events.VolumePending, node, "attached; snapshot taken")
	w.vol("vol-b", events.VolumePending, "", "detached")
	w.h.do(RecordSnapshots{ID: "snapshots", Snapshot: "switchback-upgrade-v2", Volumes: []string{"vol-a"}})
	w.step(events.NodeInitializing, "replica scheduling turned off on the node; volumes recorded and snapshotted")
	w.step(events.NodeFailingReplicas, "the node's replicas of attached v2 volumes failed and stopped")
}

func (w walker) switchOver() {
	w.vol("vol-a", events.VolumeSwitchingOver, "node-2", "moving target to node-2")
	w.vol("vol-a", events.VolumeSwitchedOver, "node-2", "target runs on node-2")
}

func (w walker) switchBack() {
	w.h.do(ConfirmSchedulingRestored{ID: "scheduling-restored"})
	w.vol("vol-a", events.VolumeSwitchingBack, node, "moving target back")
	w.vol("vol-a", events.VolumeSwitchedBack, node, "target runs on "+node)
}

func (w walker) fromUpgradingToEnd() {
	w.step(events.NodeUpgradingInstanceManager, "instance manager runs "+image)
	w.switchBack()
	w.step(events.NodeSwitchingBack, "replica scheduling restored; every moved target is back where it was")
	w.step(events.NodeRebuildingReplica, "volumes are healthy again")
	w.vol("vol-a", events.VolumeCompleted, "", "volume done")
	w.h.do(ConfirmSnapshotsRemoved{ID: "snapshots-removed"})
	w.vol("vol-b", events.VolumeCompleted, "", "volume done")
	w.step(events.NodeFinalizing, "node upgrade completed")
}

var scenarios = []struct {
	name string
	run  func(w walker)
}{
	{"complete", func(w walker) {
		w.toSwitchingOver()
		w.switchOver()
		w.step(events.NodeSwitchingOver, "every attached target moved")
		w.fromUpgradingToEnd()
	}},
	{"stalled-then-resumed", func(w walker) {
		w.toSwitchingOver()
		w.vol("vol-a", events.VolumeSwitchingOver, "node-2", "moving target to node-2")
		stall := ReportStall{ID: "stall-1", Volume: "vol-a", Reason: "TargetNotReady", Message: "vol-a: new target on node-2 is not ready"}
		w.h.do(stall)
		w.h.do(ReportStall{ID: "stall-2", Volume: "vol-a", Reason: "TargetNotReady", Message: stall.Message}) // same stall: no event
		w.h.do(ReportStall{ID: "stall-3", Volume: "vol-a", Reason: "TargetNotReady", Message: "vol-a: new target on node-2 is not ready after 10m"})
		w.h.do(ReportProgress{ID: "progress", Message: "node-2 is Ready again"})
		w.vol("vol-a", events.VolumeSwitchedOver, "node-2", "target runs on node-2")
		w.step(events.NodeSwitchingOver, "every attached target moved")
		w.fromUpgradingToEnd()
	}},
	{"cancel-mid-node", func(w walker) {
		w.toSwitchingOver()
		w.switchOver()
		w.h.do(RequestCancel{ID: "cancel", Reason: "DataEngineUpgradeManager deleted"})
		w.switchBack()
		w.h.do(ConfirmCancelled{ID: "confirm-cancel"})
	}},
	{"node-error", func(w walker) {
		w.toSwitchingOver()
		w.switchOver()
		w.step(events.NodeSwitchingOver, "every attached target moved")
		w.h.do(ReportStall{ID: "stall-im", Reason: "InstanceManagerNotRunning", Message: "instance manager with image " + image + " is starting for 5m"})
		w.h.do(Fail{ID: "fail-im", Reason: "InstanceManagerNotRunning", Message: "instance manager with image " + image + " did not start within 10m"})
	}},
}

func TestRecordedHistoriesMatchDecide(t *testing.T) {
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			h := newHarness(t)
			sc.run(walker{h})
			got, err := history.Marshal(h.history)
			require.NoError(t, err)
			path := filepath.Join("testdata", sc.name+".history.json")
			if *record {
				require.NoError(t, os.WriteFile(path, got, 0o644))
			}
			want, err := os.ReadFile(path)
			require.NoError(t, err, "run go test -record to create it")
			require.JSONEq(t, string(want), string(got), "Decide no longer produces the recorded history")
		})
	}
}

func TestGoldenReplay(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("testdata", "*.history.json"))
	require.NoError(t, err)
	require.Len(t, paths, len(scenarios))
	for _, path := range paths {
		name := strings.TrimSuffix(filepath.Base(path), ".history.json")
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(path)
			require.NoError(t, err)
			envs, err := history.Unmarshal(raw)
			require.NoError(t, err)
			s, err := Fold(State{}, envs...)
			require.NoError(t, err, "a recorded history must fold without refusals")
			got, err := json.MarshalIndent(s, "", "  ")
			require.NoError(t, err)
			got = append(got, '\n')
			golden := filepath.Join("testdata", name+".golden.json")
			if *update {
				require.NoError(t, os.WriteFile(golden, got, 0o644))
			}
			want, err := os.ReadFile(golden)
			require.NoError(t, err, "run go test -update to create it")
			require.JSONEq(t, string(want), string(got))
			var back State
			require.NoError(t, json.Unmarshal(want, &back))
			require.Equal(t, s, back, "the golden state must load back as the folded state (snapshots)")
		})
	}
}
