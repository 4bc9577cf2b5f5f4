// Package architecture holds the packages to the layer tables of
// docs/architecture.md.
package architecture

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const module = "github.com/switchback-dev/switchback"

// Kinds of package beside the product's layers (the second table).
const (
	kindBuild       = "build"
	kindTestSupport = "test support"
	kindTests       = "tests"
)

// place is where the tables put a package: a product layer (rank 0 is the
// top) or one of the kinds beside them.
type place struct {
	layer string
	rank  int
	kind  string // "" for a product layer
}

// mayImport says whether a package at p may import one at q, and why not.
func (p place) mayImport(q place) (bool, string) {
	switch {
	case p.kind == "" && q.kind != "":
		return false, "a product package imports a " + q.kind + " package"
	case p.kind == "" && q.rank < p.rank:
		return false, "imports the layer above, " + q.layer
	case p.kind == kindBuild && (q.kind == kindTestSupport || q.kind == kindTests):
		return false, "a build package imports a " + q.kind + " package"
	case p.kind == kindTestSupport && q.kind == kindTests:
		return false, "a test-support package imports a tests package"
	case q.kind == kindTests:
		return false, "nothing imports a tests package"
	}
	return true, ""
}

// TestLayers: every package of the module is named once in
// docs/architecture.md's tables, and imports only what its place allows:
// its own layer and those below it for the product, never a build, test
// support or tests package from the product. Test files may import
// anything; the rule is about what ships.
func TestLayers(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	places := readTables(t, filepath.Join(root, "docs", "architecture.md"))

	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}}|{{join .Imports \",\"}}", "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	require.NoError(t, err, "go list: %s", stderr(err))
	var violations []string
	listed := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		path, imports, _ := strings.Cut(sc.Text(), "|")
		pkg := relative(path)
		listed[pkg] = true
		from, ok := places[pkg]
		if !ok {
			violations = append(violations, pkg+": not in docs/architecture.md's tables: give it its place")
			continue
		}
		for imp := range strings.SplitSeq(imports, ",") {
			if imp != module && !strings.HasPrefix(imp, module+"/") {
				continue
			}
			to, ok := places[relative(imp)]
			if !ok {
				continue // reported as its own package
			}
			if ok, why := from.mayImport(to); !ok {
				violations = append(violations, pkg+" ("+from.name()+") imports "+relative(imp)+" ("+to.name()+"): "+why)
			}
		}
	}
	require.NoError(t, sc.Err())
	for pkg := range places {
		if !listed[pkg] {
			violations = append(violations, pkg+": named in docs/architecture.md but no such package")
		}
	}
	slices.Sort(violations)
	assert.Empty(t, violations, "the packages break docs/architecture.md's layers:\n%s", strings.Join(violations, "\n"))
}

func (p place) name() string {
	if p.kind != "" {
		return p.kind
	}
	return p.layer
}

func relative(path string) string {
	if path == module {
		return "."
	}
	return strings.TrimPrefix(path, module+"/")
}

func stderr(err error) string {
	if exit, ok := err.(*exec.ExitError); ok {
		return string(exit.Stderr)
	}
	return ""
}

var (
	row      = regexp.MustCompile(`^\| ([^|]+) \| ([^|]+) \|`)
	backtick = regexp.MustCompile("`([^`]+)`")
)

// readTables reads the two tables under "## Layers": the product's layers
// in order from the top, then the kinds beside them. Each package may be
// named once.
func readTables(t *testing.T, path string) map[string]place {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	_, text, ok := strings.Cut(string(raw), "\n## Layers")
	require.True(t, ok, "%s has a Layers section", path)
	text, _, _ = strings.Cut(text, "\n## ")
	places := map[string]place{}
	table, rank := 0, 0
	inTable := false
	for line := range strings.SplitSeq(text, "\n") {
		if strings.HasPrefix(line, "|---") {
			continue
		}
		m := row.FindStringSubmatch(line)
		switch {
		case m == nil:
			if inTable {
				table++
			}
			inTable = false
			continue
		case !inTable: // the header
			inTable = true
			continue
		}
		name := strings.TrimSpace(m[1])
		p := place{layer: name, rank: rank}
		if table == 0 {
			rank++
		} else {
			require.Contains(t, []string{kindBuild, kindTestSupport, kindTests}, name, "a kind of package beside the layers")
			p = place{kind: name}
		}
		for _, pkg := range backtick.FindAllStringSubmatch(m[2], -1) {
			_, twice := places[pkg[1]]
			require.False(t, twice, "%s is named twice", pkg[1])
			places[pkg[1]] = p
		}
	}
	require.Equal(t, 2, table, "two tables: the layers, and the packages beside them")
	return places
}
