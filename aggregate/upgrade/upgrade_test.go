package upgrade_test

import (
	"maps"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/aggregate/upgrade"
	"github.com/switchback-dev/switchback/events"
)

var ref = events.ManagerRef{Namespace: "longhorn-system", Name: "up", UID: "uid-up"}

// history numbers evs as a stream would.
func history(evs ...events.Envelope) []events.Envelope {
	for i := range evs {
		evs[i].Sequence = uint64(i + 1)
	}
	return evs
}

func mgr(data events.Event) events.Envelope {
	agg := events.ManagerAggregate(ref)
	return events.New(agg, events.SourceController, "c", time.Unix(0, 0), data)[0]
}

func node(n string, data events.Event) events.Envelope {
	agg := events.NodeAggregate(ref, n)
	return events.New(agg, events.SourceWorker+"/"+n, "c", time.Unix(0, 0), data)[0]
}

// TestApply: each event goes to its own aggregate; a refused one changes
// nothing (no node appears from it) but is looked at; Active follows the
// manager; NodeNames lists the plan's order, then the others sorted.
func TestApply(t *testing.T) {
	h := history(
		mgr(events.UpgradeRequested{Namespace: ref.Namespace, Name: ref.Name, UID: ref.UID, Generation: 1, DataEngine: "v2"}),
		mgr(events.PrecheckPassed{Check: "NodesKnown", Reason: "ChecksPassed", Message: "every node is known"}),
		mgr(events.UpgradePlanned{InstanceManagerImage: "im:v2", Nodes: []string{"n2", "n1"}}),
		node("ghost", events.NodeStateChanged{From: events.NodePending, To: events.NodeInitializing}),
		node("n2", events.NodeUpgradeStarted{Node: "n2", DataEngine: "v2", InstanceManagerImage: "im:v2", Attempt: 1}),
		node("n2", events.NodeStateChanged{From: events.NodePending, To: events.NodeInitializing}),
		mgr(events.UpgradeFailed{Reason: "Test", Message: "stopped by the test"}),
	)
	u := upgrade.New()
	assert.False(t, u.Active(), "nothing requested yet")
	var refused []uint64
	for _, e := range h {
		if err := u.Apply(e); err != nil {
			refused = append(refused, e.Sequence)
		}
		assert.Equal(t, e.Sequence, u.LastSequence)
		if e.Sequence == 3 {
			assert.True(t, u.Active(), "requested and planned: in progress")
		}
	}
	assert.Equal(t, []uint64{4}, refused, "a node step before its start is refused")
	assert.NotContains(t, u.Nodes, "ghost", "a refused event creates no node")
	require.Contains(t, u.Nodes, "n2")
	assert.Equal(t, events.NodeInitializing, u.Nodes["n2"].State)
	assert.Equal(t, events.ManagerError, u.Manager.State)
	assert.False(t, u.Active(), "ended")
	u.Nodes["z-extra"] = u.Nodes["n2"]
	u.Nodes["a-extra"] = u.Nodes["n2"]
	assert.Equal(t, []string{"n2", "n1", "a-extra", "z-extra"}, u.NodeNames())
}

// FuzzApplyRefusedChangesNothing: whatever the order of the events, a
// refused one leaves the upgrade exactly as it was (but for LastSequence),
// an applied one changes only its own aggregate, folding is deterministic,
// and an owned fold (NewOwned, writing volume maps in place) folds the same
// whenever it is synced (a pick's high bit syncs it there, and it is at the
// end).
func FuzzApplyRefusedChangesNothing(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7})
	f.Add([]byte{4, 4, 0, 6, 1, 7})
	pool := []events.Envelope{
		mgr(events.UpgradeRequested{Namespace: ref.Namespace, Name: ref.Name, UID: ref.UID, Generation: 1, DataEngine: "v2"}),
		mgr(events.PrecheckPassed{Check: "NodesKnown", Reason: "ChecksPassed", Message: "every node is known"}),
		mgr(events.UpgradePlanned{InstanceManagerImage: "im:v2", Nodes: []string{"n1"}}),
		mgr(events.NodeScheduled{Node: "n1", Attempt: 1}),
		node("n1", events.NodeUpgradeStarted{Node: "n1", DataEngine: "v2", InstanceManagerImage: "im:v2", Attempt: 1}),
		node("n1", events.NodeStateChanged{From: events.NodePending, To: events.NodeInitializing}),
		mgr(events.CancelRequested{}),
		node("n2", events.NodeUpgradeStarted{Node: "n2", DataEngine: "v2", InstanceManagerImage: "im:v2", Attempt: 1}),
		node("n1", events.VolumeStateChanged{Volume: "vol-1", To: events.VolumePending}),
		node("n1", events.VolumeStateChanged{Volume: "vol-2", To: events.VolumePending}),
		node("n1", events.VolumeStateChanged{Volume: "vol-1", From: events.VolumePending, To: events.VolumeSwitchingOver, TargetNode: "n2"}),
	}
	f.Add([]byte{0, 1, 2, 3, 4, 5, 8, 9, 10, 10, 6})
	f.Add([]byte{4, 8, 0x87, 9, 0x84, 5, 10})
	f.Fuzz(func(t *testing.T, picks []byte) {
		var h []events.Envelope
		for _, p := range picks {
			h = append(h, pool[int(p&0x7f)%len(pool)])
		}
		h = history(h...)
		u, again, owned := upgrade.New(), upgrade.New(), upgrade.NewOwned()
		for i, e := range h {
			before := upgrade.Upgrade{Manager: u.Manager, Nodes: maps.Clone(u.Nodes)}
			err := u.Apply(e)
			_ = again.Apply(e)
			ownedErr := owned.Apply(e)
			require.Equal(t, err == nil, ownedErr == nil, "seq %d: the owned fold decides alike", e.Sequence)
			require.Equal(t, u.Manager, owned.Manager)
			if picks[i]&0x80 != 0 {
				owned.Sync()
				require.Equal(t, u.Nodes, owned.Nodes, "seq %d: the owned fold's nodes", e.Sequence)
			}
			after := upgrade.Upgrade{Manager: u.Manager, Nodes: u.Nodes}
			switch {
			case err != nil:
				require.Equal(t, before, after, "refused seq %d changed the upgrade", e.Sequence)
			case e.Aggregate.IsNode():
				require.Equal(t, before.Manager, u.Manager, "a node event changed the manager")
			default:
				require.Equal(t, before.Nodes, u.Nodes, "a manager event changed a node")
			}
		}
		require.Equal(t, u, again, "deterministic")
		owned.Sync()
		require.Equal(t, u.Nodes, owned.Nodes, "the owned fold's nodes at the end")
	})
}
