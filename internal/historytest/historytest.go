// Package historytest writes whole upgrade histories straight into a
// stream, for tests and benchmarks that need many of them fast: the events
// an upgrade's controller and worker would have appended, published without
// the aggregates' concurrency checks.
package historytest

import (
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchback-dev/switchback/events"
)

// At is the time every event of these histories carries.
var At = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// Completed returns the events of one upgrade of ref that ran to the end on
// node with volumes volumes: the manager's request, precheck, plan and the
// node's scheduling; the node upgrade (Node); the manager's record of it and
// its completion.
func Completed(ref events.ManagerRef, node string, volumes int) []events.Envelope {
	out := events.New(events.ManagerAggregate(ref), events.SourceController, "request", At,
		events.UpgradeRequested{Namespace: ref.Namespace, Name: ref.Name, UID: ref.UID, Generation: 1, DataEngine: "v2", Nodes: []string{node}},
		events.PrecheckPassed{Check: "DefaultImageOnAllNodesReady", Reason: "Ready", Message: "ready"},
		events.UpgradePlanned{InstanceManagerImage: "im:2", Nodes: []string{node}},
		events.NodeScheduled{Node: node, Attempt: 1})
	out = append(out, Node(ref, node, volumes, true)...)
	return append(out, events.New(events.ManagerAggregate(ref), events.SourceController, "finish", At,
		events.NodeFinished{Node: node, State: events.NodeCompleted},
		events.UpgradeCompleted{})...)
}

// Node returns the events of one node upgrade of ref: its start, every step
// up to finalizing with each of volumes volumes walking its states at the
// steps that move it (pending once the upgrade begins, its target over to
// another node and back, completed before finalizing) and, when completed,
// its completion.
func Node(ref events.ManagerRef, node string, volumes int, completed bool) []events.Envelope {
	data := []events.Event{events.NodeUpgradeStarted{Node: node, DataEngine: "v2", InstanceManagerImage: "im:2", Attempt: 1}}
	moves := map[events.NodeState][][2]events.VolumeState{
		events.NodeInitializing:  {{"", events.VolumePending}},
		events.NodeSwitchingOver: {{events.VolumePending, events.VolumeSwitchingOver}, {events.VolumeSwitchingOver, events.VolumeSwitchedOver}},
		events.NodeSwitchingBack: {{events.VolumeSwitchedOver, events.VolumeSwitchingBack}, {events.VolumeSwitchingBack, events.VolumeSwitchedBack}},
		events.NodeFinalizing:    {{events.VolumeSwitchedBack, events.VolumeCompleted}},
	}
	for _, st := range events.NodeSteps {
		next, ok := st.Next()
		if !ok || next == events.NodeCompleted {
			continue
		}
		data = append(data, events.NodeStateChanged{From: st, To: next})
		for _, m := range moves[next] {
			for v := range volumes {
				change := events.VolumeStateChanged{Volume: fmt.Sprintf("pvc-%d", v), From: m[0], To: m[1]}
				if m[1] == events.VolumeSwitchingOver {
					change.TargetNode = "elsewhere"
				}
				data = append(data, change)
			}
		}
	}
	if completed {
		data = append(data, events.NodeUpgradeCompleted{})
	}
	return events.New(events.NodeAggregate(ref, node), events.SourceWorker, "node", At, data...)
}

// Publish publishes envs asynchronously, each under the Nats-Msg-Id
// idPrefix and its index, and waits for every acknowledgement.
func Publish(tb testing.TB, js jetstream.JetStream, idPrefix string, envs []events.Envelope) {
	tb.Helper()
	futs := make([]jetstream.PubAckFuture, 0, 1000)
	wait := func() {
		<-js.PublishAsyncComplete()
		for _, f := range futs {
			select {
			case err := <-f.Err():
				tb.Fatalf("publish %s: %v", f.Msg().Subject, err)
			default:
			}
		}
		futs = futs[:0]
	}
	for i, env := range envs {
		m, err := events.Encode(env)
		if err != nil {
			tb.Fatal(err)
		}
		m.Header.Set(events.MsgIDHeader, fmt.Sprintf("%s-%d", idPrefix, i))
		f, err := js.PublishMsgAsync(m)
		if err != nil {
			tb.Fatal(err)
		}
		// Stay well under the client's limit of outstanding asynchronous
		// publishes: on a loaded machine the acks lag, and the client
		// refuses more once it stalls.
		if futs = append(futs, f); len(futs) == cap(futs) {
			wait()
		}
	}
	wait()
}
