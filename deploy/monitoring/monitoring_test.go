// Package monitoring tests deploy/monitoring as it is installed: rendered by
// the kustomize of the built kubectl, its alerts run through `promtool test
// rules`, the dashboard's queries checked by promtool, every series the
// rules and the dashboard read found in what real `switchback controller`
// and `switchback worker` processes export (series_linux_test.go), and
// everything applied (server-side dry run) on the real kube-apiserver that
// testenv starts, with stand-ins for the Prometheus Operator's CRDs. It
// holds tests only.
package monitoring

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/switchback-dev/switchback/test/harness/manifesttest"
	"github.com/switchback-dev/switchback/test/harness/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// Names in the manifests the tests refer to.
const (
	namespace      = "longhorn-system"
	ruleName       = "switchback"
	dashboardName  = "switchback-dashboard"
	dashboardKey   = "switchback.json"
	controllerName = "switchback-controller"
	workerName     = "switchback-worker"
)

// object returns the rendered object of a kind and name, failing the test
// without it.
func object(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, u := range objs {
		if u.GetKind() == kind && u.GetName() == name {
			return u
		}
	}
	t.Fatalf("the render has no %s %s", kind, name)
	return nil
}

// monitoring renders deploy/monitoring.
func monitoring(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	return render(t, repoPath(t, "deploy", "monitoring"))
}

// ruleGroups is the `groups` of the rendered PrometheusRule as a Prometheus
// rule file, which is what the operator hands Prometheus.
func ruleGroups(t *testing.T) []byte {
	t.Helper()
	rule := object(t, monitoring(t), "PrometheusRule", ruleName)
	groups, found, err := unstructured.NestedSlice(rule.Object, "spec", "groups")
	require.NoError(t, err)
	require.True(t, found, "PrometheusRule %s has no spec.groups", ruleName)
	b, err := yaml.Marshal(map[string]any{"groups": groups})
	require.NoError(t, err)
	return b
}

// ruleFile is the shape of a Prometheus rule file, as far as the tests read it.
type ruleFile struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []struct {
			Alert       string            `json:"alert"`
			Record      string            `json:"record"`
			Expr        string            `json:"expr"`
			For         string            `json:"for"`
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
		} `json:"rules"`
	} `json:"groups"`
}

// promtoolPath returns .cache/bin/promtool, building it with `make
// promtool` (the version pinned in the Makefile) when it is missing.
func promtoolPath(t *testing.T) string {
	t.Helper()
	path := repoPath(t, ".cache", "bin", "promtool")
	if _, err := os.Stat(path); err == nil {
		return path
	}
	if _, err := exec.LookPath("make"); err != nil {
		t.Fatalf("promtool missing at %s and no make to build it: run `make tools` (or install make)", path)
	}
	t.Logf("promtool missing at %s: building it with `make promtool` (once; ~5 min cold on 2 cores)", path)
	start := time.Now()
	cmd := exec.Command("make", "--no-print-directory", "promtool")
	cmd.Dir = repoPath(t)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "make promtool:\n%s", out)
	t.Logf("built promtool in %s", time.Since(start).Round(time.Second))
	return path
}

// promtool runs promtool in dir and returns its output.
func promtool(t *testing.T, dir string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, promtoolPath(t), args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "promtool %s:\n%s", strings.Join(args, " "), out)
	return string(out)
}

