package badinput_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/aggregate/manager"
	"github.com/switchback-dev/switchback/api/v1beta2"
	"github.com/switchback-dev/switchback/commands"
	"github.com/switchback-dev/switchback/commands/intake"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/eventstore"
	"github.com/switchback-dev/switchback/metrics"
	"github.com/switchback-dev/switchback/natsembed"
	"github.com/switchback-dev/switchback/nodequeue"
	"github.com/switchback-dev/switchback/nodeworker"
	"github.com/switchback-dev/switchback/orchestrator"
	"github.com/switchback-dev/switchback/replay"
	"github.com/switchback-dev/switchback/sim"
	"github.com/switchback-dev/switchback/test/harness/syncbuf"
	"github.com/switchback-dev/switchback/topology"
)

// node is one process of the engine on a store directory that outlives it:
// an embedded server and the controller's and workers' components.
type engineRun struct {
	srv    *natsembed.Server
	store  *eventstore.Store
	x      *commands.Executor // the intake's: requests, and loads
	js     jetstream.JetStream
	log    *syncbuf.Buffer
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// startEngine starts a server on dir (warnings and errors kept in log) with
// the orchestrator and one worker per node of cluster, each on its own
// connection.
func startEngine(t *testing.T, dir string, cluster *sim.Sim) *engineRun {
	t.Helper()
	r := &engineRun{log: &syncbuf.Buffer{}}
	srv, err := natsembed.Start(natsembed.Options{StoreDir: dir,
		Logger: slog.New(slog.NewTextHandler(r.log, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	require.NoError(t, err, "the server starts on the store")
	r.srv = srv
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	open := func() (*eventstore.Store, *nodequeue.Queue, jetstream.JetStream) {
		nc, err := srv.Connect()
		require.NoError(t, err)
		js, err := jetstream.New(nc)
		require.NoError(t, err)
		st, err := eventstore.Open(ctx, js, eventstore.Config{})
		require.NoError(t, err)
		q, err := nodequeue.Open(ctx, js, nodequeue.Config{AckWait: 2 * time.Second})
		require.NoError(t, err)
		return st, q, js
	}
	var q *nodequeue.Queue
	r.store, q, r.js = open()
	r.x = commands.New(commands.Config{Store: r.store, Source: events.SourceIntake})
	o, err := orchestrator.New(orchestrator.Config{Store: r.store, Queue: q, Cluster: cluster, Log: testLog(t)})
	require.NoError(t, err)
	r.wg.Go(func() { _ = o.Run(ctx) })
	nodes, err := cluster.Nodes(ctx)
	require.NoError(t, err)
	for _, n := range nodes {
		st, wq, _ := open()
		wk, err := nodeworker.New(nodeworker.Config{Node: n.Name, Store: st, Queue: wq, DataPlane: cluster, Log: testLog(t),
			PollInterval: 5 * time.Millisecond, StallAfter: 2 * time.Second, FailAfter: 5 * time.Second})
		require.NoError(t, err)
		r.wg.Go(func() { _ = wk.Run(ctx) })
	}
	t.Cleanup(r.stop)
	return r
}

// stop stops the components, then the server (clients first).
func (r *engineRun) stop() {
	r.cancel()
	r.wg.Wait()
	r.srv.Shutdown()
}

func (r *engineRun) manager(t *testing.T, ref events.ManagerRef) manager.State {
	t.Helper()
	l, err := r.x.Managers.Load(context.Background(), events.ManagerAggregate(ref))
	require.NoError(t, err)
	return l.State
}

// TestTruncatedStoreFileOnRestart damages the event stream's file store
// between two runs of the server: the last message block loses its tail,
// as after a torn write or a full disk. What JetStream 2.15 does: on start
// it finds the block shorter than its index ("Stream state outdated, last
// block has additional entries, will rebuild"), rebuilds the stream state
// from the blocks, and turns each lost message into a deleted sequence:
// LastSeq stays where it was (new appends get new numbers, so consumers'
// positions stay valid), Msgs drops and NumDeleted grows. The stream denies
// deletes, so on this stream NumDeleted > 0 can only mean lost history:
// eventstore.CheckHistory names the lost sequences (and sets the
// switchback_stream_lost_events metric), and replay reports them as Missing.
func TestTruncatedStoreFileOnRestart(t *testing.T) {
	c := newCase(t, "store: last .blk of the event stream truncated before a restart",
		"server recovers; appends continue; replay shows what is left AND the loss is reported")
	dir := t.TempDir()
	cluster := threeNodes(t)
	ref := events.ManagerRef{Namespace: "longhorn-system", Name: "before-crash", UID: "uid-before"}

	first := startEngine(t, dir, cluster)
	_, err := intake.RequestUpgrade(context.Background(), first.x, ref, 1, v1beta2.DataEngineUpgradeManagerSpec{DataEngine: v1beta2.DataEngineTypeV2})
	require.NoError(t, err)
	st := waitFor(t, 30*time.Second, "the first upgrade ends", func() (manager.State, error) { return first.manager(t, ref), nil }, terminal)
	require.Equal(t, events.ManagerCompleted, st.State)
	acked, err := first.store.LastSequence(context.Background())
	require.NoError(t, err)
	before, err := replay.Run(context.Background(), first.store, replay.Options{})
	require.NoError(t, err)
	first.stop()

	// Cut into the last message of the newest block.
	blocks, err := filepath.Glob(filepath.Join(dir, "jetstream", "$G", "streams", topology.EventStream, "msgs", "*.blk"))
	require.NoError(t, err)
	require.NotEmpty(t, blocks)
	slices.SortFunc(blocks, func(a, b string) int { return blockIndex(a) - blockIndex(b) })
	last := blocks[len(blocks)-1]
	fi, err := os.Stat(last)
	require.NoError(t, err)
	require.NoError(t, os.Truncate(last, fi.Size()-64))

	second := startEngine(t, dir, cluster)
	ctx := context.Background()
	s, err := second.js.Stream(ctx, topology.EventStream)
	require.NoError(t, err)
	info, err := s.Info(ctx)
	require.NoError(t, err)
	lost := int(acked) - int(info.State.Msgs)
	t.Logf("before: last seq %d; after: %+v; server log:\n%s", acked, info.State, second.log.String())
	require.Positive(t, lost, "the cut lost acknowledged events")
	assert.Equal(t, acked, info.State.LastSeq, "sequences are not reused")
	assert.Equal(t, lost, info.State.NumDeleted, "JetStream reports each lost message as a deleted sequence")
	assert.Contains(t, second.log.String(), "will rebuild", "the server logs the rebuild")

	// Replay reads what is left.
	after, err := replay.Run(ctx, second.store, replay.Options{})
	require.NoError(t, err)
	require.Len(t, after.Upgrades, 1)
	left := after.Upgrades[0]
	assert.Less(t, left.LastSequence, before.Upgrades[0].LastSequence)
	assert.Empty(t, left.Refused, "what is left folds cleanly")

	// Appends keep working, at new sequences, and the durable consumers
	// (orchestrator) see them.
	next := events.ManagerRef{Namespace: "longhorn-system", Name: "after-crash", UID: "uid-after"}
	res, err := intake.RequestUpgrade(ctx, second.x, next, 1, v1beta2.DataEngineUpgradeManagerSpec{DataEngine: v1beta2.DataEngineTypeV2})
	require.NoError(t, err)
	assert.Greater(t, res.Version, acked, "a new append goes after the old last sequence")
	st2 := waitFor(t, 30*time.Second, "the orchestrator handles the new upgrade", func() (manager.State, error) { return second.manager(t, next), nil },
		func(s manager.State) bool { return len(s.Prechecks) > 0 })

	// The loss is reported: the stream check names the lost sequences and
	// sets the metric, and replay reports them (so replay --verify fails).
	gaps, err := second.store.CheckHistory(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(lost), gaps.Count(), "every lost event is named")
	require.NotEmpty(t, gaps.Missing)
	assert.Equal(t, acked, gaps.Missing[len(gaps.Missing)-1].Last, "the tail of the last block was cut")
	lostErr := gaps.Err()
	var lhe *eventstore.LostHistoryError
	require.ErrorAs(t, lostErr, &lhe)
	assert.Contains(t, lostErr.Error(), gaps.String())
	var gauge dto.Metric
	require.NoError(t, metrics.StreamLostEvents.WithLabelValues(topology.EventStream).Write(&gauge))
	assert.Equal(t, float64(lost), gauge.GetGauge().GetValue(), "switchback_stream_lost_events")
	assert.Equal(t, gaps.Missing, after.Missing, "replay finds the same gaps in its scan")
	require.Error(t, after.MissingErr())
	var table strings.Builder
	require.NoError(t, after.WriteTable(&table))
	assert.Contains(t, table.String(), "HISTORY INCOMPLETE")
	// A replay of that manager alone (a filtered scan) reports them too.
	one, err := replay.Run(ctx, second.store, replay.Options{Manager: ref.Name, Namespace: ref.Namespace})
	require.NoError(t, err)
	assert.Equal(t, gaps.Missing, one.Missing)

	got := "lost seq " + gaps.String() + " (" + strconv.Itoa(lost) + " event(s)): named by CheckHistory, metric " +
		"switchback_stream_lost_events=" + strconv.Itoa(lost) + ", replay Missing " + after.MissingErr().Error() +
		"; server recovered (msgs " + strconv.FormatUint(info.State.Msgs, 10) + ", last seq " + strconv.FormatUint(info.State.LastSeq, 10) +
		", NumDeleted " + strconv.Itoa(info.State.NumDeleted) + "); replay folds to seq " + strconv.FormatUint(left.LastSequence, 10) +
		", '" + string(left.Manager.State) + "'; new append at seq " + strconv.FormatUint(res.Version, 10) + ", new upgrade " + string(st2.State)
	if left.Manager.State != events.ManagerCompleted {
		got += " (" + failedChecks(st2) + ")"
	}
	c.Got("%s", got)
}

func blockIndex(path string) int {
	n, _ := strconv.Atoi(strings.TrimSuffix(filepath.Base(path), ".blk"))
	return n
}

func failedChecks(s manager.State) string {
	var out []string
	for _, p := range s.Prechecks {
		if !p.Passed {
			out = append(out, p.Check+": "+p.Message)
		}
	}
	if len(out) == 0 {
		return "all prechecks passed"
	}
	return strings.Join(out, "; ")
}
