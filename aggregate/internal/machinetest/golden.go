package machinetest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/aggregate/internal/history"
)

// Scenario is a recorded history: it is driven through Decide, so the file
// testdata/<Name>.history.json is what the command side really appends.
type Scenario[S any, C Command] struct {
	Name string
	Run  func(h *Harness[S, C])
}

// RecordedHistoriesMatchDecide runs every scenario from the zero state and
// checks that it appends exactly its recorded history; record rewrites the
// files instead (go test -record).
func RecordedHistoriesMatchDecide[S any, C Command](t *testing.T, m Machine[S, C], scenarios []Scenario[S, C], record bool) {
	for _, sc := range scenarios {
		t.Run(sc.Name, func(t *testing.T) {
			var zero S
			h := NewHarness(t, m, zero)
			sc.Run(h)
			got, err := history.Marshal(h.History)
			require.NoError(t, err)
			path := filepath.Join("testdata", sc.Name+".history.json")
			if record {
				require.NoError(t, os.WriteFile(path, got, 0o644))
			}
			want, err := os.ReadFile(path)
			require.NoError(t, err, "run go test -record to create it")
			require.JSONEq(t, string(want), string(got), "Decide no longer produces the recorded history")
		})
	}
}

// GoldenReplay folds each of the scenarios recorded histories in testdata and
// checks the state against testdata/<name>.golden.json, which must also load
// back as the folded state (snapshots); update rewrites the golden files
// instead (go test -update).
func GoldenReplay[S any, C Command](t *testing.T, m Machine[S, C], scenarios int, update bool) {
	paths, err := filepath.Glob(filepath.Join("testdata", "*.history.json"))
	require.NoError(t, err)
	require.Len(t, paths, scenarios)
	for _, path := range paths {
		name := strings.TrimSuffix(filepath.Base(path), ".history.json")
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(path)
			require.NoError(t, err)
			envs, err := history.Unmarshal(raw)
			require.NoError(t, err)
			var zero S
			s, err := m.FoldSkipping(zero, envs...)
			require.NoError(t, err, "a recorded history must fold without refusals")
			got, err := json.MarshalIndent(s, "", "  ")
			require.NoError(t, err)
			got = append(got, '\n')
			golden := filepath.Join("testdata", name+".golden.json")
			if update {
				require.NoError(t, os.WriteFile(golden, got, 0o644))
			}
			want, err := os.ReadFile(golden)
			require.NoError(t, err, "run go test -update to create it")
			require.JSONEq(t, string(want), string(got))
			var back S
			require.NoError(t, json.Unmarshal(want, &back))
			require.Equal(t, s, back, "the golden state must load back as the folded state (snapshots)")
		})
	}
}