// TestAlertsPassPromtool: the PrometheusRule's groups are a valid rule file
// (`promtool check rules`) and pass rules_test.yaml (`promtool test
// rules`), which tests every alert both firing and not firing.
func TestAlertsPassPromtool(t *testing.T) {
	dir := t.TempDir()
	groups := ruleGroups(t)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "rules.yaml"), groups, 0o600))
	tests, err := os.ReadFile(repoPath(t, "deploy", "monitoring", "rules_test.yaml"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "rules_test.yaml"), tests, 0o600))

	out := promtool(t, dir, "check", "rules", "rules.yaml")
	assert.Contains(t, out, "SUCCESS")
	out = promtool(t, dir, "test", "rules", "rules_test.yaml")
	assert.Contains(t, out, "SUCCESS")

	// Every alert is tested firing and not firing, and the tests name no
	// alert the rules lack (promtool passes a test of an unknown alert
	// that expects nothing).
	var rules ruleFile
	require.NoError(t, yaml.Unmarshal(groups, &rules))
	var suite struct {
		Tests []struct {
			Name  string `json:"name"`
			Cases []struct {
				Alert     string           `json:"alertname"`
				ExpAlerts []map[string]any `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	require.NoError(t, yaml.Unmarshal(tests, &suite))
	firing, silent := map[string]int{}, map[string]int{}
	for _, tc := range suite.Tests {
		for _, c := range tc.Cases {
			if len(c.ExpAlerts) > 0 {
				firing[c.Alert]++
			} else {
				silent[c.Alert]++
			}
		}
	}
	var alerts []string
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				alerts = append(alerts, r.Alert)
				assert.NotZero(t, firing[r.Alert], "rules_test.yaml never expects %s to fire", r.Alert)
				assert.NotZero(t, silent[r.Alert], "rules_test.yaml never expects %s to stay silent", r.Alert)
			}
		}
	}
	for name := range firing {
		assert.Contains(t, alerts, name, "rules_test.yaml tests an alert rules.yaml lacks")
	}
	for name := range silent {
		assert.Contains(t, alerts, name, "rules_test.yaml tests an alert rules.yaml lacks")
	}
}

// TestMonitoringAppliesOnTheRealAPIServer: deploy/monitoring on its own,
// and deploy/ with it as README.md says to add it, are accepted by the
// apiserver (server-side dry run, strict field validation), the Prometheus
// Operator's objects against the stand-in CRDs of testdata.
func TestMonitoringAppliesOnTheRealAPIServer(t *testing.T) {
	env := testenv.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, testenv.InstallCRDs(ctx, env.Config, repoPath(t, "deploy", "monitoring", "testdata", "prometheus-operator-crds")))
	// What deploy/ needs besides its CRDs, from deploy's own stand-ins.
	require.NoError(t, testenv.InstallCRDs(ctx, env.Config, repoPath(t, "deploy", "testdata", "cert-manager-crds")))
	kubectl(t, nil, "apply", "-f", repoPath(t, "deploy", "testdata", "longhorn-namespace.yaml"))

	want := []string{
		"service/switchback-controller-metrics created",
		"service/switchback-worker-metrics created",
		"configmap/switchback-dashboard created",
		"servicemonitor.monitoring.coreos.com/switchback-controller created",
		"servicemonitor.monitoring.coreos.com/switchback-worker created",
		"prometheusrule.monitoring.coreos.com/switchback created",
	}
	// deploy/ with monitoring added to its resources, in an overlay.
	withBase := t.TempDir()
	deployDir, err := filepath.Rel(withBase, repoPath(t, "deploy"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(withBase, "kustomization.yaml"),
		fmt.Appendf(nil, "resources:\n- %s\n- %s\n", deployDir, filepath.Join(deployDir, "monitoring")), 0o600))
	for name, dir := range map[string]string{"monitoring": repoPath(t, "deploy", "monitoring"), "deploy+monitoring": withBase} {
		t.Run(name, func(t *testing.T) {
			out := kubectl(t, nil, "apply", "--dry-run=server", "-k", dir)
			for _, line := range want {
				assert.Contains(t, out, line+" (server dry run)")
			}
			if name == "deploy+monitoring" {
				assert.Contains(t, out, "deployment.apps/switchback-controller created (server dry run)")
			}
		})
	}

	// Every object is named for Switchback and lives in its namespace, as
	// deploy/'s are (`kubectl delete -k` removes only what is Switchback's).
	for _, u := range monitoring(t) {
		assert.True(t, strings.HasPrefix(u.GetName(), "switchback"), "%s %s is named for Switchback", u.GetKind(), u.GetName())
		assert.Equal(t, namespace, u.GetNamespace(), "%s %s", u.GetKind(), u.GetName())
	}
	kinds := []string{}
	for _, u := range monitoring(t) {
		kinds = append(kinds, u.GetKind())
	}
	slices.Sort(kinds)
	assert.Equal(t, []string{"ConfigMap", "PrometheusRule", "Service", "Service", "ServiceMonitor", "ServiceMonitor"}, kinds)
}

// TestREADMEMatchesTheManifests keeps README.md true: its overlay renders
// with the label on every object and the stall alert's `for` changed, and
// its alert table lists the rules in order with their expression, `for` and
// severity.
func TestREADMEMatchesTheManifests(t *testing.T) {
	raw, err := os.ReadFile(repoPath(t, "deploy", "monitoring", "README.md"))
	require.NoError(t, err)
	readme := string(raw)

	var overlay string
	for _, block := range strings.Split(readme, "```yaml\n")[1:] {
		if body, _, ok := strings.Cut(block, "```"); ok && strings.Contains(body, "kind: Kustomization") {
			overlay = body
			break
		}
	}
	require.NotEmpty(t, overlay, "README.md shows an overlay")
	dir := t.TempDir()
	rel, err := filepath.Rel(dir, repoPath(t, "deploy", "monitoring"))
	require.NoError(t, err)
	const documented = "../switchback/deploy/monitoring"
	require.Contains(t, overlay, documented)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(strings.ReplaceAll(overlay, documented, rel)), 0o600))
	objs := render(t, dir)
	for _, u := range objs {
		assert.Equal(t, "kube-prometheus-stack", u.GetLabels()["release"], "%s %s carries the overlay's label", u.GetKind(), u.GetName())
	}
	var patched ruleFile
	groups, _, err := unstructured.NestedSlice(object(t, objs, "PrometheusRule", ruleName).Object, "spec", "groups")
	require.NoError(t, err)
	b, err := json.Marshal(map[string]any{"groups": groups})
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &patched))
	require.Equal(t, "SwitchbackNodeUpgradeStalled", patched.Groups[0].Rules[0].Alert, "the overlay's patch path names the stall alert")
	assert.Equal(t, "30m", patched.Groups[0].Rules[0].For)

	var rows [][]string
	for _, line := range strings.Split(readme, "\n") {
		if strings.HasPrefix(line, "| `Switchback") {
			cols := strings.Split(strings.Trim(line, "|"), "|")
			require.Len(t, cols, 4, "alert row %q", line)
			for i := range cols {
				cols[i] = strings.TrimSpace(cols[i])
			}
			rows = append(rows, cols)
		}
	}
	var rules ruleFile
	require.NoError(t, yaml.Unmarshal(ruleGroups(t), &rules))
	var i int
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			if !assert.Less(t, i, len(rows), "README.md's alert table lacks %s", r.Alert) {
				return
			}
			row := rows[i]
			i++
			assert.Equal(t, "`"+r.Alert+"`", row[0], "README.md's alert table is in rule order")
			assert.Contains(t, row[1], "`"+r.Expr+"`", "README.md gives %s's expression", r.Alert)
			assert.Equal(t, cmp.Or(r.For, "0s"), row[2], "README.md gives %s's for", r.Alert)
			assert.Equal(t, r.Labels["severity"], row[3], "README.md gives %s's severity", r.Alert)
		}
	}
	assert.Equal(t, i, len(rows), "README.md's alert table lists no other alert")
}

// The install's shared test helpers (package manifesttest).
var (
	repoPath = manifesttest.RepoPath
	kubectl  = manifesttest.Kubectl
	render   = manifesttest.Kustomize
)
