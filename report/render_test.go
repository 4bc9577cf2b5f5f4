package report_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/report"
)

var update = flag.Bool("update", false, "rewrite the golden pages in testdata")

// goldenHistories are the pages kept in testdata: read them in a browser
// to see what a change does to the report.
func goldenHistories() map[string]*hist {
	all := len(events.NodeSteps)
	stalled := planned("node-2", "node-3", "node-1")
	at := stalled.steps("node-2", 0, 40, 3)
	stalled.node("node-2", at, events.VolumeStateChanged{Volume: "pvc-000", To: events.VolumePending})
	stalled.node("node-2", at+5, events.VolumeStateChanged{Volume: "pvc-000", From: events.VolumePending, To: events.VolumeSwitchingOver, TargetNode: "node-1", Message: "target moving to node-1"})
	stalled.node("node-2", at+300, events.NodeStalled{Step: sw, Volume: "pvc-000", Reason: "SwitchoverFailing", Message: "volume pvc-000: Longhorn keeps failing to switch its target to node-1"})
	stalled.node("node-2", at+900, events.VolumeStateChanged{Volume: "pvc-000", From: events.VolumeSwitchingOver, To: events.VolumeSwitchedOver, TargetNode: "node-1"})
	stalled.node("node-2", at+900, events.NodeResumed{Step: sw, Message: "step completed"})
	at = stalled.to("node-2", at+900, 30, sw, events.NodeSwitchingBack)
	stalled.node("node-2", at+20, events.VolumeStateChanged{Volume: "pvc-000", From: events.VolumeSwitchedOver, To: events.VolumeSwitchingBack})
	stalled.node("node-2", at+40, events.VolumeStateChanged{Volume: "pvc-000", From: events.VolumeSwitchingBack, To: events.VolumeSwitchedBack, TargetNode: "node-2"})
	at = stalled.to("node-2", at+40, 20, events.NodeSwitchingBack, events.NodeFinalizing)
	stalled.node("node-2", at+10, events.NodeUpgradeCompleted{Message: "node upgrade completed"})
	stalled.mgr(at+10, events.NodeFinished{Node: "node-2", State: events.NodeCompleted})
	at = stalled.steps("node-3", at+10, 25, all)
	at = stalled.steps("node-1", at, 35, all)
	stalled.mgr(at, events.UpgradeCompleted{Message: "upgraded 3 node(s) to im:v2"})

	cancelled := planned("n1", "n2")
	at = cancelled.steps("n1", 0, 50, all)
	cancelled.mgr(at+10, events.UpgradeHeld{Reason: "OtherUpgraderActive", Message: "Longhorn's own upgrader is on"})
	cancelled.mgr(at+110, events.UpgradeReleased{Message: "it is off"})
	at = cancelled.steps("n2", at+120, 30, 3)
	cancelled.node("n2", at+1, events.NodeStateChanged{From: events.NodeInitializing, To: sw})
	cancelled.mgr(at+40, events.CancelRequested{Reason: "manager deleted"})
	cancelled.node("n2", at+41, events.NodeCancelRequested{Reason: "manager deleted"})
	cancelled.node("n2", at+90, events.NodeUpgradeCancelled{Step: sw, Message: "every target back where it was"})
	cancelled.mgr(at+91, events.NodeFinished{Node: "n2", State: events.NodeCancelled})
	cancelled.mgr(at+92, events.UpgradeCancelled{Message: "safe point reached", Node: "n2"})

	failed := planned("n1", "n2")
	at = failed.steps("n1", 0, 20, 4)
	failed.node("n1", at+200, events.NodeUpgradeFailed{Step: swim, Reason: "InstanceManagerNotRunning", Message: "im-n1 <crashlooping> & gone"})
	failed.mgr(at+201, events.NodeFinished{Node: "n1", State: events.NodeError})
	failed.mgr(at+202, events.UpgradeFailed{Reason: "NodeUpgradeFailed", Message: "n1 failed", Node: "n1"})
	return map[string]*hist{"stalled": stalled, "cancelled": cancelled, "failed": failed}
}

// external is any way a page could reach outside itself.
var external = regexp.MustCompile(`(?i)https?:|<script[^>]*\bsrc|<link|<img|<iframe|@import|url\(`)

func TestRenderGolden(t *testing.T) {
	for name, h := range goldenHistories() {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			require.NoError(t, report.Render(&out, report.BuildTimeline(h.out)))
			assert.NotRegexp(t, external, out.String(), "the page is self-contained")
			path := filepath.Join("testdata", name+".html")
			if *update {
				require.NoError(t, os.WriteFile(path, out.Bytes(), 0o644))
			}
			want, err := os.ReadFile(path)
			require.NoError(t, err, "go test ./report -update writes it")
			assert.Equal(t, string(want), out.String(), "go test ./report -update rewrites %s", path)
		})
	}
}

func TestRenderMarksWhatTheTestsLookFor(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, report.Render(&out, report.BuildTimeline(goldenHistories()["stalled"].out)))
	page := out.String()
	assert.Len(t, regexp.MustCompile(`<div class="row" data-node=`).FindAllString(page, -1), 3)
	assert.Len(t, regexp.MustCompile(`<div class="bar s\d" data-node="node-2"`).FindAllString(page, -1), len(events.NodeSteps))
	assert.Regexp(t, `data-node="node-2" data-step="switching-over" data-stalled="true"`, page)
	assert.Regexp(t, `class="stall" data-node="node-2" data-step="switching-over" style="left:[0-9.]+%;width:[0-9.]+%" title="node-2 STALLED in switching-over for 600ms: SwitchoverFailing\nvolume pvc-000: Longhorn keeps failing`, page)
}

