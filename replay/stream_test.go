package replay_test

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/eventstore"
	"github.com/switchback-dev/switchback/natsembed/natstest"
	"github.com/switchback-dev/switchback/replay"
	"github.com/switchback-dev/switchback/test/harness/historytest"
)

// TestStreamHandsOutUpgradesOnceEnded: Stream hands out an upgrade that has
// ended once SettleSequences have passed, before the scan is over (b ends
// first and comes before a, which is still in progress at the end), and the
// others at the end in Run's order; an upgrade whose history goes on after
// its end within the window (a node started and cancelled after the
// manager completed) is handed out whole; an event that comes after its
// upgrade was handed out is counted as late, not folded. Run returns the
// same upgrades, ordered by name.
func TestStreamHandsOutUpgradesOnceEnded(t *testing.T) {
	ctx := context.Background()
	_, js := natstest.Connect(t, natstest.Start(t))
	s, err := eventstore.Open(ctx, js, eventstore.Config{})
	require.NoError(t, err)
	ref := func(name string) events.ManagerRef {
		return events.ManagerRef{Namespace: "ns", Name: name, UID: "uid-" + name}
	}
	// filler is enough ended upgrades to pass the settle window.
	filler := func(prefix string) []events.Envelope {
		var out []events.Envelope
		for i := 0; len(out) <= replay.SettleSequences+1000; i++ {
			out = append(out, historytest.Completed(ref(fmt.Sprintf("%s-%04d", prefix, i)), "n1", 20)...)
		}
		return out
	}
	b, c, d := ref("b"), ref("c"), ref("d")
	var h []events.Envelope
	h = append(h, historytest.Completed(b, "n1", 3)...)
	h = append(h, historytest.Completed(c, "n1", 3)...)
	// A command queued before c ended starts n2, which is cancelled.
	h = append(h, events.New(events.NodeAggregate(c, "n2"), events.SourceWorker, "late", historytest.At,
		events.NodeUpgradeStarted{Node: "n2", DataEngine: "v2", InstanceManagerImage: "im:2", Attempt: 1},
		events.NodeCancelRequested{Reason: "the upgrade had already ended (completed)"},
		events.NodeUpgradeCancelled{Step: events.NodePending})...)
	h = append(h, historytest.Completed(d, "n1", 3)...)
	h = append(h, filler("f")...)
	lateSeq := uint64(len(h) + 1)
	h = append(h, events.New(events.NodeAggregate(d, "n1"), events.SourceWorker, "late", historytest.At,
		events.NodeResumed{Step: events.NodeCompleted, Message: "long after"})...)
	a := ref("a")
	h = append(h, historytest.Node(a, "n1", 3, false)...)
	historytest.Publish(t, js, "h", h)

	var handed []string
	got := map[string]*replay.Upgrade{}
	res, err := replay.Stream(ctx, s, replay.Options{}, func(u *replay.Upgrade) error {
		handed = append(handed, u.Ref.Name)
		got[u.Ref.Name] = u
		return nil
	})
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(handed), 5)
	assert.Equal(t, []string{"b", "c", "d"}, handed[:3], "handed out in the order they ended, before the scan's end")
	assert.Greater(t, slices.Index(handed, "a"), slices.Index(handed, "f-0000"),
		"a, in progress, is handed out at the end, after the upgrades that ended long before it (a comes first by name)")
	require.Contains(t, got, "c")
	assert.Empty(t, got["c"].Refused)
	assert.Equal(t, events.NodeCancelled, got["c"].Nodes["n2"].State, "the node started after the end is in the upgrade")
	assert.Equal(t, events.ManagerCompleted, got["c"].Manager.State)
	assert.Equal(t, events.NodeFinalizing, got["a"].Nodes["n1"].State, "a is still in progress")
	assert.Equal(t, uint64(1), res.Late, "d's event after d was handed out")
	assert.Equal(t, lateSeq, res.FirstLate)
	assert.Empty(t, res.Upgrades, "Stream keeps none")

	var table bytes.Buffer
	tw := replay.NewTableWriter(&table)
	require.NoError(t, tw.Add(got["c"]))
	require.NoError(t, tw.Close(res))
	assert.Contains(t, table.String(), "ns/c")
	assert.Contains(t, table.String(), fmt.Sprintf("1 event(s) came more than %d sequences after their upgrade had ended and are not in it; the first: seq %d", replay.SettleSequences, lateSeq))

	all, err := replay.Run(ctx, s, replay.Options{})
	require.NoError(t, err)
	names := make([]string, len(all.Upgrades))
	for i, u := range all.Upgrades {
		names[i] = u.Ref.Name
		assert.Equal(t, got[u.Ref.Name].Upgrade, u.Upgrade, "%s: Run folds what Stream handed out", u.Ref.Name)
	}
	assert.IsNonDecreasing(t, names, "Run orders by name")
	assert.ElementsMatch(t, handed, names)
}
