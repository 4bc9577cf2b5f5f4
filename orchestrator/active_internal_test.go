package orchestrator

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/api/v1beta2"
	"github.com/switchback-dev/switchback/commands"
	"github.com/switchback-dev/switchback/commands/intake"
	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/eventstore"
	"github.com/switchback-dev/switchback/natsembed/natstest"
	"github.com/switchback-dev/switchback/nodequeue"
	"github.com/switchback-dev/switchback/sim"
)

// activeUpgrades extends its fold from where it stopped: managers that end
// leave the active set, new ones join it, and a manager is never its own
// competitor.
func TestActiveFromStreamFollowsTheStream(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, js := natstest.Connect(t, natstest.Start(t))
	store, err := eventstore.Open(ctx, js, eventstore.Config{})
	require.NoError(t, err)
	queue, err := nodequeue.Open(ctx, js, nodequeue.Config{})
	require.NoError(t, err)
	cluster, err := sim.ThreeNodes(sim.Config{Profile: dataplane.ProfileInPlace})
	require.NoError(t, err)
	o, err := New(Config{Store: store, Queue: queue, Cluster: cluster})
	require.NoError(t, err)

	at := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	ref := func(name string) events.ManagerRef {
		return events.ManagerRef{Namespace: "longhorn-system", Name: name, UID: "uid-" + name}
	}
	x := commands.New(commands.Config{Store: store, Source: events.SourceIntake, Now: func() time.Time { return at }})
	request := func(name string) {
		_, err := intake.RequestUpgrade(ctx, x, ref(name), 1, v1beta2.DataEngineUpgradeManagerSpec{DataEngine: v1beta2.DataEngineTypeV2})
		require.NoError(t, err)
	}
	end := func(name string, e events.Event) {
		agg := events.ManagerAggregate(ref(name))
		h, err := store.Load(ctx, agg)
		require.NoError(t, err)
		_, err = store.Append(ctx, agg, h.Version, events.New(agg, events.SourceController, "end-"+name, at, e)...)
		require.NoError(t, err)
	}

	request("a")
	request("b")
	active, err := o.active.except(ctx, ref("a"))
	require.NoError(t, err)
	assert.Equal(t, []string{"longhorn-system/b"}, active, "a is not its own competitor")

	end("b", events.UpgradeFailed{Reason: "Test", Message: "ended by the test"})
	request("c")
	before := o.active.scannedTo
	active, err = o.active.except(ctx, ref("c"))
	require.NoError(t, err)
	assert.Equal(t, []string{"longhorn-system/a"}, active, "b ended, c asks")
	assert.Greater(t, o.active.scannedTo, before, "only the new events were read")
	assert.True(t, o.active.settled[ref("b")], "an ended manager is forgotten")
	assert.NotContains(t, o.active.open, ref("b"))

	active, err = o.active.except(ctx, ref("x"))
	require.NoError(t, err)
	assert.Equal(t, []string{"longhorn-system/a", "longhorn-system/c"}, active, "sorted")
}
