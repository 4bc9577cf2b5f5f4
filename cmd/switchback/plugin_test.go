package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/test/harness/testenv"
)

// TestKubectlPlugin: installed on the PATH as kubectl-switchback, the
// binary is found and run by a real kubectl (`kubectl plugin list`,
// `kubectl switchback ...`), names itself "kubectl switchback" in its help
// and errors, reads the cluster kubectl's $KUBECONFIG names, and completes
// through kubectl_complete-switchback as kubectl's plugin completion asks.
func TestKubectlPlugin(t *testing.T) {
	env := testenv.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bin := t.TempDir()
	plugin := filepath.Join(bin, pluginName)
	build := exec.CommandContext(ctx, "go", "build", "-o", plugin, ".")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.NoError(t, os.Symlink(plugin, filepath.Join(bin, pluginCompletionName)))

	kubectl := func(args ...string) (int, string, string) {
		cmd := exec.CommandContext(ctx, filepath.Join(env.BinDir, testenv.KubectlBin), args...)
		cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "KUBECONFIG="+env.Kubeconfig)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else {
			require.NoError(t, err)
		}
		return code, stdout.String(), stderr.String()
	}

	code, list, stderr := kubectl("plugin", "list")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, list, plugin)

	code, version, stderr := kubectl("switchback", "version", "-o", "json")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, version, `"longhorn"`)

	code, help, stderr := kubectl("switchback", "plan", "--help")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, help, "Usage:\n  kubectl switchback plan [flags]")

	code, _, stderr = kubectl("switchback", "history")
	assert.Equal(t, 2, code, "the plugin's exit code is kubectl's")
	assert.Contains(t, stderr, "kubectl switchback history: history takes one MANAGER name")
	assert.Contains(t, stderr, "See 'kubectl switchback history --help'.")

	// kubectl hands the plugin its environment, not its flags: the cluster
	// comes from $KUBECONFIG, as for kubectl itself.
	const ns = "plugin-test"
	_, _, err = env.Kubectl(ctx, nil, "create", "namespace", ns)
	require.NoError(t, err)
	code, uninstall, stderr := kubectl("switchback", "uninstall", "-n", ns)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, uninstall, "no upgrade in flight in "+ns)

	// kubectl's completion of `kubectl switchback pl<TAB>` runs the
	// completion executable with __complete semantics.
	completion := exec.CommandContext(ctx, filepath.Join(bin, pluginCompletionName), "pl")
	words, err := completion.Output()
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(string(words), "plan\t"), "%s", words)
}
