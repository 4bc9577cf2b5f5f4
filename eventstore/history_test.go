package eventstore_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/eventstore"
	"github.com/switchback-dev/switchback/metrics"
	"github.com/switchback-dev/switchback/natsembed/natstest"
	"github.com/switchback-dev/switchback/topology"
)

func TestGapsRangesAndText(t *testing.T) {
	for _, tc := range []struct {
		seqs  []uint64
		text  string
		count uint64
	}{
		{nil, "none", 0},
		{[]uint64{7}, "7", 1},
		{[]uint64{3, 7, 8, 9}, "3, 7-9", 4},
		{[]uint64{1, 2, 4, 5, 7}, "1-2, 4-5, 7", 5},
	} {
		g := eventstore.Gaps{Stream: "S", LastSeq: 10, Missing: eventstore.Ranges(tc.seqs)}
		assert.Equal(t, tc.text, g.String())
		assert.Equal(t, tc.count, g.Count())
		if tc.count == 0 {
			assert.NoError(t, g.Err())
			continue
		}
		var lost *eventstore.LostHistoryError
		require.ErrorAs(t, g.Err(), &lost)
		assert.Contains(t, g.Err().Error(), "stream S lost "+fmt.Sprint(tc.count)+" acknowledged event(s), sequences "+tc.text)
	}
}

// TestCheckHistoryNamesLostEvents: an empty stream (which the server reports
// with sequence 0 deleted) and a healthy one have no gaps; after the
// last block of its file store lost its tail between two runs of the server
// (a torn write), CheckHistory names the lost sequence, still after later
// appends, and sets the metric.
func TestCheckHistoryNamesLostEvents(t *testing.T) {
	dir := t.TempDir()
	srv := natstest.StartAt(t, dir)
	nc, js := natstest.Connect(t, srv)
	s := openStore(t, js, eventstore.Config{})
	c := ctx(t)
	agg := events.NodeAggregate(mgr, "n1")
	g, err := s.CheckHistory(c)
	require.NoError(t, err)
	assert.Empty(t, g.Missing, "an empty stream")
	assert.NoError(t, g.Err())
	v := appendNumbered(t, c, s, agg, 0, 0, 5)
	g, err = s.CheckHistory(c)
	require.NoError(t, err)
	assert.Empty(t, g.Missing, "a healthy stream")
	assert.Equal(t, v, g.LastSeq)
	assert.Zero(t, lostMetric(t))

	nc.Close()
	srv.Shutdown()
	truncateLastBlock(t, dir, 64)
	srv2 := natstest.StartAt(t, dir)
	_, js2 := natstest.Connect(t, srv2)
	s2 := openStore(t, js2, eventstore.Config{})
	h, err := s2.Load(c, agg)
	require.NoError(t, err)
	require.Len(t, h.Events, 4, "the last event is gone")
	v2, err := s2.Append(c, agg, h.Version, resumed(agg, "after"))
	require.NoError(t, err)
	assert.Equal(t, v+1, v2, "sequences are not reused")

	g, err = s2.CheckHistory(c)
	require.NoError(t, err)
	assert.Equal(t, []eventstore.SeqRange{{First: v, Last: v}}, g.Missing)
	assert.Equal(t, v2, g.LastSeq)
	assert.Equal(t, float64(1), lostMetric(t))
	assert.ErrorContains(t, g.Err(), fmt.Sprintf("sequences %d (of 1-%d)", v, v2))
}

func lostMetric(t *testing.T) float64 {
	t.Helper()
	var m dto.Metric
	require.NoError(t, metrics.StreamLostEvents.WithLabelValues(topology.EventStream).Write(&m))
	return m.GetGauge().GetValue()
}

// truncateLastBlock cuts n bytes off the newest message block of the event
// stream in a stopped server's store dir.
func truncateLastBlock(t *testing.T, dir string, n int64) {
	t.Helper()
	blocks, err := filepath.Glob(filepath.Join(dir, "jetstream", "$G", "streams", topology.EventStream, "msgs", "*.blk"))
	require.NoError(t, err)
	require.Len(t, blocks, 1, "small tests fill one block")
	fi, err := os.Stat(blocks[0])
	require.NoError(t, err)
	require.NoError(t, os.Truncate(blocks[0], fi.Size()-n))
}
