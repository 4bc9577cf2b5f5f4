package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/switchback-dev/switchback/test/harness/testenv"
)

// The package's tests that need Kubernetes share one real apiserver; the
// others ignore it.
func TestMain(m *testing.M) { testenv.Main(m) }

// runCmd runs the CLI in-process and returns its exit code and output.
func runCmd(t *testing.T, timeout time.Duration, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var out, errOut bytes.Buffer
	code := run(ctx, "switchback", args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestHelpAndUsageErrors(t *testing.T) {
	cases := []struct {
		args []string
		code int
		want string
	}{
		{nil, 0, "Usage:\n  switchback [command]"},
		{[]string{"help"}, 0, "replay"},
		{[]string{"nope"}, 2, `unknown command "nope"`},
		{[]string{"demo", "--help"}, 0, "--stuck-volume"},
		{[]string{"replay", "--help"}, 0, "--until-seq"},
		{[]string{"history", "--help"}, 0, "--follow"},
		{[]string{"plan", "--help"}, 0, "--node"},
		{[]string{"worker", "--help"}, 0, "--node"},
		{[]string{"controller", "--help"}, 0, "--leader-elect"},
		{[]string{"demo", "--bogus"}, 2, "unknown flag: --bogus"},
		{[]string{"history"}, 2, "history takes one MANAGER name"},
		{[]string{"demo", "--nodes", "0"}, 1, "--nodes 0"},
		{[]string{"demo", "--longhorn-profile", "v9"}, 1, `--longhorn-profile "v9": want one of v1.12, in-place`},
		{[]string{"replay", "--until-time", "yesterday", "--data-dir", "x"}, 1, "--until-time"},
		{[]string{"worker", "--node", "n1"}, 2, "--nats-url is required"},
		{[]string{"controller", "--leader-elect-lease-duration", "1s"}, 2, "--leader-elect-lease-duration (1s) > --leader-elect-renew-deadline (10s)"},
		{[]string{"nats-auth", "--out", "x"}, 2, "--node: at least one node"},
		{[]string{"nats-auth", "--node", "n1"}, 2, "--out: a directory is required"},
		{[]string{"nats-auth", "--node", "n1", "--out", "x", "--mode", "token"}, 1, "token"},
		{[]string{"nats-auth", "--node", "Bad_Name", "--out", "x"}, 1, "Bad_Name"},
		{[]string{"plan", "--data-plane", "sim", "--nodes", "3", "--node", "ghost"}, 4, "the upgrade would not start"},
		{[]string{"plan", "-o", "xml"}, 2, "want table, json or yaml"},
		{[]string{"history", "m", "-o", "yaml", "--follow"}, 2, "a YAML list never ends"},
		{[]string{"version", "-o", "yaml"}, 2, "want text or json"},
		{[]string{"replay", "--data-dir", "/nonexistent/switchback"}, 1, "--data-dir /nonexistent/switchback"},
		{[]string{"uninstall", "--bogus"}, 2, "unknown flag: --bogus"},
		{[]string{"nosuchcommand"}, 2, "unknown command"},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, out, errOut := runCmd(t, 30*time.Second, tc.args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tc.code, out, errOut)
			}
			if !strings.Contains(out+errOut, tc.want) {
				t.Fatalf("output lacks %q\nstdout: %s\nstderr: %s", tc.want, out, errOut)
			}
		})
	}
}
