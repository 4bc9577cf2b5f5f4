package monitoring

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

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
