package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/switchback-dev/switchback/api/v1beta2"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/natsembed"
	"github.com/switchback-dev/switchback/test/harness/testenv"
)

func TestDemoCompletesAndItsHistoryReplays(t *testing.T) {
	dir := t.TempDir()
	code, out, errOut := runCmd(t, 2*time.Minute, "demo", "--nodes", "3", "--volumes", "8", "--latency", "10ms", "--data-dir", dir)
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
	assert.Contains(t, out, "upgrade completed")
	assert.Contains(t, out, "0 failed (0 caused by the upgrade)")
	assert.Contains(t, out, "I/O checker: no I/O waited longer than the stall threshold")
	assert.Contains(t, out, "switchback replay --data-dir "+dir)

	// replay from the demo's store, offline: the objects as kubectl prints
	// them, in JSON and in YAML.
	for _, format := range []string{"json", "yaml"} {
		code, out, errOut = runCmd(t, time.Minute, "replay", "--data-dir", dir, "-o", format)
		require.Equal(t, 0, code, errOut)
		m, nodes := replayedObjects(t, out)
		assert.Equal(t, "upgrade-v2", m.Name, format)
		assert.Equal(t, v1beta2.UpgradeStateCompleted, m.Status.State, format)
		assert.Equal(t, int32(3), m.Status.CompletedNodes, format)
		require.Len(t, nodes, 3, format)
		for _, n := range nodes {
			assert.Equal(t, v1beta2.NodeUpgradeStateCompleted, n.Status.State, format)
			assert.Equal(t, "upgrade-v2", n.Spec.DataEngineUpgradeManager, format)
		}
	}

	// The middle of the history shows the node that was in flight then.
	code, out, _ = runCmd(t, time.Minute, "history", "upgrade-v2", "--data-dir", dir)
	require.Equal(t, 0, code)
	mid := seqOf(t, out, "switching-over → upgrading-instance-manager")
	code, out, errOut = runCmd(t, time.Minute, "replay", "--data-dir", dir, "--until-seq", strconv.FormatUint(mid, 10))
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "upgrading-instance-manager", "the node in flight at that sequence")
	assert.Regexp(t, `upgrade-v2\s+upgrading`, out)
}

// replayedObjects decodes `replay -o json|yaml`: a List of one manager and
// its node upgrades, each decoding strictly into the API's own types (a
// field they do not have fails the test).
func replayedObjects(t *testing.T, out string) (*v1beta2.DataEngineUpgradeManager, []*v1beta2.NodeDataEngineUpgrade) {
	t.Helper()
	js, err := yaml.YAMLToJSON([]byte(out)) // JSON is YAML too
	require.NoError(t, err)
	var list struct {
		APIVersion, Kind string
		Items            []json.RawMessage
	}
	require.NoError(t, json.Unmarshal(js, &list))
	require.Equal(t, "List", list.Kind)
	var m *v1beta2.DataEngineUpgradeManager
	var nodes []*v1beta2.NodeDataEngineUpgrade
	for _, raw := range list.Items {
		var meta metav1.TypeMeta
		require.NoError(t, json.Unmarshal(raw, &meta))
		require.Equal(t, "longhorn.io/v1beta2", meta.APIVersion)
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		switch meta.Kind {
		case "DataEngineUpgradeManager":
			require.Nil(t, m, "one manager")
			m = &v1beta2.DataEngineUpgradeManager{}
			require.NoError(t, dec.Decode(m))
		case "NodeDataEngineUpgrade":
			n := &v1beta2.NodeDataEngineUpgrade{}
			require.NoError(t, dec.Decode(n))
			nodes = append(nodes, n)
		default:
			t.Fatalf("unexpected kind %q", meta.Kind)
		}
	}
	require.NotNil(t, m)
	return m, nodes
}

// seqOf finds the sequence of the first history line containing what.
func seqOf(t *testing.T, history, what string) uint64 {
	t.Helper()
	for _, line := range strings.Split(history, "\n") {
		if strings.Contains(line, what) {
			f := strings.Fields(line)
			n, err := strconv.ParseUint(f[0], 10, 64)
			require.NoError(t, err)
			return n
		}
	}
	t.Fatalf("no %q in history:\n%s", what, history)
	return 0
}

