// Package eventstest provides valid sample events of every catalogue type,
// for round-trip tests of anything that stores or transports events.
package eventstest

import (
	"fmt"
	"time"

	"github.com/switchback-dev/switchback/events"
)

// Samples returns one valid envelope of every catalogue type for manager m:
// manager events on m's aggregate, node events on node's, each with its own
// causing command.
func Samples(m events.ManagerRef, node string, at time.Time) []events.Envelope {
	mgr := events.ManagerAggregate(m)
	nodeAgg := events.NodeAggregate(m, node)
	list := []struct {
		agg events.AggregateID
		ev  events.Event
	}{
		{mgr, events.UpgradeRequested{Namespace: m.Namespace, Name: m.Name, UID: m.UID, Generation: 1, DataEngine: "v2", Nodes: []string{"n1", "n2"}}},
		{mgr, events.PrecheckPassed{Check: "NodesKnown", Reason: "AllNodesKnown", Message: "2 nodes"}},
		{mgr, events.PrecheckFailed{Check: "NoVersionDrift", Reason: "VersionDrift", Message: "n3 runs im:v1"}},
		{mgr, events.UpgradePlanned{InstanceManagerImage: "longhornio/longhorn-instance-manager:v1.12.1", Nodes: []string{"n1", "n2"},
			LonghornProfile: "v1.12", LonghornVersion: "v1.12.1"}},
		{mgr, events.NodeScheduled{Node: "n1", Attempt: 1}},
		{mgr, events.NodeFinished{Node: "n1", State: events.NodeCompleted}},
		{mgr, events.UpgradeCompleted{Message: "2 nodes upgraded"}},
		{mgr, events.UpgradeFailed{Reason: "NodeUpgradeFailed", Message: "n1: IM did not start", Node: "n1"}},
		{mgr, events.UpgradeHeld{Reason: "OtherUpgraderActive", Message: "Longhorn's own instance-manager upgrader would race this upgrade"}},
		{mgr, events.UpgradeReleased{Message: "Longhorn's own instance-manager upgrader is off and idle"}},
		{mgr, events.CancelRequested{Reason: "manager deleted"}},
		{mgr, events.UpgradeCancelled{Message: "safe point reached", Node: "n1"}},
		{nodeAgg, events.NodeUpgradeStarted{Node: node, DataEngine: "v2", InstanceManagerImage: "im:v2", Attempt: 1, LonghornProfile: "v1.12",
			InitiatorPolicy: events.InitiatorPolicyMoveWorkloads, ReplicaPolicy: events.ReplicaPolicyAddFirst}},
		{nodeAgg, events.NodeStateChanged{From: events.NodePending, To: events.NodeInitializing}},
		{nodeAgg, events.VolumeStateChanged{Volume: "pvc-1", From: events.VolumePending, To: events.VolumeSwitchingOver, TargetNode: "n2", EngineNodeBefore: new(string)}},
		{nodeAgg, events.NodeStalled{Step: events.NodeSwitchingOver, Volume: "pvc-1", Reason: "TargetNotMoved", Message: "pvc-1 still reports target on n1"}},
		{nodeAgg, events.NodeResumed{Step: events.NodeSwitchingOver}},
		{nodeAgg, events.NodeUpgradeCompleted{}},
		{nodeAgg, events.NodeUpgradeFailed{Step: events.NodeUpgradingInstanceManager, Reason: "InstanceManagerNotRunning", Message: "im-n1 crashlooping"}},
		{nodeAgg, events.NodeCancelRequested{Reason: "manager deleted"}},
		{nodeAgg, events.NodeUpgradeCancelled{Step: events.NodeSwitchingOver, Message: "targets moved back"}},
		{nodeAgg, events.SchedulingRecorded{AllowScheduling: true}},
		{nodeAgg, events.SchedulingRestored{AllowScheduling: true}},
		{nodeAgg, events.SnapshotsTaken{Snapshot: "switchback-uid-n1", Volumes: []string{"pvc-1"}}},
		{nodeAgg, events.SnapshotsRemoved{Snapshot: "switchback-uid-n1", Volumes: []string{"pvc-1"}}},
		{nodeAgg, events.NodeTainted{Key: "upgrade.switchback.io/moving-workloads"}},
		{nodeAgg, events.NodeUntainted{Key: "upgrade.switchback.io/moving-workloads"}},
		{nodeAgg, events.PodMoved{Pod: "app/web-1", Volumes: []string{"pvc-1"}}},
		{nodeAgg, events.HashingRequested{Volume: "pvc-1", Snapshot: "switchback-uid-n1", At: at.Truncate(time.Second), Deadline: at.Add(5 * time.Minute)}},
		{nodeAgg, events.RebuildPlanned{Volume: "pvc-1", Hashed: true, ExpectedBytes: 1 << 30, FullBytes: 100 << 30, HashedBytes: 99 << 30}},
		{nodeAgg, events.RebuildStarted{Volume: "pvc-1", Replica: "pvc-1-r-1", Node: node, Progress: 12, At: at}},
		{nodeAgg, events.RebuildFinished{Volume: "pvc-1", At: at.Add(time.Minute)}},
		{nodeAgg, events.TemporaryReplicaRequested{Volume: "pvc-1", NumberOfReplicas: 2, ReplicaAutoBalance: "ignored", DataLocality: "disabled",
			Replicas: []string{"pvc-1-r-1", "pvc-1-r-2"}, At: at, Deadline: at.Add(10 * time.Minute)}},
		{nodeAgg, events.ReplicaCountRaised{Volume: "pvc-1", NumberOfReplicas: 2, ReplicaAutoBalance: "ignored", DataLocality: "disabled", Raised: 3}},
		{nodeAgg, events.TemporaryReplicaAdded{Volume: "pvc-1", Replica: "pvc-1-r-3", Node: "n3"}},
		{nodeAgg, events.ReplicaCountRestored{Volume: "pvc-1", NumberOfReplicas: 2, Replica: "pvc-1-r-3"}},
	}
	out := make([]events.Envelope, len(list))
	for i, s := range list {
		out[i] = events.New(s.agg, events.SourceController, fmt.Sprintf("sample-%d", i), at, s.ev)[0]
	}
	return out
}

// SamplesByType is Samples keyed by each envelope's type.
func SamplesByType(m events.ManagerRef, node string, at time.Time) map[events.Type]events.Envelope {
	out := map[events.Type]events.Envelope{}
	for _, e := range Samples(m, node, at) {
		out[e.Type()] = e
	}
	return out
}
