package simremote_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/natsembed/natstest"
	"github.com/switchback-dev/switchback/sim"
	"github.com/switchback-dev/switchback/sim/simremote"
	"github.com/switchback-dev/switchback/test/harness/enginetest"
	"github.com/switchback-dev/switchback/topology"
)

// The client's signal fires on changes made on the server's side: an
// action through another client, a fault injected into the simulator, and
// a completion coming due on the wall clock with nobody reading.
func TestClientSignalsTheSimulatorsChanges(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cfg    sim.Config
		change func(t *testing.T, s *sim.Sim, other *simremote.Client)
	}{
		{"an action of another client", sim.Config{}, func(t *testing.T, _ *sim.Sim, other *simremote.Client) {
			require.NoError(t, other.SetReplicaScheduling(t.Context(), "n1", false))
		}},
		{"a fault injected into the simulator", sim.Config{}, func(t *testing.T, s *sim.Sim, _ *simremote.Client) {
			require.NoError(t, s.InjectNodeNotReady("n2"))
		}},
		{"a switch-over finishing with nobody reading", sim.Config{TargetMoveLatency: 20 * time.Millisecond}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := sim.ThreeNodes(tc.cfg)
			require.NoError(t, err)
			srv := natstest.Start(t)
			nc, _ := natstest.Connect(t, srv)
			server, err := simremote.Serve(nc, topology.SimPrefix, s)
			require.NoError(t, err)
			t.Cleanup(server.Stop)
			watcherConn, _ := natstest.Connect(t, srv)
			c := simremote.NewClient(watcherConn, topology.SimPrefix)
			other := simremote.NewClient(nc, topology.SimPrefix)
			if tc.change == nil {
				// Started before the channel is taken: only its completion
				// is left to signal.
				require.NoError(t, other.SetEngineNode(t.Context(), "vol-0", "n2"))
			}
			ch := c.Changed()
			if tc.change != nil {
				tc.change(t, s, other)
			}
			select {
			case <-ch:
			case <-time.After(20 * time.Second):
				t.Fatal("no change notice")
			}
			if tc.change != nil {
				return
			}
			// The switch-over goes through its phases on the wall clock; a
			// watcher reads after every notice until it has moved.
			for {
				ch := c.Changed()
				v, err := c.Volume(t.Context(), "vol-0")
				require.NoError(t, err)
				if v.TargetNode == "n2" && v.TargetReady {
					return
				}
				select {
				case <-ch:
				case <-time.After(20 * time.Second):
					t.Fatalf("no change notice; vol-0 %+v", v)
				}
			}
		})
	}
}

// TestRemoteStepWakesOnChange: a step waiting through the remote client,
// with an hour's resync, proceeds once the simulator changes.
func TestRemoteStepWakesOnChange(t *testing.T) {
	s, err := sim.ThreeNodes(sim.Config{Profile: dataplane.ProfileInPlace})
	require.NoError(t, err)
	require.NoError(t, s.InjectTargetMoveFailure("vol-0"))
	srv := natstest.Start(t)
	nc, _ := natstest.Connect(t, srv)
	server, err := simremote.Serve(nc, topology.SimPrefix, s)
	require.NoError(t, err)
	t.Cleanup(server.Stop)
	e := enginetest.Start(t, simremote.NewClient(nc, topology.SimPrefix), enginetest.Options{Resync: time.Hour, StallAfter: 50 * time.Millisecond, FailAfter: time.Hour})
	m := events.ManagerRef{Namespace: "ns", Name: "remote-wake", UID: "u"}
	e.StalledSwitchover(m, "n1")
	require.NoError(t, s.HealTargetMoveFailure("vol-0"))
	e.Completes(m)
}
