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

// currentIM returns the node's newest IM.
func currentIM(t testing.TB, s *Sim, node string) dataplane.InstanceManager {
	t.Helper()
	ims, err := s.InstanceManagers(ctx, node)
	require.NoError(t, err)
	require.NotEmpty(t, ims, "node %s has no IM", node)
	return ims[len(ims)-1]
}

func replicaNodes(v dataplane.Volume) map[string]dataplane.ReplicaState {
	out := map[string]dataplane.ReplicaState{}
	for _, r := range v.Replicas {
		out[r.Node] = r.State
	}
	return out
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

// upgradeNode is a test-only walk of SPEC.md's node steps over the
// DataPlane interface (not the engine): it checks that the simulated cluster
// supports the design, with the fake clock settled between steps.
func upgradeNode(t testing.TB, s *Sim, node string) {
	t.Helper()
	target, err := s.DefaultInstanceManagerImage(ctx)
	require.NoError(t, err)
	require.NoError(t, s.SetNodeUpgradeRequested(ctx, node, true))
	vols, err := s.Volumes(ctx)
	require.NoError(t, err)
	var switched, touched []string
	for _, v := range vols {
		if v.DataEngine != dataplane.DataEngineV2 {
			continue
		}
		concerned := v.TargetNode == node
		for _, r := range v.Replicas {
			if r.Node == node {
				concerned = true
				require.NoError(t, s.FailReplica(ctx, v.Name, r.Name))
				require.NoError(t, s.DeleteReplica(ctx, v.Name, r.Name))
			}
		}
		if concerned {
			touched = append(touched, v.Name)
		}
		if v.Attached() && concerned {
			require.NoError(t, s.CreateSnapshot(ctx, v.Name, "pre-upgrade-"+node))
		}
		if v.Attached() && v.TargetNode == node {
			tmp := tempNode(t, s, node, target)
			require.NoError(t, s.SetTargetNode(ctx, v.Name, tmp))
			switched = append(switched, v.Name)
		}
	}
	s.Settle()
	for _, name := range switched {
		require.NotEqual(t, node, vol(t, s, name).TargetNode, "target of %s still on %s", name, node)
	}
	require.NoError(t, s.DeleteInstanceManager(ctx, currentIM(t, s, node).Name))
	s.Settle()
	im := currentIM(t, s, node)
	require.Equal(t, dataplane.IMRunning, im.State)
	require.Equal(t, target, im.Image)
	for _, name := range switched {
		require.NoError(t, s.SetTargetNode(ctx, name, node))
	}
	s.Settle()
	for _, name := range switched {
		require.Equal(t, node, vol(t, s, name).TargetNode)
		require.NoError(t, s.SetTargetNode(ctx, name, ""))
	}
	s.Settle()
	for _, name := range touched {
		v := vol(t, s, name)
		if v.HealthyReplicas() == 0 {
			continue // lost for good: the caller asserts on I/O failures
		}
		require.Equal(t, dataplane.RobustnessHealthy, v.Robustness, "volume %s not healthy after %s:\n%s", name, node, s)
		if !v.Attached() {
			require.NoError(t, s.SetVolumeImage(ctx, name, target))
		}
	}
	require.NoError(t, s.SetNodeUpgradeRequested(ctx, node, false))
	s.Settle()
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
