package manager

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

// scenarios are the recorded histories: each is driven through Decide, so the
// files are what the command side really appends.
var scenarios = []struct {
	name string
	run  func(h *harness)
}{
	{"complete-3-node", func(h *harness) {
		h.do(cmdRequest)
		h.do(RecordPrechecks{ID: "prechecks", Results: allPassed, InstanceManagerImage: image, Order: plan3})
		h.do(ScheduleNext{ID: "schedule"})
		for _, n := range plan3 {
			h.do(RecordNodeOutcome{ID: "outcome-" + n, Node: n, State: events.NodeCompleted, Message: "instance manager runs " + image})
		}
	}},
	{"precheck-failed", func(h *harness) {
		c := cmdRequest
		c.Nodes = []string{"node-1", "node-2"}
		h.do(c)
		h.do(RecordPrechecks{ID: "prechecks", Results: someFailed})
	}},
	{"cancel-mid-node", func(h *harness) {
		h.do(cmdRequest)
		h.do(RecordPrechecks{ID: "prechecks", Results: allPassed, InstanceManagerImage: image, Order: plan3})
		h.do(ScheduleNext{ID: "schedule"})
		h.do(RecordNodeOutcome{ID: "outcome-node-1", Node: "node-1", State: events.NodeCompleted})
		h.do(RequestCancel{ID: "cancel", Reason: "DataEngineUpgradeManager deleted"})
		h.do(ConfirmCancelled{ID: "confirm-cancel", Node: "node-2", Message: "node-2 stopped at switching-over; every target is back on its own node"})
	}},
	{"node-error", func(h *harness) {
		h.do(cmdRequest)
		h.do(RecordPrechecks{ID: "prechecks", Results: allPassed, InstanceManagerImage: image, Order: plan3})
		h.do(ScheduleNext{ID: "schedule"})
		h.do(RecordNodeOutcome{ID: "outcome-node-1", Node: "node-1", State: events.NodeCompleted})
		h.do(RecordNodeOutcome{ID: "outcome-node-2", Node: "node-2", State: events.NodeError,
			Message: "instance manager with image " + image + " did not start within 10m"})
	}},
}

func TestRecordedHistoriesMatchDecide(t *testing.T) {
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			h := newHarness(t)
			sc.run(h)
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
