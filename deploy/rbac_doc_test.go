package deploy

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
)

// grant is one (API group, resource) a service account may act on.
type grant struct{ group, resource string }

// TestRBACTableMatchesTheManifests keeps longhorn/README.md's RBAC table
// (what the data plane needs of Longhorn's resources, core nodes and core
// events) equal to what deploy/rbac grants the worker and the controller.
func TestRBACTableMatchesTheManifests(t *testing.T) {
	raw, err := os.ReadFile(repoPath(t, "longhorn", "README.md"))
	require.NoError(t, err)
	documented := map[string]map[grant][]string{"worker": {}, "controller": {}}
	inTable := false
	cell := regexp.MustCompile("`([a-z/]+)(\\.longhorn\\.io)?`")
	for _, line := range strings.Split(string(raw), "\n") {
		switch {
		case strings.HasPrefix(line, "| resource | worker | controller |"):
			inTable = true
			continue
		case inTable && !strings.HasPrefix(line, "|"):
			inTable = false
		}
		if !inTable || strings.HasPrefix(line, "|---") {
			continue
		}
		cols := strings.Split(strings.Trim(line, "|"), "|")
		require.Len(t, cols, 3, "row %q", line)
		group := "longhorn.io"
		for prefix, g := range map[string]string{"core ": "", "policy ": "policy", "apps ": "apps"} {
			if strings.HasPrefix(strings.TrimSpace(cols[0]), prefix) {
				group = g
			}
		}
		for _, m := range cell.FindAllStringSubmatch(cols[0], -1) {
			g := grant{group, m[1]}
			documented["worker"][g] = verbs(cols[1])
			documented["controller"][g] = verbs(cols[2])
		}
	}
	require.NotEmpty(t, documented["worker"], "the table was found")

	m := render(t, repoPath(t, "deploy"))
	for _, sa := range []string{"worker", "controller"} {
		granted := map[grant][]string{}
		for _, kind := range []string{"Role", "ClusterRole"} {
			for _, obj := range m.ofKind(kind) {
				if obj.GetName() != "switchback-"+sa {
					continue
				}
				role := decode[rbacv1.ClusterRole](t, obj.Object)
				for _, r := range role.Rules {
					for _, g := range r.APIGroups {
						for _, res := range r.Resources {
							k := grant{g, res}
							if inScope(k) {
								granted[k] = sortedUnion(granted[k], r.Verbs)
							}
						}
					}
				}
			}
		}
		want := map[grant][]string{}
		for g, v := range documented[sa] {
			if len(v) > 0 {
				want[g] = v
			}
		}
		assert.Equal(t, want, granted, "longhorn/README.md's RBAC table, %s column, is what deploy/rbac grants", sa)
	}
}

// inScope: the table's domain, Longhorn's resources (not Switchback's own
// CRDs, in the same group), and the Kubernetes resources of the data plane:
// nodes, events and what moving a node's workloads reads and writes.
func inScope(g grant) bool {
	switch g.group {
	case "longhorn.io":
		return !strings.Contains(g.resource, "dataengineupgrade")
	case "":
		return slices.Contains([]string{"nodes", "events", "pods", "pods/eviction", "persistentvolumeclaims", "persistentvolumes"}, g.resource)
	case "policy":
		return g.resource == "poddisruptionbudgets"
	case "apps":
		return slices.Contains([]string{"replicasets", "statefulsets", "daemonsets"}, g.resource)
	}
	return false
}

// verbs reads a table cell: "get, list (why)" → [get list]; "—" → none.
func verbs(cell string) []string {
	if i := strings.Index(cell, "("); i >= 0 {
		cell = cell[:i]
	}
	var out []string
	for _, v := range strings.Split(cell, ",") {
		if v = strings.TrimSpace(v); v != "" && v != "—" {
			out = append(out, v)
		}
	}
	slices.Sort(out)
	return out
}

func sortedUnion(a, b []string) []string {
	out := slices.Concat(a, b)
	slices.Sort(out)
	return slices.Compact(out)
}
