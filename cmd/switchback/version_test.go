package main

import (
	"encoding/json"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestVersion: `switchback version` says the version, Go, the Longhorn
// profiles it drives and the embedded nats-server, as text and as JSON.
func TestVersion(t *testing.T) {
	code, out, _ := runCmd(t, 10*time.Second, "version")
	require.Equal(t, 0, code)
	assert.Contains(t, out, "switchback (devel)", "no version stamped in a test binary")
	assert.Contains(t, out, runtime.Version())
	assert.Contains(t, out, "v1.12 in-place (experimental)")
	code, out, _ = runCmd(t, 10*time.Second, "version", "-o", "json")
	require.Equal(t, 0, code)
	var v versionInfo
	require.NoError(t, json.Unmarshal([]byte(out), &v))
	assert.Equal(t, []string{"v1.12", "in-place (experimental)"}, v.Longhorn)
	assert.Equal(t, "v2.15.2", v.NATSBuilt)
	code, _, _ = runCmd(t, 10*time.Second, "version", "-o", "yaml")
	assert.Equal(t, 2, code, "a usage error")
}

// TestWorkerHelpListsWhatAWorkerUses: a worker joins the controller's NATS,
// so its help has no embedded-server flag and says --nats-url is required;
// the controller's keeps them.
func TestWorkerHelpListsWhatAWorkerUses(t *testing.T) {
	code, out, errOut := runCmd(t, 10*time.Second, "worker", "--help")
	require.Equal(t, 0, code)
	help := out + errOut
	for _, flag := range []string{"--data-dir", "--nats-listen", "--nats-port", "embedded server"} {
		assert.NotContains(t, help, flag)
	}
	assert.Contains(t, help, "(required)")
	code, out, errOut = runCmd(t, 10*time.Second, "controller", "--help")
	require.Equal(t, 0, code)
	assert.Contains(t, out+errOut, "--data-dir")
	code, _, errOut = runCmd(t, 10*time.Second, "worker", "--node", "n1", "--data-dir", "x")
	assert.Equal(t, 2, code, "not a worker's flag: %s", errOut)
}
