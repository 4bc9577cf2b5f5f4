package main

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// singleDashLong is a help line offering a long flag with one dash, as
// the flag package's help did.
var singleDashLong = regexp.MustCompile(`(?m)^\s+-[a-z][a-z0-9]+-?[a-z0-9-]*\s`)

// TestHelpFollowsKubectlConventions: every command's help offers --flags
// (one dash only for a one-letter shorthand), lists the command's own
// flags first and the shared ones under their sections.
func TestHelpFollowsKubectlConventions(t *testing.T) {
	cases := []struct {
		command  string
		sections []string
		absent   []string
	}{
		{"controller", []string{"-n, --namespace", "      --longhorn-namespace", "Flags:", "Kubernetes flags:", "Data plane flags:", "NATS flags:", "Embedded NATS flags:", "Health and metrics flags:", "Logging flags:"}, []string{"Simulated cluster flags:", "--nats-password "}},
		{"worker", []string{"Flags:", "Kubernetes flags:", "Data plane flags:", "NATS flags:", "Logging flags:", "-n, --longhorn-namespace"}, []string{"Embedded NATS flags:"}},
		{"demo", []string{"Flags:", "Simulated cluster flags:", "Embedded NATS flags:", "Kubernetes flags:", "Examples:"}, nil},
		{"plan", []string{"Flags:", "Kubernetes flags:", "Data plane flags:", "Examples:", "-n, --longhorn-namespace"}, []string{"Simulated cluster flags:", "--nodes int"}},
		{"replay", []string{"Flags:", "NATS flags:", "Kubernetes flags:"}, nil},
		{"history", []string{"Usage:\n  switchback history MANAGER [flags]", "NATS flags:"}, nil},
		{"uninstall", []string{"Flags:", "Kubernetes flags:", "-n, --namespace"}, nil},
		{"nats-auth", []string{"Flags:"}, nil},
		{"version", []string{"-o, --output"}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.command, func(t *testing.T) {
			code, out, errOut := runCmd(t, 10*time.Second, tc.command, "--help")
			require.Equal(t, 0, code, errOut)
			assert.Empty(t, errOut, "help goes to stdout")
			assert.Empty(t, singleDashLong.FindAllString(out, -1), "single-dash long flags in:\n%s", out)
			for _, s := range tc.sections {
				assert.Contains(t, out, s)
			}
			for _, s := range tc.absent {
				assert.NotContains(t, out, s)
			}
			if own, shared := strings.Index(out, "\nFlags:"), strings.Index(out, " flags:\n"); own >= 0 && shared >= 0 {
				assert.Less(t, own, shared, "the command's own flags come first")
			}
		})
	}
	code, out, _ := runCmd(t, 10*time.Second, "help")
	require.Equal(t, 0, code)
	for _, group := range []string{"Plan and follow an upgrade:", "Run Switchback:", "Install and remove:", "completion"} {
		assert.Contains(t, out, group)
	}
}

// TestPlanShowsSimulatorFlagsOnlyForTheSimulator: plan reads a real
// cluster by default; the simulated cluster's flags appear in its help
// with --data-plane sim and are accepted either way.
func TestPlanShowsSimulatorFlagsOnlyForTheSimulator(t *testing.T) {
	code, out, _ := runCmd(t, 10*time.Second, "plan", "--help")
	require.Equal(t, 0, code)
	assert.NotContains(t, out, "--stuck-volume")
	assert.Contains(t, out, `(default "longhorn")`)
	code, out, _ = runCmd(t, 10*time.Second, "plan", "--data-plane", "sim", "--help")
	require.Equal(t, 0, code)
	assert.Contains(t, out, "Simulated cluster flags:")
	assert.Contains(t, out, "--stuck-volume")
	code, out, errOut := runCmd(t, time.Minute, "plan", "--data-plane", "sim", "--nodes", "2", "--volumes", "2")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "node-1")
}

// TestShellCompletion: cobra's completion scripts for each shell, and the
// completion requests they make answered with the commands and with the
// values of the flags that take a fixed set.
func TestShellCompletion(t *testing.T) {
	for shell, marker := range map[string]string{"bash": "__start_switchback", "zsh": "#compdef switchback", "fish": "complete -c switchback", "powershell": "Register-ArgumentCompleter"} {
		code, out, errOut := runCmd(t, 10*time.Second, "completion", shell)
		require.Equal(t, 0, code, errOut)
		assert.Contains(t, out, marker, shell)
	}
	cases := []struct {
		words []string
		want  []string
	}{
		{[]string{""}, []string{"plan", "history", "replay", "controller", "worker", "demo", "uninstall", "version"}},
		{[]string{"plan", "--output", ""}, []string{"table", "json", "yaml"}},
		{[]string{"version", "-o", ""}, []string{"text", "json"}},
		{[]string{"controller", "--data-plane", ""}, []string{"longhorn", "sim"}},
		{[]string{"worker", "--log-level", ""}, []string{"debug", "info", "warn", "error"}},
		{[]string{"plan", "--"}, []string{"--kubeconfig", "--context", "--node", "--output"}},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.words, " "), func(t *testing.T) {
			code, out, errOut := runCmd(t, 10*time.Second, append([]string{"__complete"}, tc.words...)...)
			require.Equal(t, 0, code, errOut)
			var got []string
			for line := range strings.SplitSeq(out, "\n") {
				if line != "" && !strings.HasPrefix(line, ":") {
					got = append(got, strings.SplitN(line, "\t", 2)[0])
				}
			}
			for _, w := range tc.want {
				assert.Contains(t, got, w)
			}
		})
	}
}

// TestSingleDashLongFlagsStillWork: a script written when the flags took
// one dash runs the same, told to write two.
func TestSingleDashLongFlagsStillWork(t *testing.T) {
	code, _, errOut := runCmd(t, 10*time.Second, "replay", "-data-dir", "/nonexistent/switchback")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "-data-dir is read as --data-dir")
	assert.Contains(t, errOut, "--data-dir /nonexistent/switchback", "the same error as with two dashes")
	code, out, errOut := runCmd(t, 10*time.Second, "version", "-output=json")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, `"version"`)
	code, out, _ = runCmd(t, 10*time.Second, "version", "-ojson")
	require.Equal(t, 0, code, "a shorthand with its value attached is left alone")
	assert.Contains(t, out, `"version"`)
}

// TestUsageMistakes: each mistake cobra catches is a usage error (exit 2)
// that says what is wrong and where the help is.
func TestUsageMistakes(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"plan", "extra"}, `unexpected argument "extra": plan takes flags only`},
		{[]string{"history", "a", "b"}, "history takes one MANAGER name (got 2 arguments)"},
		{[]string{"replay", "--until-seq", "many"}, `invalid argument "many" for "--until-seq"`},
		{[]string{"worker", "--poll-interval"}, "flag needs an argument: --poll-interval"},
		{[]string{"controller", "--nats-password", "x"}, "--nats-password is retired"},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, _, errOut := runCmd(t, 10*time.Second, tc.args...)
			assert.Equal(t, 2, code, errOut)
			assert.Contains(t, errOut, tc.want)
			assert.Contains(t, errOut, "See 'switchback "+tc.args[0]+" --help'.")
		})
	}
}
