package nodeupgrade

import (
	"testing"

	"github.com/switchback-dev/switchback/aggregate/internal/machinetest"
	"github.com/switchback-dev/switchback/events"
)

// TestDecisionsCompleteTheirPrefix runs machinetest.CompletesPrefix for
// every command in every fixture.
func TestDecisionsCompleteTheirPrefix(t *testing.T) {
	m := machinetest.Machine[State, Command]{Decide: Decide, Apply: func(t *testing.T, s State, evs []events.Event) State {
		envelopes := envs(evs...)
		for i := range envelopes {
			envelopes[i].ID = events.DeriveID(envelopes[i].Aggregate, "prefix", i)
		}
		out, err := Fold(s, envelopes...)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}}
	for _, f := range fixtures() {
		s := fold(t, f.history...)
		for name, cmd := range canonicalCommands(s) {
			t.Run(f.name+"/"+name, func(t *testing.T) { machinetest.CompletesPrefix(t, m, s, cmd) })
		}
	}
}
