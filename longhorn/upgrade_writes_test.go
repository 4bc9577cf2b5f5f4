package longhorn_test

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/longhorn"
	"github.com/switchback-dev/switchback/sim"
	"github.com/switchback-dev/switchback/test/harness/enginetest"
	"github.com/switchback-dev/switchback/test/harness/goldentest"
)

// TestInPlaceWriteSequence: on a Longhorn that updates IMs in place
// (experimental, its physics not established), what is proven is the exact
// sequence of writes the adapter makes to Longhorn's objects: scheduling
// off, snapshots, replicas failed, the controller's records of the targets
// away, engines moved, the IM's image set, engines moved back, scheduling
// restored, snapshots removed (kept through the switch-overs by the guard,
// as installed), the records removed. Run with
// -update to rewrite testdata/inplace-writes.golden.
func TestInPlaceWriteSequence(t *testing.T) {
	s := inPlaceLayout(t)
	writes := newWriteLog()
	c := newClusterWith(t, s, clusterOptions{
		platform: &dataplane.Platform{Profile: dataplane.ProfileInPlace, Evidence: "told by the test"},
		log:      slog.New(writes),
		guard:    true,
	})
	was := recordBefore(t, c)
	e := enginetest.Start(t, c.plane, enginetest.Options{})
	m := ref("in-place")
	e.Request(m, "n1")
	completed(t, e, m)
	was.restored(t, c)
	assert.Zero(t, s.IOStats().Failed, "the in-place physics the simulator assumes: %s", s.IOStats())

	goldentest.Compare(t, filepath.Join("testdata", "inplace-writes.golden"), writes.String(), *update, "the writes the upgrade made, in order (each phase of snapshot writes sorted)")
}

// inPlaceLayout is the simulated cluster of the in-place write sequence:
// a Longhorn that updates IMs in place, two nodes, vol-a attached on n1
// with its engine there, vol-b attached on n2 with its engine on n1.
func inPlaceLayout(t *testing.T) *sim.Sim {
	t.Helper()
	cfg := latencies
	cfg.Profile = dataplane.ProfileInPlace
	s := sim.New(cfg)
	for _, n := range []string{"n1", "n2"} {
		require.NoError(t, s.AddNode(n))
	}
	require.NoError(t, s.AddVolume("vol-a", sim.EngineV2, []string{"n1", "n2"}, "n1"))
	require.NoError(t, s.AddVolumeSpec(sim.VolumeSpec{Name: "vol-b", ReplicasOn: []string{"n1", "n2"}, AttachedTo: "n2", EngineOn: "n1"}))
	return s
}

// writeLog is a slog handler keeping the adapter's write lines (resource,
// object, action) in order; the snapshot writes of one phase, made at once,
// sorted. The controller's writes (the records of targets away, the
// hashing requests) are listed apart, sorted, at the end: it makes each as
// it sees the volume's change in the history, while the worker goes on
// with other volumes (the worker's move of a target waits for its record;
// the policy tests prove a move without one is refused).
type writeLog struct {
	goldentest.Lines
	mu      sync.Mutex
	records []string
}

// String is the log as testdata/inplace-writes.golden has it.
func (w *writeLog) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.records) == 0 {
		return w.Lines.String()
	}
	records := slices.Sorted(slices.Values(w.records))
	return w.Lines.String() + "# and the controller's writes, sorted: each record of a target away set before its target moves, removed once it is home; each hashing request before the volume's replica is failed; the snapshots removed once the last node completed\n" +
		strings.Join(records, "\n") + "\n"
}

// newWriteLog returns an empty log headed by what its order means, as
// testdata/inplace-writes.golden has it.
func newWriteLog() *writeLog {
	w := &writeLog{}
	w.Add("# writes in order; the snapshot writes of one phase are made at once and listed sorted")
	return w
}