func TestRenderEscapesMessages(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, report.Render(&out, report.BuildTimeline(goldenHistories()["failed"].out)))
	assert.NotContains(t, out.String(), "<crashlooping>")
	assert.Contains(t, out.String(), "im-n1 &lt;crashlooping&gt; &amp; gone")
}

// TestRenderShowsTheWorkloadsMoved: a node that moved its workloads shows
// each pod, how it was moved and what it held there; a history without
// moves has no such section.
func TestRenderShowsTheWorkloadsMoved(t *testing.T) {
	h := &hist{}
	h.node("node-1", 0, events.NodeUpgradeStarted{Node: "node-1", DataEngine: "v2", InstanceManagerImage: "im:2", Attempt: 1,
		InitiatorPolicy: events.InitiatorPolicyMoveWorkloads})
	h.node("node-1", 10, events.NodeTainted{Key: "k"})
	h.node("node-1", 11, events.PodMoved{Pod: "app/web-0", UID: "u1", Volumes: []string{"pvc-1", "pvc-2"}})
	h.node("node-1", 12, events.PodMoved{Pod: "longhorn-system/share-manager-pvc-3", UID: "u2", Volumes: []string{"pvc-3"}, Restart: true})
	tl := report.BuildTimeline(h.out)
	require.Len(t, tl.Nodes, 1)
	require.Len(t, tl.Nodes[0].Moved, 2)
	assert.Equal(t, report.PodMove{At: ms(11), Pod: "app/web-0", Volumes: []string{"pvc-1", "pvc-2"}}, tl.Nodes[0].Moved[0])
	var out bytes.Buffer
	require.NoError(t, report.Render(&out, tl))
	page := out.String()
	assert.Contains(t, page, `<section id="workloads">`)
	assert.Regexp(t, `data-pod="app/web-0"><td>[^<]+</td><td>node-1</td><td>app/web-0</td><td>evicted</td><td>pvc-1, pvc-2</td>`, page)
	assert.Contains(t, page, "share-manager restarted")

	out.Reset()
	require.NoError(t, report.Render(&out, report.BuildTimeline(goldenHistories()["stalled"].out)))
	assert.NotContains(t, out.String(), `<section id="workloads">`)
}

// TestRenderShowsTheRebuilds: a node whose rebuilds were planned shows
// their bytes (expected and whole), how many were hashed and over, how
// long they were seen, and its temporary replicas; a history without
// rebuilds has no such section.
func TestRenderShowsTheRebuilds(t *testing.T) {
	const gib = int64(1) << 30
	h := &hist{}
	h.node("node-1", 0, events.NodeUpgradeStarted{Node: "node-1", DataEngine: "v2", InstanceManagerImage: "im:2", Attempt: 1})
	h.node("node-1", 1, events.VolumeStateChanged{Volume: "pvc-1", To: events.VolumePending})
	h.node("node-1", 2, events.VolumeStateChanged{Volume: "pvc-2", To: events.VolumePending})
	h.node("node-1", 3, events.TemporaryReplicaRequested{Volume: "pvc-1", NumberOfReplicas: 2, Replicas: []string{"pvc-1-r-1", "pvc-1-r-2"}, At: ms(3), Deadline: ms(60000)})
	h.node("node-1", 4, events.ReplicaCountRaised{Volume: "pvc-1", NumberOfReplicas: 2, Raised: 3})
	h.node("node-1", 5, events.TemporaryReplicaAdded{Volume: "pvc-1", Replica: "pvc-1-r-3", Node: "node-3"})
	h.node("node-1", 10, events.RebuildPlanned{Volume: "pvc-1", Hashed: true, ExpectedBytes: gib, FullBytes: 100 * gib})
	h.node("node-1", 11, events.RebuildPlanned{Volume: "pvc-2", Reason: "HashingTimedOut", ExpectedBytes: 50 * gib, FullBytes: 50 * gib})
	h.node("node-1", 20, events.RebuildStarted{Volume: "pvc-1", Replica: "r", Node: "node-1", At: ms(20)})
	h.node("node-1", 1520, events.RebuildFinished{Volume: "pvc-1", At: ms(1520)})
	tl := report.BuildTimeline(h.out)
	require.Len(t, tl.Nodes, 1)
	assert.Equal(t, &report.Rebuild{Volumes: 2, Hashed: 1, Finished: 1, Expected: 51 * gib, Full: 150 * gib, First: ms(20), Last: ms(1520), Temporary: 1}, tl.Nodes[0].Rebuild)
	var out bytes.Buffer
	require.NoError(t, report.Render(&out, tl))
	assert.Regexp(t, `<tr class="rebuild" data-node="node-1"><td>node-1</td><td class="num">2 \(1 over\)</td><td class="num">1</td><td class="num">51.0 GiB</td><td class="num">150 GiB</td><td class="num">1.500s</td><td class="num">1</td></tr>`, out.String())

	out.Reset()
	require.NoError(t, report.Render(&out, report.BuildTimeline(goldenHistories()["stalled"].out)))
	assert.NotContains(t, out.String(), `<section id="rebuilds">`)
}
