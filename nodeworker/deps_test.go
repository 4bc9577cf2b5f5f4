package nodeworker_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDependsOnTheExecutorOnly: a worker runs its node's commands through
// the executor (package commands) and nothing of the controller's: neither
// the orchestrator nor the prechecks. It does import plan, for one reason:
// the choice of a temporary target (plan.Chooser) is the same code
// `switchback plan` previews with, so that the preview is what the step
// does.
func TestDependsOnTheExecutorOnly(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", "github.com/switchback-dev/switchback/nodeworker").CombinedOutput()
	require.NoError(t, err, "%s", out)
	deps := strings.Fields(string(out))
	const mod = "github.com/switchback-dev/switchback/"
	assert.Contains(t, deps, mod+"commands")
	assert.Contains(t, deps, mod+"plan", "the temporary target's choice, shared with switchback plan")
	for _, forbidden := range []string{"orchestrator", "precheck", "commands/intake", "projector", "webhook"} {
		assert.NotContains(t, deps, mod+forbidden)
	}
}
