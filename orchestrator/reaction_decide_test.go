package orchestrator

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/switchback-dev/switchback/aggregate/manager"
	"github.com/switchback-dev/switchback/aggregate/nodeupgrade"
	"github.com/switchback-dev/switchback/events"
)

// TestReact: the orchestrator's reaction to every event it reacts to, from
// what it read, as the effects it applies in order.
func TestReact(t *testing.T) {
	ref := events.ManagerRef{Namespace: "ns", Name: "m", UID: "uid"}
	ev := func(node string, data events.Event) events.Envelope {
		agg := events.ManagerAggregate(ref)
		if node != "" {
			agg = events.NodeAggregate(ref, node)
		}
		return events.New(agg, events.SourceController, "c", time.Unix(0, 0), data)[0]
	}
	planned := manager.State{Exists: true, Ref: ref, State: events.ManagerUpgrading, Plan: []string{"n1", "n2"},
		UpgradingNode: "n1", Nodes: map[string]manager.NodeStatus{"n1": {State: events.NodePending, Attempt: 2}}}
	lastNode := planned
	lastNode.Plan = []string{"n1"}
	cancelling := planned
	cancelling.CancelRequested = true
	failed := planned
	failed.State = events.ManagerError
	done := manager.State{Exists: true, Ref: ref, State: events.ManagerCompleted}
	moving := planned
	moving.InitiatorPolicy = events.InitiatorPolicyMoveWorkloads
	movingCancelled := moving
	movingCancelled.CancelRequested = true
	movingDone := done
	movingDone.InitiatorPolicy, movingDone.Plan = events.InitiatorPolicyMoveWorkloads, []string{"n1", "n2"}
	adding := planned
	adding.ReplicaPolicy = events.ReplicaPolicyAddFirst
	addingLast, addingCancelling, addingDone := adding, adding, done
	addingLast.Plan = []string{"n1"}
	addingCancelling.CancelRequested = true
	addingDone.ReplicaPolicy = events.ReplicaPolicyAddFirst
	running := nodeupgrade.State{Exists: true, State: events.NodeSwitchingOver, Attempt: 2}
	ended := nodeupgrade.State{Exists: true, State: events.NodeCompleted, Attempt: 2}
	for _, tc := range []struct {
		name string
		e    events.Envelope
		r    reading
		want []string
	}{
		{"a request runs the prechecks", ev("", events.UpgradeRequested{}), reading{manager: manager.State{Exists: true, Ref: ref}}, []string{"prechecks"}},
		{"a request already planned: nothing", ev("", events.UpgradeRequested{}), reading{manager: planned}, nil},
		{"a request being cancelled: nothing", ev("", events.UpgradeRequested{}), reading{manager: cancelling}, nil},
		{"a plan: the gate, then the first node", ev("", events.UpgradePlanned{}), reading{manager: planned}, []string{"gate", "manager manager.ScheduleNext"}},
		{"a release: the next node", ev("", events.UpgradeReleased{}), reading{}, []string{"manager manager.ScheduleNext"}},
		{"a node scheduled: its start command", ev("", events.NodeScheduled{Node: "n1", Attempt: 2}), reading{manager: planned},
			[]string{"publish n1 attempt 2 pending (start)"}},
		{"a superseded schedule: nothing", ev("", events.NodeScheduled{Node: "n1", Attempt: 1}), reading{manager: planned}, nil},
		{"a step: the next step's command", ev("n1", events.NodeStateChanged{From: events.NodeInitializing, To: events.NodeFailingReplicas}),
			reading{manager: planned}, []string{"publish n1 attempt 2 failing-replicas (step)"}},
		{"a cancel with a node in flight: the node is cancelled", ev("", events.CancelRequested{}), reading{manager: cancelling}, []string{"cancel n1"}},
		{"a cancel of an ended upgrade: nothing", ev("", events.CancelRequested{}), reading{manager: done}, nil},
		{"a failure with a node mid-step: the node is cancelled", ev("", events.UpgradeFailed{}), reading{manager: failed, node: running}, []string{"cancel n1"}},
		{"a failure with the node ended: nothing", ev("", events.UpgradeFailed{}), reading{manager: failed, node: ended}, nil},
		{"a node started after the manager stopped: cancelled", ev("n2", events.NodeUpgradeStarted{}), reading{manager: cancelling}, []string{"cancel n2"}},
		{"a node started: nothing (its worker runs on)", ev("n1", events.NodeUpgradeStarted{}), reading{manager: planned}, nil},
		{"a node's cancel request: its worker is woken", ev("n1", events.NodeCancelRequested{}), reading{manager: cancelling, node: running},
			[]string{"publish n1 attempt 2 switching-over (cancel)"}},
		{"a node's cancel request, the node ended: nothing", ev("n1", events.NodeCancelRequested{}), reading{manager: cancelling, node: ended}, nil},
		{"a node completed with more to come: the gate, then the outcome", ev("n1", events.NodeUpgradeCompleted{}), reading{manager: planned},
			[]string{"gate (advisory)", "manager manager.RecordNodeOutcome"}},
		{"the last node completed: the snapshots removed, then the outcome", ev("n1", events.NodeUpgradeCompleted{}), reading{manager: lastNode}, []string{"remove snapshots", "manager manager.RecordNodeOutcome"}},
		{"a node failed: the outcome", ev("n1", events.NodeUpgradeFailed{Step: events.NodeSwitchingOver}), reading{}, []string{"manager manager.RecordNodeOutcome"}},
		{"a node cancelled: confirmed", ev("n1", events.NodeUpgradeCancelled{}), reading{manager: cancelling}, []string{"manager manager.ConfirmCancelled"}},
		{"a node cancelled after the end: nothing", ev("n1", events.NodeUpgradeCancelled{}), reading{manager: done}, nil},
		{"add-first, the last node completed: the replicas restored, the snapshots removed, then the outcome", ev("n1", events.NodeUpgradeCompleted{}),
			reading{manager: addingLast}, []string{"restore replicas", "remove snapshots", "manager manager.RecordNodeOutcome"}},
		{"add-first, a node failed: the replicas restored, then the outcome", ev("n1", events.NodeUpgradeFailed{Step: events.NodeSwitchingOver}),
			reading{manager: adding}, []string{"restore replicas", "manager manager.RecordNodeOutcome"}},
		{"add-first, a node cancelled: the replicas restored, then confirmed", ev("n1", events.NodeUpgradeCancelled{}),
			reading{manager: addingCancelling}, []string{"restore replicas", "manager manager.ConfirmCancelled"}},
		{"add-first, cancelled before a node started: the replicas restored", ev("", events.UpgradeCancelled{}), reading{manager: addingDone}, []string{"restore replicas"}},
		{"rebuild, cancelled: nothing", ev("", events.UpgradeCancelled{}), reading{manager: done}, nil},
		{"a temporary replica asked for: the raise", ev("n1", events.TemporaryReplicaRequested{Volume: "v"}), reading{manager: adding, node: running}, []string{"raise replicas"}},
		{"a temporary replica asked for by an ended node: nothing", ev("n1", events.TemporaryReplicaRequested{Volume: "v"}), reading{manager: adding, node: ended}, nil},
		{"a volume change: nothing", ev("n1", events.VolumeStateChanged{Volume: "v"}), reading{manager: planned}, nil},
		{"a volume switching over: its record of the target away", ev("n1", events.VolumeStateChanged{Volume: "v", To: events.VolumeSwitchingOver}),
			reading{node: running}, []string{"record target away"}},
		{"a volume switched back: its record of the target away", ev("n1", events.VolumeStateChanged{Volume: "v", To: events.VolumeSwitchedBack}),
			reading{node: running}, []string{"record target away"}},
		{"a volume switched over: nothing (the record is the switching-over's)", ev("n1", events.VolumeStateChanged{Volume: "v", To: events.VolumeSwitchedOver}),
			reading{node: running}, nil},
		{"a plan that moves workloads: every planned node marked first", ev("", events.UpgradePlanned{}), reading{manager: moving},
			[]string{"mark planned nodes", "gate", "manager manager.ScheduleNext"}},
		{"a node's outcome, moving workloads: its mark", ev("", events.NodeFinished{Node: "n1", State: events.NodeCompleted}), reading{manager: moving},
			[]string{"mark n1"}},
		{"a node completed, moving workloads: unmarked before its outcome is recorded", ev("n1", events.NodeUpgradeCompleted{}), reading{manager: moving},
			[]string{"unmark n1", "gate (advisory)", "manager manager.RecordNodeOutcome"}},
		{"a node's outcome, waiting: nothing", ev("", events.NodeFinished{Node: "n1", State: events.NodeCompleted}), reading{manager: planned}, nil},
		{"a cancel, moving workloads: every mark, then the node", ev("", events.CancelRequested{}), reading{manager: movingCancelled},
			[]string{"mark planned nodes", "cancel n1"}},
		{"the end, moving workloads: every mark", ev("", events.UpgradeCompleted{}), reading{manager: movingDone}, []string{"mark planned nodes"}},
		{"a node's outcome after the cancel: every mark", ev("", events.NodeFinished{Node: "n1", State: events.NodeCompleted}),
			reading{manager: movingCancelled}, []string{"mark planned nodes"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, f := range react(tc.e, tc.r) {
				got = append(got, f.String())
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

// TestReadsOf: what the reaction reads: nothing where the event says it
// all, the cached plan on the hot path, the node where the decision needs
// its state.
func TestReadsOf(t *testing.T) {
	ref := events.ManagerRef{Namespace: "ns", Name: "m", UID: "uid"}
	e := func(data events.Event) events.Envelope {
		return events.New(events.NodeAggregate(ref, "n2"), events.SourceController, "c", time.Unix(0, 0), data)[0]
	}
	m := manager.State{UpgradingNode: "n1"}
	assert.Equal(t, reads{}, readsOf(e(events.NodeUpgradeFailed{})))
	assert.Equal(t, reads{plan: true}, readsOf(e(events.NodeStateChanged{})))
	assert.Equal(t, "n1", readsOf(e(events.UpgradeFailed{})).node(e(events.UpgradeFailed{}), m), "the node in flight")
	assert.Equal(t, "n2", readsOf(e(events.NodeCancelRequested{})).node(e(events.NodeCancelRequested{}), m), "the event's node")
	assert.True(t, readsOf(e(events.NodeUpgradeCompleted{})).manager)
	away := readsOf(e(events.VolumeStateChanged{To: events.VolumeSwitchingOver}))
	assert.False(t, away.manager, "a record of a target away needs only the node")
	assert.Equal(t, "n2", away.node(e(events.VolumeStateChanged{}), m), "the event's node")
}
