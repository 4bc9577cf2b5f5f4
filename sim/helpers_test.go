package sim

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/dataplane"
)

var ctx = context.Background()

// newSim returns an empty cluster on a fake clock.
func newSim(t testing.TB, cfg Config) (*Sim, *FakeClock) {
	t.Helper()
	fc := NewFakeClock(time.Time{})
	cfg.Clock = fc
	return New(cfg), fc
}

// cluster3 builds node-1..node-3 and the given volumes.
func cluster3(t testing.TB, cfg Config, vols ...VolumeSpec) (*Sim, *FakeClock) {
	t.Helper()
	s, fc := newSim(t, cfg)
	for _, n := range []string{"node-1", "node-2", "node-3"} {
		require.NoError(t, s.AddNode(n))
	}
	for _, v := range vols {
		require.NoError(t, s.AddVolumeSpec(v))
	}
	return s, fc
}

func vol(t testing.TB, s *Sim, name string) dataplane.Volume {
	t.Helper()
	v, err := s.Volume(ctx, name)
	require.NoError(t, err)
	return v
}

func nodeOf(t testing.TB, s *Sim, name string) dataplane.Node {
	t.Helper()
	n, err := s.Node(ctx, name)
	require.NoError(t, err)
	return n
}

// currentIM returns the IM serving the node: the first listed (a v1.12
// node lists the default-image IM Longhorn created after it, stopped).
func currentIM(t testing.TB, s *Sim, node string) dataplane.InstanceManager {
	t.Helper()
	ims, err := s.InstanceManagers(ctx, node)
	require.NoError(t, err)
	require.NotEmpty(t, ims, "node %s has no IM", node)
	return ims[0]
}

func replicaNodes(v dataplane.Volume) map[string]dataplane.ReplicaState {
	out := map[string]dataplane.ReplicaState{}
	for _, r := range v.Replicas {
		out[r.Node] = r.State
	}
	return out
}

// requireDegraded requires volume name of s degraded, its replica on node
// in state.
func requireDegraded(t testing.TB, s *Sim, name, node string, state dataplane.ReplicaState, msgAndArgs ...any) {
	t.Helper()
	v := vol(t, s, name)
	require.Equal(t, dataplane.RobustnessDegraded, v.Robustness)
	require.Equal(t, state, replicaOnNode(t, v, node).State, msgAndArgs...)
}

// failingSwitchover is three nodes with vol-1 attached to node-1 and a
// replica on each, its target's move failing (injected) and a switch-over
// to node-2 asked for.
func failingSwitchover(t testing.TB) *Sim {
	t.Helper()
	s, _ := cluster3(t, Config{}, VolumeSpec{Name: "vol-1", ReplicasOn: three, AttachedTo: "node-1"})
	require.NoError(t, s.InjectTargetMoveFailure("vol-1"))
	require.NoError(t, s.SetEngineNode(ctx, "vol-1", "node-2"))
	return s
}

// retire fails a replica and stops its instance once its engine removed
// it, as a node upgrade does (its node must not allow scheduling, or
// Longhorn reuses the replica at once).
func retire(t testing.TB, s *Sim, volume, replica string) {
	t.Helper()
	require.NoError(t, s.FailReplica(ctx, volume, replica))
	require.NoError(t, s.StopReplica(ctx, volume, replica))
}

func replicaOnNode(t testing.TB, v dataplane.Volume, node string) dataplane.Replica {
	t.Helper()
	for _, r := range v.Replicas {
		if r.Node == node {
			return r
		}
	}
	require.Failf(t, "no replica", "volume %s has no replica on %s", v.Name, node)
	return dataplane.Replica{}
}

// upgradeNode is a test-only walk of the node steps over the DataPlane
// interface (not the engine), with the fake clock settled between steps: it
// checks that the simulated cluster supports a live upgrade of node the way
// its profile allows, and leaves the assertions on I/O to the caller.
func upgradeNode(t testing.TB, s *Sim, node string) {
	t.Helper()
	target, err := s.DefaultInstanceManagerImage(ctx)
	require.NoError(t, err)
	before := nodeOf(t, s, node).AllowScheduling
	require.NoError(t, s.SetReplicaScheduling(ctx, node, false))
	vols, err := s.VolumesOn(ctx, node)
	require.NoError(t, err)
	switched := map[string]string{} // volume → engine node before
	var touched []string
	for _, v := range vols {
		if v.DataEngine != dataplane.DataEngineV2 || !v.Attached() {
			continue
		}
		touched = append(touched, v.Name)
		require.NoError(t, s.CreateSnapshot(ctx, v.Name, "pre-upgrade-"+node))
		for _, r := range v.Replicas {
			if r.Node == node {
				retire(t, s, v.Name, r.Name)
			}
		}
	}
	s.Settle()
	for _, v := range vols {
		if v.DataEngine == dataplane.DataEngineV2 && v.Attached() && v.TargetNode == node {
			require.NoError(t, s.SetEngineNode(ctx, v.Name, tempNode(t, s, node, target)))
			switched[v.Name] = v.EngineNode
		}
	}
	s.Settle()
	for name := range switched {
		if vol(t, s, name).TargetNode == node {
			// Longhorn cannot switch a volume over that has no healthy
			// replica left (the layouts the prechecks refuse): the I/O loss
			// is the caller's to assert.
			return
		}
	}
	im := currentIM(t, s, node)
	switch {
	case s.Profile().InPlaceIM():
		require.NoError(t, s.SetInstanceManagerImage(ctx, im.Name, target))
	case im.Image != target:
		// Longhorn replaces an idle IM by itself; one still busy is cut.
		require.NoError(t, s.CutInstanceManager(im.Name))
	}
	s.Settle()
	im = currentIM(t, s, node)
	require.Equal(t, dataplane.IMRunning, im.State)
	require.Equal(t, target, im.Image)
	require.NoError(t, s.SetReplicaScheduling(ctx, node, before))
	for name, engineNode := range switched {
		require.NoError(t, s.SetEngineNode(ctx, name, engineNode))
	}
	s.Settle()
	for _, name := range touched {
		v := vol(t, s, name)
		if v.HealthyReplicas() == 0 {
			continue // lost for good: the caller asserts on I/O failures
		}
		require.Equal(t, dataplane.RobustnessHealthy, v.Robustness, "volume %s not healthy after %s:\n%s", name, node, s)
	}
}

// tempNode picks a Ready node other than node, preferring the target image.
func tempNode(t testing.TB, s *Sim, node, image string) string {
	t.Helper()
	nodes, err := s.Nodes(ctx)
	require.NoError(t, err)
	best := ""
	for _, n := range nodes {
		if n.Name == node || !n.Ready || !n.V2 {
			continue
		}
		im := currentIM(t, s, n.Name)
		if im.State != dataplane.IMRunning {
			continue
		}
		if im.Image == image {
			return n.Name
		}
		if best == "" {
			best = n.Name
		}
	}
	require.NotEmpty(t, best, "no temporary target node for %s", node)
	return best
}

var errCanceled = context.Canceled

func contextWithCancel() (context.Context, context.CancelFunc) { return context.WithCancel(ctx) }
