package replay_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/aggregate/manager"
	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/eventstore"
	"github.com/switchback-dev/switchback/natsembed/natstest"
	"github.com/switchback-dev/switchback/replay"
	"github.com/switchback-dev/switchback/sim"
	"github.com/switchback-dev/switchback/test/harness/enginetest"
	"github.com/switchback-dev/switchback/topology"
)

func upgraded(t *testing.T) (*enginetest.Engine, events.ManagerRef) {
	cluster := sim.New(sim.Config{Profile: dataplane.ProfileInPlace})
	for _, n := range []string{"n1", "n2", "n3"} {
		require.NoError(t, cluster.AddNode(n))
	}
	for i, a := range []string{"n1", "n2", ""} {
		require.NoError(t, cluster.AddVolume(fmt.Sprintf("vol-%d", i), sim.EngineV2, []string{"n1", "n2", "n3"}, a))
	}
	e := enginetest.Start(t, cluster, enginetest.Options{})
	ref := events.ManagerRef{Namespace: "longhorn-system", Name: "replayed", UID: "uid-r"}
	e.Request(ref)
	st := e.WaitManager(ref, 30*time.Second, "terminal", func(s manager.State) bool { return s.Terminal() })
	require.Equal(t, events.ManagerCompleted, st.State)
	return e, ref
}

func TestReplayRebuildsTheUpgrade(t *testing.T) {
	e, ref := upgraded(t)
	res, err := replay.Run(e.Context(), e.Store, replay.Options{})
	require.NoError(t, err)
	require.Len(t, res.Upgrades, 1)
	u := res.Upgrades[0]
	assert.Equal(t, e.Manager(ref), u.Manager, "replay folds exactly what the controller folds")
	for _, n := range u.Manager.Plan {
		assert.Equal(t, e.Node(ref, n), u.Nodes[n])
		assert.Equal(t, events.NodeCompleted, u.Nodes[n].State)
	}

	// Part-way through: the node in flight shows up as in flight.
	var mid uint64
	for _, env := range e.History(ref) {
		if d, ok := env.Data.(events.NodeStateChanged); ok && d.To == events.NodeSwitchingOver {
			mid = env.Sequence
			break
		}
	}
	require.NotZero(t, mid)
	part, err := replay.Run(e.Context(), e.Store, replay.Options{ScanOptions: eventstore.ScanOptions{UntilSeq: mid}})
	require.NoError(t, err)
	pu := part.Upgrades[0]
	assert.Equal(t, events.ManagerUpgrading, pu.Manager.State)
	require.NotEmpty(t, pu.Manager.UpgradingNode)
	assert.Equal(t, events.NodeSwitchingOver, pu.Nodes[pu.Manager.UpgradingNode].State)
	assert.Equal(t, mid, part.LastSequence)
}

func TestReplayOutputs(t *testing.T) {
	e, _ := upgraded(t)
	res, err := replay.Run(e.Context(), e.Store, replay.Options{Manager: "replayed", Namespace: "longhorn-system"})
	require.NoError(t, err)
	var buf bytes.Buffer
	require.NoError(t, res.WriteTable(&buf))
	assert.Contains(t, buf.String(), "longhorn-system/replayed")
	assert.Contains(t, buf.String(), "completed")
	for _, n := range []string{"n1", "n2", "n3"} {
		assert.Regexp(t, `(?m)^  `+n+` +completed +3 `, buf.String(), "a line per node")
	}

	none, err := replay.Run(e.Context(), e.Store, replay.Options{Manager: "nobody"})
	require.NoError(t, err)
	assert.Empty(t, none.Upgrades)
}

func TestHistoryLinesDescribeEveryEvent(t *testing.T) {
	e, ref := upgraded(t)
	for _, env := range e.History(ref) {
		l := replay.Describe(env)
		assert.NotEmpty(t, l.What, "%s", env.Type())
		assert.NotContains(t, l.What, "io.switchback", "every type has a readable line")
		assert.NotEmpty(t, l.String())
	}
}

