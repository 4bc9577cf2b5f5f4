package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/switchback-dev/switchback/replay"
)

// TestHistoryOutputs: `history -o json` and `-o yaml` parse back into the
// lines the table shows, one per event; -o yaml with --follow and an unknown
// format are usage errors.
func TestHistoryOutputs(t *testing.T) {
	dir := t.TempDir()
	code, out, errOut := runCmd(t, 2*time.Minute, "demo", "--nodes", "2", "--volumes", "3", "--latency", "5ms", "--data-dir", dir)
	require.Equal(t, 0, code, "%s\n%s", out, errOut)

	code, table, errOut := runCmd(t, time.Minute, "history", "upgrade-v2", "--data-dir", dir)
	require.Equal(t, 0, code, errOut)
	rows := strings.Split(strings.TrimSpace(table), "\n")[1:] // the header first
	var fromJSON, fromYAML []replay.Line
	code, js, errOut := runCmd(t, time.Minute, "history", "upgrade-v2", "--data-dir", dir, "-o", "json")
	require.Equal(t, 0, code, errOut)
	require.NoError(t, json.Unmarshal([]byte(js), &fromJSON))
	code, ys, errOut := runCmd(t, time.Minute, "history", "upgrade-v2", "--data-dir", dir, "-o", "yaml")
	require.Equal(t, 0, code, errOut)
	require.NoError(t, yaml.Unmarshal([]byte(ys), &fromYAML))
	require.Len(t, fromJSON, len(rows))
	assert.Equal(t, fromJSON, fromYAML)
	for i, l := range fromJSON {
		assert.Equal(t, rows[i], l.String(), "line %d: the table shows the same event", i)
	}
	assert.Equal(t, "upgrade completed", fromJSON[len(fromJSON)-1].What)

	for _, args := range [][]string{{"-o", "yaml", "--follow"}, {"-o", "xml"}} {
		code, _, errOut = runCmd(t, time.Minute, append([]string{"history", "upgrade-v2", "--data-dir", dir}, args...)...)
		assert.Equal(t, 2, code, "%v: %s", args, errOut)
	}
}

// TestPlanOutputs: `plan -o json` and `-o yaml` parse back into the
// prechecks and the plan the table shows; an unknown format is a usage
// error.
func TestPlanOutputs(t *testing.T) {
	var fromJSON, fromYAML planOutput
	code, js, errOut := runCmd(t, time.Minute, "plan", "--data-plane", "sim", "--nodes", "3", "--volumes", "6", "-o", "json")
	require.Equal(t, 0, code, errOut)
	require.NoError(t, json.Unmarshal([]byte(js), &fromJSON))
	code, ys, errOut := runCmd(t, time.Minute, "plan", "--data-plane", "sim", "--nodes", "3", "--volumes", "6", "-o", "yaml")
	require.Equal(t, 0, code, errOut)
	require.NoError(t, yaml.Unmarshal([]byte(ys), &fromYAML))
	assert.Equal(t, fromJSON, fromYAML)
	require.NotEmpty(t, fromJSON.Prechecks)
	assert.Equal(t, "DataEngineSupported", fromJSON.Prechecks[0].Check)
	require.Len(t, fromJSON.Plan.Nodes, 3)
	code, table, _ := runCmd(t, time.Minute, "plan", "--data-plane", "sim", "--nodes", "3", "--volumes", "6")
	require.Equal(t, 0, code)
	for _, n := range fromJSON.Plan.Nodes {
		assert.Contains(t, table, n.Node)
	}
	code, _, _ = runCmd(t, time.Minute, "plan", "--data-plane", "sim", "-o", "xml")
	assert.Equal(t, 2, code)
}

