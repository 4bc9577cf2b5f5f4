// Package historytest writes whole upgrade histories straight into a
// stream, for tests and benchmarks that need many of them fast: the events
// an upgrade's controller and worker would have appended, published without
// the aggregates' concurrency checks.
package historytest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/events/fastcodec"
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
				data = append(data, volumeChange(node, fmt.Sprintf("pvc-%d", v), m[0], m[1]))
			}
		}
	}
	if completed {
		data = append(data, events.NodeUpgradeCompleted{})
	}
	return events.New(events.NodeAggregate(ref, node), events.SourceWorker, "node", At, data...)
}

// volumeChange is a volume's move from one state to the next as the node
// worker records it: its target's node and a message saying where the
// target is, and the engine node before a switch-over.
func volumeChange(node, volume string, from, to events.VolumeState) events.VolumeStateChanged {
	const away = "elsewhere"
	c := events.VolumeStateChanged{Volume: volume, From: from, To: to, TargetNode: node}
	switch to {
	case events.VolumePending:
		c.Message = "attached to " + node + ", target on " + node + ", 3/3 replicas healthy"
	case events.VolumeSwitchingOver:
		before := ""
		c.TargetNode, c.EngineNodeBefore = away, &before
		c.Message = "target moving to " + away + ": least loaded ready node"
	case events.VolumeSwitchedOver:
		c.TargetNode, c.Message = away, "target runs on "+away
	case events.VolumeSwitchingBack:
		c.Message = "target moving back to " + node
	case events.VolumeSwitchedBack:
		c.Message = "target back on " + node
	case events.VolumeCompleted:
		c.TargetNode, c.Message = "", "volume done"
	}
	return c
}

// Publish publishes envs asynchronously, each under the Nats-Msg-Id
// idPrefix and its index, and waits for every acknowledgement. Each carries
// what eventstore's Append stores with an event, the condition on its
// subject's last sequence (the one before it, 0 for the first): the
// sequences are predicted from the stream's last one, the publishes being
// in order, and a wrong prediction is refused by the server, failing tb.
func Publish(tb testing.TB, js jetstream.JetStream, idPrefix string, envs []events.Envelope) {
	tb.Helper()
	if len(envs) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	name, err := js.StreamNameBySubject(ctx, envs[0].Aggregate.Subject())
	if err != nil {
		tb.Fatal(err)
	}
	stream, err := js.Stream(ctx, name)
	if err != nil {
		tb.Fatal(err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	seq := info.State.LastSeq
	last := map[string]uint64{} // subject → its last sequence
	lastOf := func(subject string) uint64 {
		if s, ok := last[subject]; ok {
			return s
		}
		m, err := stream.GetLastMsgForSubject(ctx, subject)
		switch {
		case errors.Is(err, jetstream.ErrMsgNotFound):
			return 0
		case err != nil:
			tb.Fatal(err)
		}
		return m.Sequence
	}
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
		m, err := fastcodec.Encode(env)
		if err != nil {
			tb.Fatal(err)
		}
		m.Header.Set(events.MsgIDHeader, fmt.Sprintf("%s-%d", idPrefix, i))
		m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(lastOf(m.Subject), 10))
		seq++
		last[m.Subject] = seq
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
