package manager

import (
	"testing"

	"github.com/switchback-dev/switchback/aggregate/internal/machinetest"
)

// TestDecisionsCompleteTheirPrefix: deciding a command again on any stored
// prefix of its events completes the rest, for every command in every fixture.
func TestDecisionsCompleteTheirPrefix(t *testing.T) {
	machinetest.DecisionsCompleteTheirPrefix(t, machine, fixtures(), canonicalCommands)
}