func (w *writeLog) Enabled(context.Context, slog.Level) bool { return true }
func (w *writeLog) WithAttrs([]slog.Attr) slog.Handler       { return w }
func (w *writeLog) WithGroup(string) slog.Handler            { return w }
func (w *writeLog) Handle(_ context.Context, r slog.Record) error {
	var verb string
	switch r.Message {
	case "longhorn object patched":
		verb = "patch"
	case "longhorn object deleted":
		verb = "delete"
	case "longhorn snapshot created":
		verb = "create"
	default:
		return nil
	}
	attrs := map[string]string{}
	r.Attrs(func(a slog.Attr) bool {
		attrs[a.Key] = a.Value.String()
		return true
	})
	line := fmt.Sprintf("%s %s %s: %s", verb, attrs["resource"], attrs["name"], attrs["action"])
	if verb == "create" {
		line = fmt.Sprintf("create snapshots.longhorn.io %s: snapshot %s of %s", attrs["object"], attrs["snapshot"], attrs["volume"])
	}
	if strings.Contains(attrs["action"], " annotation "+longhorn.TargetAwayAnnotation) {
		w.mu.Lock()
		w.records = append(w.records, line)
		w.mu.Unlock()
		return nil
	}
	if strings.HasPrefix(attrs["action"], "set spec.snapshotHashingRequestedAt=") || (verb == "delete" && attrs["resource"] == "snapshots.longhorn.io") {
		// The controller's too: the hashing requests (at the worker's
		// time, left out) and the removal of the snapshots at the end.
		line, _, _ = strings.Cut(line, "=")
		w.mu.Lock()
		w.records = append(w.records, line)
		w.mu.Unlock()
		return nil
	}
	if attrs["resource"] == "snapshots.longhorn.io" || verb == "create" {
		// The worker takes and removes snapshots several at once: each such
		// phase is recorded sorted, between the writes around it.
		w.AddSorted(verb+" snapshots", line)
	} else {
		w.Add(line)
	}
	return nil
}

// schedulingProbe records, at each replica-scheduling write the upgrade
// makes, whether the node already runs an instance manager of the target
// image (read through the same adapter at that moment).
type schedulingProbe struct {
	dataplane.DataPlane
	image string
	mu    sync.Mutex
	calls []schedulingCall
}

type schedulingCall struct {
	node         string
	allow        bool
	newIMRunning bool
}

func (p *schedulingProbe) SetReplicaScheduling(ctx context.Context, node string, allow bool) error {
	ims, err := p.DataPlane.InstanceManagers(ctx, node)
	if err != nil {
		return err
	}
	running := slices.ContainsFunc(ims, func(im dataplane.InstanceManager) bool {
		return im.Image == p.image && im.State == dataplane.IMRunning
	})
	p.mu.Lock()
	p.calls = append(p.calls, schedulingCall{node: node, allow: allow, newIMRunning: running})
	p.mu.Unlock()
	return p.DataPlane.SetReplicaScheduling(ctx, node, allow)
}

// TestSchedulingOffExactlyUntilTheNewIMRuns: on the storage layout (n3 not
// scheduling replicas before the upgrade), each storage node's replica
// scheduling is turned off before its new instance manager runs and turned
// back on only once it runs; a node that did not schedule is never written;
// afterwards each node has exactly its own value, and the rebuilds that
// needed the restored scheduling completed.
func TestSchedulingOffExactlyUntilTheNewIMRuns(t *testing.T) {
	s, storage := storageLayout(t, latencies)
	c := newCluster(t, s)
	was := recordBefore(t, c)
	probe := &schedulingProbe{DataPlane: c.plane, image: sim.NewIMImage}
	e := enginetest.Start(t, probe, enginetest.Options{})
	m := ref("scheduling")
	e.RequestSpec(m, storageSpec(storage))
	completed(t, e, m)

	byNode := map[string][]schedulingCall{}
	for _, call := range probe.calls {
		byNode[call.node] = append(byNode[call.node], call)
	}
	for _, n := range []string{"n1", "n2"} {
		calls := byNode[n]
		require.NotEmpty(t, calls, n)
		assert.Equal(t, schedulingCall{node: n, allow: false, newIMRunning: false}, calls[0], "%s: off before its new IM runs", n)
		last := calls[len(calls)-1]
		assert.Equal(t, schedulingCall{node: n, allow: true, newIMRunning: true}, last, "%s: back on only once its new IM runs", n)
		for _, call := range calls[1 : len(calls)-1] {
			assert.False(t, call.allow, "%s: never on in between: %+v", n, calls)
		}
	}
	assert.Empty(t, byNode["n3"], "a node that did not schedule replicas is never written")
	c.waitInStep("after the upgrade")
	was.restored(t, c)
	assert.Zero(t, s.IOStats().Failed, "%s", s.IOStats())
}
