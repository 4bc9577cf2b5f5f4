package nodeupgrade

import (
	"flag"
	"testing"

	"github.com/switchback-dev/switchback/aggregate"
	"github.com/switchback-dev/switchback/aggregate/internal/machinetest"
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
	w.h.Do(CompleteStep{Meta: aggregate.Meta{ID: "step-" + string(from)}, From: from, Message: msg})
}

func (w walker) vol(name string, to events.VolumeState, target, msg string) {
	w.h.Do(SetVolumeState{Meta: aggregate.Meta{ID: "vol-" + name + "-" + string(to)}, Volume: name, To: to, TargetNode: target, Message: msg})
}

func (w walker) toSwitchingOver() {
	w.h.Do(cmdStart)
	w.step(events.NodePending, "node is Ready")
	w.h.Do(RecordScheduling{Meta: aggregate.Meta{ID: "scheduling"}, AllowScheduling: true})
	w.vol("vol-a", events.VolumePending, node, "attached; snapshot taken")
	w.vol("vol-b", events.VolumePending, "", "detached")
	w.h.Do(RecordSnapshots{Meta: aggregate.Meta{ID: "snapshots"}, Snapshot: "switchback-upgrade-v2", Volumes: []string{"vol-a"}})
	w.step(events.NodeInitializing, "replica scheduling turned off on the node; volumes recorded and snapshotted")
	w.step(events.NodeFailingReplicas, "the node's replicas of attached v2 volumes failed and stopped")
}

func (w walker) switchOver() {
	w.vol("vol-a", events.VolumeSwitchingOver, "node-2", "moving target to node-2")
	w.vol("vol-a", events.VolumeSwitchedOver, "node-2", "target runs on node-2")
}

func (w walker) switchBack() {
	w.h.Do(ConfirmSchedulingRestored{Meta: aggregate.Meta{ID: "scheduling-restored"}})
	w.vol("vol-a", events.VolumeSwitchingBack, node, "moving target back")
	w.vol("vol-a", events.VolumeSwitchedBack, node, "target runs on "+node)
}

func (w walker) fromUpgradingToEnd() {
	w.step(events.NodeUpgradingInstanceManager, "instance manager runs "+image)
	w.switchBack()
	w.step(events.NodeSwitchingBack, "replica scheduling restored; every moved target is back where it was")
	w.step(events.NodeRebuildingReplica, "volumes are healthy again")
	w.vol("vol-a", events.VolumeCompleted, "", "volume done")
	w.h.Do(ConfirmSnapshotsRemoved{Meta: aggregate.Meta{ID: "snapshots-removed"}})
	w.vol("vol-b", events.VolumeCompleted, "", "volume done")
	w.step(events.NodeFinalizing, "node upgrade completed")
}

var scenarios = []machinetest.Scenario[State, Command]{
	{Name: "complete", Run: func(h *harness) {
		w := walker{h}
		w.toSwitchingOver()
		w.switchOver()
		w.step(events.NodeSwitchingOver, "every attached target moved")
		w.fromUpgradingToEnd()
	}},
	{Name: "stalled-then-resumed", Run: func(h *harness) {
		w := walker{h}
		w.toSwitchingOver()
		w.vol("vol-a", events.VolumeSwitchingOver, "node-2", "moving target to node-2")
		stall := ReportStall{Meta: aggregate.Meta{ID: "stall-1"}, Volume: "vol-a", Reason: "TargetNotReady", Message: "vol-a: new target on node-2 is not ready"}
		w.h.Do(stall)
		w.h.Do(ReportStall{Meta: aggregate.Meta{ID: "stall-2"}, Volume: "vol-a", Reason: "TargetNotReady", Message: stall.Message}) // same stall: no event
		w.h.Do(ReportStall{Meta: aggregate.Meta{ID: "stall-3"}, Volume: "vol-a", Reason: "TargetNotReady", Message: "vol-a: new target on node-2 is not ready after 10m"})
		w.h.Do(ReportProgress{Meta: aggregate.Meta{ID: "progress"}, Message: "node-2 is Ready again"})
		w.vol("vol-a", events.VolumeSwitchedOver, "node-2", "target runs on node-2")
		w.step(events.NodeSwitchingOver, "every attached target moved")
		w.fromUpgradingToEnd()
	}},
	{Name: "cancel-mid-node", Run: func(h *harness) {
		w := walker{h}
		w.toSwitchingOver()
		w.switchOver()
		w.h.Do(RequestCancel{Meta: aggregate.Meta{ID: "cancel"}, Reason: "DataEngineUpgradeManager deleted"})
		w.switchBack()
		w.h.Do(ConfirmCancelled{Meta: aggregate.Meta{ID: "confirm-cancel"}})
	}},
	{Name: "node-error", Run: func(h *harness) {
		w := walker{h}
		w.toSwitchingOver()
		w.switchOver()
		w.step(events.NodeSwitchingOver, "every attached target moved")
		w.h.Do(ReportStall{Meta: aggregate.Meta{ID: "stall-im"}, Reason: "InstanceManagerNotRunning", Message: "instance manager with image " + image + " is starting for 5m"})
		w.h.Do(Fail{Meta: aggregate.Meta{ID: "fail-im"}, Reason: "InstanceManagerNotRunning", Message: "instance manager with image " + image + " did not start within 10m"})
	}},
}

func TestRecordedHistoriesMatchDecide(t *testing.T) {
	machinetest.RecordedHistoriesMatchDecide(t, machine, scenarios, *record)
}

func TestGoldenReplay(t *testing.T) {
	machinetest.GoldenReplay(t, machine, len(scenarios), *update)
}
