package manager

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

// scenarios are the recorded histories: each is driven through Decide, so the
// files are what the command side really appends.
var scenarios = []machinetest.Scenario[State, Command]{
	{Name: "complete-3-node", Run: func(h *harness) {
		h.Do(cmdRequest)
		h.Do(RecordPrechecks{Meta: aggregate.Meta{ID: "prechecks"}, Results: allPassed, InstanceManagerImage: image, Order: plan3})
		h.Do(ScheduleNext{Meta: aggregate.Meta{ID: "schedule"}})
		for _, n := range plan3 {
			h.Do(RecordNodeOutcome{Meta: aggregate.Meta{ID: "outcome-" + n}, Node: n, State: events.NodeCompleted, Message: "instance manager runs " + image})
		}
	}},
	{Name: "precheck-failed", Run: func(h *harness) {
		c := cmdRequest
		c.Nodes = []string{"node-1", "node-2"}
		h.Do(c)
		h.Do(RecordPrechecks{Meta: aggregate.Meta{ID: "prechecks"}, Results: someFailed})
	}},
	{Name: "cancel-mid-node", Run: func(h *harness) {
		h.Do(cmdRequest)
		h.Do(RecordPrechecks{Meta: aggregate.Meta{ID: "prechecks"}, Results: allPassed, InstanceManagerImage: image, Order: plan3})
		h.Do(ScheduleNext{Meta: aggregate.Meta{ID: "schedule"}})
		h.Do(RecordNodeOutcome{Meta: aggregate.Meta{ID: "outcome-node-1"}, Node: "node-1", State: events.NodeCompleted})
		h.Do(RequestCancel{Meta: aggregate.Meta{ID: "cancel"}, Reason: "DataEngineUpgradeManager deleted"})
		h.Do(ConfirmCancelled{Meta: aggregate.Meta{ID: "confirm-cancel"}, Node: "node-2", Message: "node-2 stopped at switching-over; every target is back on its own node"})
	}},
	{Name: "node-error", Run: func(h *harness) {
		h.Do(cmdRequest)
		h.Do(RecordPrechecks{Meta: aggregate.Meta{ID: "prechecks"}, Results: allPassed, InstanceManagerImage: image, Order: plan3})
		h.Do(ScheduleNext{Meta: aggregate.Meta{ID: "schedule"}})
		h.Do(RecordNodeOutcome{Meta: aggregate.Meta{ID: "outcome-node-1"}, Node: "node-1", State: events.NodeCompleted})
		h.Do(RecordNodeOutcome{Meta: aggregate.Meta{ID: "outcome-node-2"}, Node: "node-2", State: events.NodeError,
			Message: "instance manager with image " + image + " did not start within 10m"})
	}},
}

func TestRecordedHistoriesMatchDecide(t *testing.T) {
	machinetest.RecordedHistoriesMatchDecide(t, machine, scenarios, *record)
}

func TestGoldenReplay(t *testing.T) {
	machinetest.GoldenReplay(t, machine, len(scenarios), *update)
}
