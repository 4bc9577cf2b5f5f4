package manager

import (
	"testing"

	"github.com/switchback-dev/switchback/aggregate/internal/machinetest"
)

// TestDecisionsCompleteTheirPrefix runs machinetest.CompletesPrefix for
// every command in every fixture.
func TestDecisionsCompleteTheirPrefix(t *testing.T) {
	m := machinetest.Machine[State, Command]{Decide: Decide, Wrap: envs, Fold: Fold}
	for _, f := range fixtures() {
		s := fold(t, f.history...)
		for name, cmd := range canonicalCommands(s) {
			t.Run(f.name+"/"+name, func(t *testing.T) { machinetest.CompletesPrefix(t, m, s, cmd) })
		}
	}
}
