package main

import (
	"context"
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
	"golang.org/x/net/html"

	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/test/harness/testenv"
)

// chromium finds the headless browser the report is checked in (the
// Debian package `make setup` installs). CI must not skip for want of it:
// only SKIP_CHROMIUM=1 does.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-headless-shell"} {
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	if os.Getenv("SKIP_CHROMIUM") == "1" {
		t.Skip("SKIP_CHROMIUM=1: the report is not checked in a browser")
	}
	t.Fatal("chromium is not installed: `make setup` installs it (apt-get install chromium), or set SKIP_CHROMIUM=1 to skip this test")
	return ""
}

// TestReportOfADemoWithAStallInChromium renders a demo's history and has
// headless Chromium load the page: the DOM it builds has a row per node, a
// bar per step and the stall marked with its message, and the screenshot
// is kept for a person to look at.
func TestReportOfADemoWithAStallInChromium(t *testing.T) {
	browser := chromium(t)
	dir := t.TempDir()
	code, out, errOut := runCmd(t, 2*time.Minute, "demo", "--nodes", "3", "--volumes", "6", "--latency", "10ms",
		"--stuck-volume", "--stall-after", "300ms", "--heal-after", "2s", "--data-dir", dir)
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
	code, history, errOut := runCmd(t, time.Minute, "history", "upgrade-v2", "--data-dir", dir)
	require.Equal(t, 0, code, errOut)
	plan := regexp.MustCompile(`planned\s+\(order (.+?), image`).FindStringSubmatch(history)
	require.NotNil(t, plan, history)
	nodes := strings.Split(plan[1], " → ")

	page := filepath.Join(dir, "upgrade.html")
	code, _, errOut = runCmd(t, time.Minute, "report", "upgrade-v2", "--data-dir", dir, "-o", page)
	require.Equal(t, 0, code, errOut)

	start := time.Now()
	dom := dumpDOM(t, browser, page)
	rows := parseReport(t, dom)
	require.Equal(t, nodes, rowNames(rows), "a row per node, in plan order")
	stalled := false
	for _, r := range rows {
		var steps []events.NodeState
		for _, b := range r.bars {
			steps = append(steps, events.NodeState(b["data-step"]))
			if b["data-stalled"] == "true" && b["data-step"] == string(events.NodeSwitchingOver) {
				stalled = true
				assert.Contains(t, b["title"], "STALLED in switching-over", "the bar's hover says so")
			}
		}
		assert.Equal(t, events.NodeSteps, steps, "node %s: a bar per step", r.node)
	}
	assert.True(t, stalled, "the stuck volume's switch-over bar is marked stalled")
	assert.True(t, slices.ContainsFunc(rows, func(r row) bool {
		return slices.ContainsFunc(r.stalls, func(s map[string]string) bool {
			return s["data-step"] == string(events.NodeSwitchingOver) && strings.Contains(s["title"], "SwitchoverFailing") &&
				strings.Contains(s["title"], "volume pvc-000: Longhorn keeps failing to switch its target")
		})
	}), "the stall is drawn with its message")

	shot := filepath.Join(artifactsDir(t), "report.png")
	screenshot(t, browser, page, shot)
	t.Logf("report screenshot: %s (Chromium took %s for the DOM and the screenshot)", shot, time.Since(start).Round(time.Millisecond))
}

func TestReportCommand(t *testing.T) {
	dir := t.TempDir()
	code, out, errOut := runCmd(t, 2*time.Minute, "demo", "--nodes", "2", "--volumes", "3", "--latency", "5ms", "--data-dir", dir)
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", out, errOut)

	code, page, errOut := runCmd(t, time.Minute, "report", "upgrade-v2", "--data-dir", dir)
	require.Equal(t, 0, code, errOut)
	assert.True(t, strings.HasPrefix(page, "<!DOCTYPE html>"), "the page goes to stdout by default")
	assert.Contains(t, page, "upgrade completed")

	code, page, errOut = runCmd(t, time.Minute, "report", "upgrade-v2", "-n", "longhorn-system", "--data-dir", dir, "--until-seq", "15", "-o", "-")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, page, "cut at --until-seq 15")
	assert.Contains(t, page, "in progress when the history ends")

	code, _, errOut = runCmd(t, time.Minute, "report", "ghost", "--data-dir", dir, "-o", filepath.Join(dir, "ghost.html"))
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, `no events for manager "ghost"`)
	assert.NoFileExists(t, filepath.Join(dir, "ghost.html"))

	code, _, errOut = runCmd(t, time.Minute, "report", "--data-dir", dir)
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "report takes one MANAGER name")
}

// artifactsDir is where a test keeps what a person should see: $ARTIFACTS_DIR,
// else the repository's .cache/artifacts.
func artifactsDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("ARTIFACTS_DIR")
	if dir == "" {
		root, err := testenv.RepoRoot()
		require.NoError(t, err)
		dir = filepath.Join(root, ".cache", "artifacts")
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	return dir
}

// headless runs Chromium on the page with a profile of its own, so that
// runs in parallel (and a desktop browser) do not share one.
func headless(t *testing.T, browser, page string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	args = append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
		"--user-data-dir=" + t.TempDir()}, args...)
	cmd := exec.CommandContext(ctx, browser, append(args, "file://"+page)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "chromium: %s", stderr.String())
	return out
}

func dumpDOM(t *testing.T, browser, page string) string {
	return string(headless(t, browser, page, "--dump-dom"))
}

func screenshot(t *testing.T, browser, page, path string) {
	headless(t, browser, page, "--screenshot="+path, "--window-size=1400,900")
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(b), "\x89PNG"), "a PNG at %s", path)
}

// row is one node's row of the timeline, as the browser built it.
type row struct {
	node         string
	bars, stalls []map[string]string
}

func rowNames(rows []row) []string {
	var out []string
	for _, r := range rows {
		out = append(out, r.node)
	}
	return out
}

// parseReport reads the timeline's rows out of the DOM Chromium dumped, and
// fails on anything that would reach outside the page.
func parseReport(t *testing.T, dom string) []row {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(dom))
	require.NoError(t, err)
	var rows []row
	var walk func(n *html.Node, in *row)
	walk = func(n *html.Node, in *row) {
		if n.Type == html.ElementNode {
			attrs := map[string]string{}
			for _, a := range n.Attr {
				attrs[a.Key] = a.Val
				if a.Key == "src" || a.Key == "href" {
					t.Errorf("the page refers to %s=%q", a.Key, a.Val)
				}
			}
			class := strings.Fields(attrs["class"])
			switch {
			case slices.Contains(class, "row"):
				rows = append(rows, row{node: attrs["data-node"]})
				in = &rows[len(rows)-1]
			case in != nil && slices.Contains(class, "bar"):
				in.bars = append(in.bars, attrs)
			case in != nil && slices.Contains(class, "stall"):
				in.stalls = append(in.stalls, attrs)
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c, in)
		}
	}
	walk(doc, nil)
	return rows
}