func TestDemoShowsAStallAndTheFix(t *testing.T) {
	code, out, errOut := runCmd(t, 2*time.Minute, "demo", "--nodes", "3", "--volumes", "6", "--latency", "10ms",
		"--stuck-volume", "--stall-after", "300ms", "--heal-after", "2s", "--data-dir", t.TempDir())
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
	assert.Regexp(t, regexp.MustCompile(`STALLED in switching-over\s+\(SwitchoverFailing: volume pvc-000`), out)
	assert.Contains(t, out, "resumed switching-over")
	assert.Contains(t, out, "upgrade completed")
}

func TestDemoStuckForeverFailsAfterTimeout(t *testing.T) {
	code, out, _ := runCmd(t, 2*time.Minute, "demo", "--nodes", "2", "--volumes", "3", "--latency", "5ms",
		"--stuck-volume", "--stall-after", "200ms", "--timeout", "3s", "--data-dir", t.TempDir())
	assert.Equal(t, 1, code)
	assert.Contains(t, out, "STALLED", "the stall and its message are shown")
}

func TestPlanIsADryRun(t *testing.T) {
	code, out, errOut := runCmd(t, time.Minute, "plan", "--data-plane", "sim", "--nodes", "3", "--volumes", "6")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "NodesKnown")
	assert.Contains(t, out, "node-1")
	code, out, _ = runCmd(t, time.Minute, "plan", "--data-plane", "sim", "--nodes", "3", "--node", "ghost")
	assert.Equal(t, 4, code, "the prechecks refuse")
	assert.Contains(t, out, "ghost")
}

// The nats CLI (installed into .cache/bin by `make setup`) reads the history:
// readable ce- headers and JSON data.
func TestNatsCLIReadsTheStream(t *testing.T) {
	root, err := testenv.RepoRoot()
	require.NoError(t, err)
	natsBin := filepath.Join(root, ".cache", "bin", "nats")
	if _, err := exec.LookPath(natsBin); err != nil {
		t.Fatalf("nats CLI missing at %s: run `make setup`", natsBin)
	}
	dir := t.TempDir()
	code, out, errOut := runCmd(t, 2*time.Minute, "demo", "--nodes", "2", "--volumes", "3", "--latency", "5ms", "--data-dir", dir)
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
	srv, err := natsembed.Start(natsembed.Options{StoreDir: dir})
	require.NoError(t, err)
	defer srv.Shutdown()

	ls, err := exec.Command(natsBin, "-s", srv.ClientURL(), "stream", "ls").CombinedOutput()
	require.NoError(t, err, "%s", ls)
	assert.Contains(t, string(ls), "SWITCHBACK_EVENTS")

	// `stream view` pages interactively and insists on a terminal: give it one.
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Fatal("tmux is needed to give `nats stream view` a terminal: apt-get install tmux")
	}
	session := fmt.Sprintf("sbview-%d", time.Now().UnixNano())
	view := fmt.Sprintf("%s -s %s stream view SWITCHBACK_EVENTS 3", natsBin, srv.ClientURL())
	require.NoError(t, exec.Command("tmux", "new-session", "-d", "-s", session, "-x", "250", "-y", "80", view).Run())
	defer func() { _ = exec.Command("tmux", "kill-session", "-t", session).Run() }()
	var screen string
	require.Eventually(t, func() bool {
		b, _ := exec.Command("tmux", "capture-pane", "-p", "-t", session).Output()
		screen = string(b)
		return strings.Contains(screen, "Next Page?")
	}, 20*time.Second, 50*time.Millisecond, "nats stream view did not show a page")
	assert.Contains(t, screen, "ce-type: io.switchback.manager.upgrade-requested.v1")
	assert.Contains(t, screen, "ce-specversion: 1.0")
	assert.Contains(t, screen, `{"namespace":"longhorn-system","name":"upgrade-v2"`)
}
