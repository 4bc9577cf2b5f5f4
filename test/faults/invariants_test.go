//go:build linux

package faults

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/switchback-dev/switchback/events"
)

// The transition counter behind the table's "lost" and "duplicates"
// columns: a complete history counts 0 and 0, a history missing a step or
// holding one twice shows it.
func TestCountTransitions(t *testing.T) {
	ref := events.ManagerRef{Namespace: "ns", Name: "m", UID: "u"}
	node := func(n string, data events.Event) events.Envelope {
		return events.Envelope{Aggregate: events.NodeAggregate(ref, n), Data: data}
	}
	mgr := func(data events.Event) events.Envelope {
		return events.Envelope{Aggregate: events.ManagerAggregate(ref), Data: data}
	}
	complete := func(nodes ...string) []events.Envelope {
		var h []events.Envelope
		for _, n := range nodes {
			h = append(h, mgr(events.NodeScheduled{Node: n}), node(n, events.NodeUpgradeStarted{Node: n}))
			for i := 0; i+1 < len(events.NodeSteps); i++ {
				h = append(h, node(n, events.NodeStateChanged{From: events.NodeSteps[i], To: events.NodeSteps[i+1]}))
			}
			h = append(h, node(n, events.NodeUpgradeCompleted{}), node(n, events.NodeStalled{}), node(n, events.NodeStalled{}),
				mgr(events.NodeFinished{Node: n}))
		}
		return append(h, mgr(events.UpgradeCompleted{}))
	}
	full := complete("a", "b")
	cases := []struct {
		name      string
		h         []events.Envelope
		lost, dup int
	}{
		{"complete (repeated stalls are not transitions)", full, 0, 0},
		{"a step missing", append(append([]events.Envelope{}, full[:5]...), full[6:]...), 1, 0},
		{"a step twice", append(append([]events.Envelope{}, full...), full[4]), 0, 1},
		{"a node never upgraded", complete("a"), len(expectedTransitions([]string{"b"})) - 1, 0},
		{"nothing", nil, len(expectedTransitions([]string{"a", "b"})), 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			lost, dups, detail := countTransitions(tc.h, []string{"a", "b"})
			assert.Equal(t, tc.lost, lost, "lost: %v", detail)
			assert.Equal(t, tc.dup, dups, "duplicates: %v", detail)
		})
	}
}
