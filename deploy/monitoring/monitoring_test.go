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
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/switchback-dev/switchback/internal/manifesttest"
	"github.com/switchback-dev/switchback/testenv"
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

// dashboard is the shape of dashboard.json, as far as the tests read it.
type dashboard struct {
	UID        string  `json:"uid"`
	Title      string  `json:"title"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID         int    `json:"id"`
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource *struct {
		UID string `json:"uid"`
	} `json:"datasource"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
}

func readDashboard(t *testing.T) ([]byte, dashboard) {
	t.Helper()
	raw, err := os.ReadFile(repoPath(t, "deploy", "monitoring", "dashboard.json"))
	require.NoError(t, err)
	var d dashboard
	require.NoError(t, json.Unmarshal(raw, &d), "dashboard.json")
	return raw, d
}

// grafanaVariables are what Grafana puts in place of the variables the
// dashboard's queries use, for promtool to parse them.
var grafanaVariables = strings.NewReplacer("$__rate_interval", "5m", "$manager", ".*")

// TestDashboardIsValidAndShipped: dashboard.json is the ConfigMap the
// Grafana sidecar picks up (label grafana_dashboard: "1", the very bytes of
// the file); each panel has a unique id, reads the dashboard's data source
// variable, and each query parses (promtool checks it as a recording rule).
func TestDashboardIsValidAndShipped(t *testing.T) {
	raw, d := readDashboard(t)
	cm := object(t, monitoring(t), "ConfigMap", dashboardName)
	assert.Equal(t, "1", cm.GetLabels()["grafana_dashboard"], "the Grafana sidecar's label")
	data, _, err := unstructured.NestedStringMap(cm.Object, "data")
	require.NoError(t, err)
	assert.Equal(t, string(raw), data[dashboardKey], "the ConfigMap holds dashboard.json as it is")
	assert.NotEmpty(t, d.UID)
	assert.NotEmpty(t, d.Title)

	var rules []map[string]string
	ids := map[int]string{}
	for _, p := range d.Panels {
		if other, dup := ids[p.ID]; dup {
			t.Errorf("panels %q and %q share the id %d", other, p.Title, p.ID)
		}
		ids[p.ID] = p.Title
		if p.Type == "row" {
			continue
		}
		if assert.NotNil(t, p.Datasource, "panel %q has no data source", p.Title) {
			assert.Equal(t, "${datasource}", p.Datasource.UID, "panel %q reads the dashboard's data source", p.Title)
		}
		if !assert.NotEmpty(t, p.Targets, "panel %q has no query", p.Title) {
			continue
		}
		for _, q := range p.Targets {
			require.NotEmpty(t, q.Expr, "panel %q query %s", p.Title, q.RefID)
			rules = append(rules, map[string]string{"record": fmt.Sprintf("dashboard:panel_%d:%s", p.ID, q.RefID), "expr": grafanaVariables.Replace(q.Expr)})
		}
	}
	b, err := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": rules}}})
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "dashboard-queries.yaml"), b, 0o600))
	assert.Contains(t, promtool(t, dir, "check", "rules", "dashboard-queries.yaml"), fmt.Sprintf("SUCCESS: %d rules found", len(rules)))
}

// seriesName matches Switchback's series names where an expression or a
// template uses them. `up`, the one other series the rules read, is
// Prometheus's own.
var seriesName = regexp.MustCompile(`\bswitchback_[a-zA-Z0-9_]+`)

// jobSelector matches a series selected by job, to check the series is
// exported by that job's process.
var jobSelector = regexp.MustCompile(`\b(switchback_[a-zA-Z0-9_]+)\{[^}]*\bjob="([^"]+)"`)

// used is a series the rules or the dashboard read, and where.
type used struct {
	name, job, where string
}

