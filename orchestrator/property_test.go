package orchestrator_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/aggregate/manager"
	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/sim"
	"github.com/switchback-dev/switchback/test/harness/enginetest"
)

// dangerous are the unsafe conditions an upgrade must never cause: I/O
// reaching a down IM, or a volume left with no healthy replica. (A target
// away from home is expected for the node in flight, and is the documented
// outcome of a node that failed with its IM down.)
func dangerous(us []sim.Unsafe) []sim.Unsafe {
	var out []sim.Unsafe
	for _, u := range us {
		if !u.Injected && (u.Kind == sim.UnsafeTargetDown || u.Kind == sim.UnsafeInitiatorDown ||
			u.Kind == sim.UnsafePathBroken || u.Kind == sim.UnsafeNoHealthyReplica) {
			out = append(out, u)
		}
	}
	return out
}

// TestPropertyRandomClusters: on random clusters (2-12 nodes, 0-40 volumes,
// random replica placement, random faults) an upgrade either completes with
// no failed I/O, or stops in a documented state (stalled with a message, or
// error); it never causes an unsafe state. Once every fault is healed, a
// stalled upgrade finishes.
func TestPropertyRandomClusters(t *testing.T) {
	seeds := 24
	if testing.Short() {
		seeds = 6
	}
	outcomes := map[string]int{}
	t.Cleanup(func() { t.Logf("outcomes over %d seeds: %v", seeds, outcomes) })
	for seed := range int64(seeds) {
		t.Run(fmt.Sprintf("seed-%d", seed), func(t *testing.T) {
			cluster := sim.Random(seed, sim.RandomOptions{Faults: seed%2 == 0, Config: sim.Config{Profile: dataplane.ProfileInPlace,
				TargetMoveLatency: 3 * time.Millisecond, IMStartLatency: 5 * time.Millisecond, RebuildLatency: 3 * time.Millisecond,
				ReplicaIOTimeout: 10 * time.Millisecond,
			}})
			if seed%4 != 3 {
				// Most seeds: detach the volumes the prechecks would refuse
				// (single replica or degraded), so the upgrade itself runs.
				vols, err := cluster.Volumes(t.Context())
				require.NoError(t, err)
				for _, v := range vols {
					if v.Attached() && v.DataEngine == "v2" && (len(v.Replicas) < 2 || v.HealthyReplicas() < v.NumberOfReplicas) {
						require.NoError(t, cluster.DetachVolume(v.Name))
					}
				}
			}
			e := enginetest.Start(t, cluster, enginetest.Options{StallAfter: 50 * time.Millisecond, FailAfter: 500 * time.Millisecond})
			m := ref(fmt.Sprintf("prop-%d", seed))
			e.Request(m)

			// Watch until the upgrade ends or stays stalled; check safety all along.
			var st manager.State
			deadline := time.Now().Add(propertyTimeout)
			healed := false
			for time.Now().Before(deadline) {
				st = e.Manager(m)
				require.Empty(t, dangerous(cluster.Unsafe(st.UpgradingNode)), "unsafe while %s on %q", st.State, st.UpgradingNode)
				if st.Terminal() {
					break
				}
				if st.UpgradingNode != "" && !healed {
					if n := e.Node(m, st.UpgradingNode); n.Stalled {
						assert.NotEmpty(t, n.StallMessage, "a stall says what blocks")
						assert.False(t, n.State.Terminal())
						cluster.HealAll()
						healed = true
					}
				}
				time.Sleep(2 * time.Millisecond)
			}
			require.True(t, st.Terminal(), "seed %d: still %s on %q after %s: %q", seed, st.State, st.UpgradingNode, propertyTimeout, st.Message)
			outcome := string(st.State)
			if st.State == events.ManagerError {
				outcome += "/" + st.FailReason
			}
			if healed {
				outcome += " (after healing a stall)"
			}
			outcomes[outcome]++
			switch st.State {
			case events.ManagerCompleted:
				assert.Zero(t, cluster.IOStats().FailedByActions(), "completed without failed I/O: %+v", cluster.IOStats().Failures)
				assert.Empty(t, cluster.Unsafe(""))
			case events.ManagerError:
				assert.NotEmpty(t, st.Message, "an error says why")
				assert.NotEmpty(t, st.FailReason)
			default:
				t.Fatalf("unexpected terminal state %s", st.State)
			}
			assert.Empty(t, dangerous(cluster.Unsafe("")))
			assert.Zero(t, cluster.IOStats().FailedByActions(), "the upgrade never failed an I/O")
			for key, n := range enginetest.Transitions(e.History(m)) {
				assert.Equal(t, 1, n, "transition %q appears once", key)
			}
		})
	}
}

const propertyTimeout = 8 * time.Second
