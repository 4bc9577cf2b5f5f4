package report_test

import (
	"fmt"
	"time"

	"github.com/switchback-dev/switchback/events"
)

var (
	ref = events.ManagerRef{Namespace: "longhorn-system", Name: "upgrade-v2", UID: "uid-1"}
	t0  = time.Date(2026, 11, 29, 18, 0, 0, 0, time.UTC)
)

// ms is t0 plus n milliseconds: the tests' clock.
func ms(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }

// hist builds a history event by event, numbering the sequences.
type hist struct {
	out []events.Envelope
}

func (h *hist) add(agg events.AggregateID, at int, d events.Event) *hist {
	e := events.New(agg, events.SourceController, fmt.Sprintf("cmd-%d", len(h.out)), ms(at), d)[0]
	e.Sequence = uint64(len(h.out) + 1)
	h.out = append(h.out, e)
	return h
}

func (h *hist) mgr(at int, d events.Event) *hist { return h.add(events.ManagerAggregate(ref), at, d) }

func (h *hist) node(node string, at int, d events.Event) *hist {
	return h.add(events.NodeAggregate(ref, node), at, d)
}

// planned opens the upgrade of nodes at 0 ms.
func planned(nodes ...string) *hist {
	h := &hist{}
	return h.mgr(0, events.UpgradeRequested{Namespace: ref.Namespace, Name: ref.Name, UID: ref.UID, Generation: 1, DataEngine: "v2"}).
		mgr(0, events.PrecheckPassed{Check: "NodesKnown", Reason: "AllNodesKnown", Message: "ok"}).
		mgr(0, events.UpgradePlanned{InstanceManagerImage: "im:v2", Nodes: nodes, LonghornProfile: "v1.12", LonghornVersion: "v1.12.1"})
}

// steps walks node from its start at `at` through the first n working
// steps (all of them and completion when n is len(events.NodeSteps)), each
// taking `each` ms, and returns the time it ends.
func (h *hist) steps(node string, at, each, n int) int {
	h.mgr(at, events.NodeScheduled{Node: node, Attempt: 1})
	h.node(node, at, events.NodeUpgradeStarted{Node: node, DataEngine: "v2", InstanceManagerImage: "im:v2", Attempt: 1})
	for i := 0; i < n && i+1 < len(events.NodeSteps); i++ {
		at += each
		h.node(node, at, events.NodeStateChanged{From: events.NodeSteps[i], To: events.NodeSteps[i+1], Message: "to " + string(events.NodeSteps[i+1])})
	}
	if n >= len(events.NodeSteps) {
		at += each
		h.node(node, at, events.NodeUpgradeCompleted{Message: "node upgrade completed"})
		h.mgr(at, events.NodeFinished{Node: node, State: events.NodeCompleted})
	}
	return at
}

// to walks node from step `from` (entered before) to step `to`, each
// step taking `each` ms from at, and returns the time it ends.
func (h *hist) to(node string, at, each int, from, to events.NodeState) int {
	for s := from; s != to; {
		next, _ := s.Next()
		at += each
		h.node(node, at, events.NodeStateChanged{From: s, To: next})
		s = next
	}
	return at
}