// usedSeries lists the series names the alerts (expressions and
// annotation templates) and the dashboard (queries and variables) read.
func usedSeries(t *testing.T) []used {
	t.Helper()
	var out []used
	add := func(where, text string) {
		jobs := map[string]string{}
		for _, m := range jobSelector.FindAllStringSubmatch(text, -1) {
			jobs[m[1]] = m[2]
		}
		for _, name := range seriesName.FindAllString(text, -1) {
			out = append(out, used{name: name, job: jobs[name], where: where})
		}
	}
	var rules ruleFile
	require.NoError(t, yaml.Unmarshal(ruleGroups(t), &rules))
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			add("alert "+r.Alert, r.Expr)
			for k, v := range r.Annotations {
				add("alert "+r.Alert+" annotation "+k, v)
			}
		}
	}
	_, d := readDashboard(t)
	for _, p := range d.Panels {
		for _, q := range p.Targets {
			add(fmt.Sprintf("panel %q", p.Title), q.Expr)
		}
	}
	for _, v := range d.Templating.List {
		b, err := json.Marshal(v.Query)
		require.NoError(t, err)
		add("variable "+v.Name, string(b))
	}
	require.NotEmpty(t, out)
	return out
}

// TestJobLabelsMatchTheServices: the job a rule or panel selects is the
// app.kubernetes.io/name of a metrics Service its ServiceMonitor takes as
// jobLabel, and each Service selects the pods of deploy/ by their labels and
// their port `health`.
func TestJobLabelsMatchTheServices(t *testing.T) {
	objs := monitoring(t)
	jobs := map[string]bool{}
	for _, sm := range objs {
		if sm.GetKind() != "ServiceMonitor" {
			continue
		}
		jobLabel, _, _ := unstructured.NestedString(sm.Object, "spec", "jobLabel")
		selector, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
		require.NotEmpty(t, selector, "ServiceMonitor %s selects nothing", sm.GetName())
		var matched int
		for _, svc := range objs {
			if svc.GetKind() != "Service" || !subset(selector, svc.GetLabels()) {
				continue
			}
			matched++
			job := svc.GetLabels()[jobLabel]
			require.NotEmpty(t, job, "Service %s has no label %q (ServiceMonitor %s's jobLabel)", svc.GetName(), jobLabel, sm.GetName())
			jobs[job] = true
		}
		assert.Equal(t, 1, matched, "ServiceMonitor %s selects one Service", sm.GetName())
	}
	assert.Equal(t, map[string]bool{controllerName: true, workerName: true}, jobs)
	for _, u := range usedSeries(t) {
		if u.job != "" {
			assert.True(t, jobs[u.job], "%s selects job %q, which no ServiceMonitor scrapes", u.where, u.job)
		}
	}

	// The Services reach the pods deploy/ runs, on their port `health`.
	base := render(t, repoPath(t, "deploy"))
	for _, name := range []string{controllerName, workerName} {
		svc := object(t, objs, "Service", name+"-metrics")
		selector, _, _ := unstructured.NestedStringMap(svc.Object, "spec", "selector")
		var pods int
		for _, w := range base {
			if w.GetKind() != "Deployment" && w.GetKind() != "DaemonSet" {
				continue
			}
			labels, _, _ := unstructured.NestedStringMap(w.Object, "spec", "template", "metadata", "labels")
			if !subset(selector, labels) {
				continue
			}
			pods++
			containers, _, _ := unstructured.NestedSlice(w.Object, "spec", "template", "spec", "containers")
			var ports []string
			for _, c := range containers {
				ps, _, _ := unstructured.NestedSlice(c.(map[string]any), "ports")
				for _, p := range ps {
					ports = append(ports, fmt.Sprintf("%v:%v", p.(map[string]any)["name"], p.(map[string]any)["containerPort"]))
				}
			}
			assert.Contains(t, ports, "health:8081", "%s %s serves /metrics on its port health", w.GetKind(), w.GetName())
		}
		assert.Equal(t, 1, pods, "Service %s selects the pods of one workload of deploy/", svc.GetName())
		ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
		require.Len(t, ports, 1)
		assert.Equal(t, "health", ports[0].(map[string]any)["targetPort"], "Service %s targets the pods' port health", svc.GetName())
		assert.Equal(t, namespace, svc.GetNamespace())
	}
}

func subset(sel, labels map[string]string) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
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