// TestReplayReportsLostEvents: the stream's store loses an acknowledged
// event (the tail of its last block, cut between two runs of the server),
// then the stream goes on. Every replay whose range covers the lost
// sequence reports it as Missing, filtered or not; a parked message is not
// missing; ranges that do not cover it report nothing.
func TestReplayReportsLostEvents(t *testing.T) {
	dir := t.TempDir()
	srv := natstest.StartAt(t, dir)
	nc, js := natstest.Connect(t, srv)
	c := context.Background()
	s, err := eventstore.Open(c, js, eventstore.Config{})
	require.NoError(t, err)
	m1 := events.ManagerRef{Namespace: "ns", Name: "m1", UID: "uid-1"}
	m2 := events.ManagerRef{Namespace: "ns", Name: "m2", UID: "uid-2"}
	versions := map[events.AggregateID]uint64{}
	add := func(ref events.ManagerRef, msg string) uint64 {
		agg := events.NodeAggregate(ref, "n1")
		v, err := s.Append(c, agg, versions[agg], events.New(agg, events.SourceController, msg, time.Now(), events.NodeResumed{Step: events.NodePending, Message: msg})...)
		require.NoError(t, err)
		versions[agg] = v
		return v
	}
	add(m1, "a")
	add(m2, "b")
	require.NoError(t, nc.Publish(events.NodeAggregate(m2, "n1").Subject(), []byte("garbage"))) // parked, not missing
	require.NoError(t, nc.Flush())
	versions[events.NodeAggregate(m2, "n1")]++
	add(m2, "c")
	lost := add(m1, "lost")
	nc.Close()
	srv.Shutdown()

	blocks, err := filepath.Glob(filepath.Join(dir, "jetstream", "$G", "streams", topology.EventStream, "msgs", "*.blk"))
	require.NoError(t, err)
	require.Len(t, blocks, 1)
	fi, err := os.Stat(blocks[0])
	require.NoError(t, err)
	require.NoError(t, os.Truncate(blocks[0], fi.Size()-64))

	srv2 := natstest.StartAt(t, dir)
	_, js2 := natstest.Connect(t, srv2)
	s, err = eventstore.Open(c, js2, eventstore.Config{})
	require.NoError(t, err)
	h, err := s.Load(c, events.NodeAggregate(m1, "n1"))
	require.NoError(t, err)
	require.Less(t, h.Version, lost, "m1's last event is gone")
	versions[events.NodeAggregate(m1, "n1")] = h.Version
	add(m1, "after")
	last := add(m2, "later")
	gap := []eventstore.SeqRange{{First: lost, Last: lost}}

	for _, tc := range []struct {
		name string
		opts replay.Options
		want []eventstore.SeqRange
	}{
		{"everything", replay.Options{}, gap},
		{"one manager by name (unfiltered scan)", replay.Options{Manager: "m2"}, gap},
		{"one manager (filtered scan)", replay.Options{Manager: "m1", Namespace: "ns"}, gap},
		{"until the lost one", replay.Options{ScanOptions: eventstore.ScanOptions{UntilSeq: lost}}, gap},
		{"before the lost one", replay.Options{ScanOptions: eventstore.ScanOptions{UntilSeq: lost - 1}}, nil},
		{"after the lost one", replay.Options{ScanOptions: eventstore.ScanOptions{FromSeq: lost + 1}}, nil},
		{"past the end", replay.Options{ScanOptions: eventstore.ScanOptions{UntilSeq: last + 100}}, gap},
		{"a filter past the loss", replay.Options{Manager: "m2", Namespace: "ns", ScanOptions: eventstore.ScanOptions{FromSeq: lost + 1}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := replay.Run(c, s, tc.opts)
			require.NoError(t, err)
			assert.Equal(t, tc.want, res.Missing)
			var table bytes.Buffer
			require.NoError(t, res.WriteTable(&table))
			if tc.want == nil {
				assert.NoError(t, res.MissingErr())
				assert.NotContains(t, table.String(), "HISTORY INCOMPLETE")
				return
			}
			assert.ErrorContains(t, res.MissingErr(), fmt.Sprintf("lost 1 acknowledged event(s), sequences %d", lost))
			assert.Contains(t, table.String(), "HISTORY INCOMPLETE")
		})
	}
}

// TestTimelineTimesHaveDateAndZone: a timeline line's time says the day
// and the zone, not just the time of day (events carry UTC).
func TestTimelineTimesHaveDateAndZone(t *testing.T) {
	agg := events.ManagerAggregate(events.ManagerRef{Namespace: "ns", Name: "m", UID: "u"})
	at := time.Date(2026, 12, 1, 14, 32, 21, 5e6, time.FixedZone("CET", 3600))
	e := events.New(agg, events.SourceController, "c", at, events.CancelRequested{})[0]
	assert.Equal(t, "2026-12-01 13:32:21.005 Z", replay.Describe(e).Time)
}

func TestHistoryLineOfARedirect(t *testing.T) {
	ref := events.ManagerRef{Namespace: "ns", Name: "m", UID: "uid"}
	l := replay.Describe(events.Envelope{Aggregate: events.NodeAggregate(ref, "n1"), Data: events.VolumeStateChanged{
		Volume: "vol-x", From: events.VolumeSwitchingOver, To: events.VolumeSwitchingOver, TargetNode: "n3", Message: "n2 is not ready"}})
	assert.Equal(t, "volume vol-x: switching-over, redirected to n3", l.What)
	assert.Equal(t, "n2 is not ready", l.Message)
}