// TestPlanShowsWorkloadMoves: with --initiator-policy move-workloads the
// plan says, for the node holding the initiators, each pod that would be
// evicted and whether a budget would hold it, in the table and in JSON;
// with the default it says nothing of moves; an unknown policy is a usage
// error.
func TestPlanShowsWorkloadMoves(t *testing.T) {
	args := []string{"plan", "--data-plane", "sim", "--nodes", "4", "--volumes", "6"}
	code, js, errOut := runCmd(t, time.Minute, append(args, "--initiator-policy", "move-workloads", "-o", "json")...)
	require.Equal(t, 0, code, errOut)
	var out planOutput
	require.NoError(t, json.Unmarshal([]byte(js), &out))
	require.Len(t, out.Moves, 1, "one node holds the initiators")
	m := out.Moves[0]
	assert.Equal(t, "node-1", m.Node)
	assert.Empty(t, m.Move.Pins)
	require.NotEmpty(t, m.Move.Evict)
	for _, e := range m.Move.Evict {
		assert.NotEmpty(t, e.Volumes, "%s holds a volume there", e.Pod)
	}

	code, table, errOut := runCmd(t, time.Minute, append(args, "--initiator-policy", "move-workloads")...)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, table, "Workload moves")
	assert.Contains(t, table, m.Move.Evict[0].Pod.String())
	code, table, _ = runCmd(t, time.Minute, args...)
	require.Equal(t, 0, code)
	assert.NotContains(t, table, "Workload moves")
	code, _, _ = runCmd(t, time.Minute, append(args, "--initiator-policy", "drain")...)
	assert.Equal(t, 2, code)
}

// TestPlanShowsTemporaryReplicas: with --replica-policy add-first the plan
// shows, per node, the temporary replicas its upgrade adds and where they
// are expected, and per disk the room they take, in the table and in
// JSON, with the precheck TemporaryReplicasFit passed; with the default
// it shows none; an unknown policy is a usage error.
func TestPlanShowsTemporaryReplicas(t *testing.T) {
	args := []string{"plan", "--data-plane", "sim", "--nodes", "4", "--volumes", "6"}
	code, js, errOut := runCmd(t, time.Minute, append(args, "--replica-policy", "add-first", "-o", "json")...)
	require.Equal(t, 0, code, errOut)
	var out planOutput
	require.NoError(t, json.Unmarshal([]byte(js), &out))
	var temporary int
	for _, n := range out.Plan.Nodes {
		for _, tr := range n.TemporaryReplicas {
			temporary++
			assert.True(t, tr.Placed(), "%s: %s", tr.Volume, tr.Reason)
			assert.NotEqual(t, n.Node, tr.Node, "never on the node upgraded")
		}
	}
	assert.Positive(t, temporary)
	assert.NotEmpty(t, out.Plan.Room)
	for _, p := range out.Prechecks {
		if p.Check == "TemporaryReplicasFit" {
			assert.True(t, p.Passed, p.Message)
		}
	}

	code, table, errOut := runCmd(t, time.Minute, append(args, "--replica-policy", "add-first")...)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, table, "Temporary replicas (replicaPolicy add-first")
	assert.Contains(t, table, "Room they take, per disk")
	code, table, _ = runCmd(t, time.Minute, args...)
	require.Equal(t, 0, code)
	assert.NotContains(t, table, "Temporary replicas")
	code, _, _ = runCmd(t, time.Minute, append(args, "--replica-policy", "add-last")...)
	assert.Equal(t, 2, code)
}

// TestPlanShowsWaves: with --max-concurrent-nodes the plan shows the waves
// in the table and in JSON, every node once; with the default, none; a
// count below 1 is a usage error.
func TestPlanShowsWaves(t *testing.T) {
	args := []string{"plan", "--data-plane", "sim", "--nodes", "6", "--volumes", "6"}
	code, js, errOut := runCmd(t, time.Minute, append(args, "--max-concurrent-nodes", "3", "-o", "json")...)
	require.Equal(t, 0, code, errOut)
	var out planOutput
	require.NoError(t, json.Unmarshal([]byte(js), &out))
	assert.Equal(t, 3, out.Plan.MaxConcurrentNodes)
	var nodes []string
	for _, w := range out.Plan.Waves {
		assert.LessOrEqual(t, len(w.Nodes), 3)
		nodes = append(nodes, w.Nodes...)
	}
	assert.Len(t, nodes, 6)
	assert.Less(t, len(out.Plan.Waves), 6, "some nodes share a wave")

	code, table, errOut := runCmd(t, time.Minute, append(args, "--max-concurrent-nodes", "3")...)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, table, "Waves (up to 3 nodes at once")
	code, table, _ = runCmd(t, time.Minute, args...)
	require.Equal(t, 0, code)
	assert.NotContains(t, table, "Waves")
	code, _, _ = runCmd(t, time.Minute, append(args, "--max-concurrent-nodes", "0")...)
	assert.Equal(t, 2, code)
}
