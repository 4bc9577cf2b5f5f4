package nodeupgrade

import (
	"testing"

	"github.com/switchback-dev/switchback/aggregate/internal/machinetest"
)

// TestDecisionsCompleteTheirPrefix: a decision stored in part is completed by
// deciding its command again, for every command in every fixture.
func TestDecisionsCompleteTheirPrefix(t *testing.T) {
	machinetest.DecisionsCompleteTheirPrefix(t, machine, fixtures(), canonicalCommands)
}
