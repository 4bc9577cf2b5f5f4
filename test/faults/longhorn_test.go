//go:build linux

package faults

import (
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/switchback-dev/switchback/longhorn/longhornsim"
	"github.com/switchback-dev/switchback/sim"
	"github.com/switchback-dev/switchback/test/harness/testenv"
)

var lhCRDs struct {
	once sync.Once
	err  error
}

// longhornWorld is a v1.12 cluster where every step of a storage node has
// work: client node c1 (not upgraded, no replicas) holds the initiators; the storage
// nodes n1..n3, the upgrade's spec.nodes, hold engines of volumes attached
// on c1 (their spec.engineNodeID) and replicas. Longhorn's reactions are
// slow enough that the steps that wait on Longhorn last long enough to be
// killed inside from outside: a switch-over takes 400 ms, an IM 1.2 s to
// start, a rebuild 2 s, and vol-3's 5 s. A switch-back waits for its own
// volume's rebuild (Longhorn would revert the move during one), so without
// vol-3, which rebuilds on n1 and n3 but never moves, every rebuild could
// end inside switching-back and leave rebuilding-replica nothing to wait on.
func (w *world) longhornWorld() {
	t := w.t
	w.sim = sim.New(sim.Config{TargetMoveLatency: 400 * time.Millisecond, IMStartLatency: 1200 * time.Millisecond, RebuildLatency: 2 * time.Second,
		LonghornVersion: "v1.12.1"})
	// c1 takes no replica: a replica failed on a storage node whose
	// volume has one on every other storage node comes back on its own
	// node once that runs its new IM, so rebuilding-replica has a rebuild
	// to wait for.
	for _, n := range []string{"c1", "n1", "n2", "n3"} {
		require.NoError(t, w.sim.AddNodeSpec(sim.NodeSpec{Name: n, NoScheduling: n == "c1"}))
	}
	for _, v := range []sim.VolumeSpec{
		{Name: "vol-0", ReplicasOn: []string{"n1", "n2", "n3"}, AttachedTo: "c1", EngineOn: "n1"},
		{Name: "vol-1", ReplicasOn: []string{"n1", "n2"}, AttachedTo: "c1", EngineOn: "n2"},
		{Name: "vol-2", ReplicasOn: []string{"n2", "n3"}, AttachedTo: "c1", EngineOn: "n3"},
		{Name: "vol-3", ReplicasOn: []string{"n1", "n3"}, AttachedTo: "c1"},
		{Name: "vol-4", ReplicasOn: []string{"n1", "n2", "n3"}},
	} {
		require.NoError(t, w.sim.AddVolumeSpec(v))
	}
	require.NoError(t, w.sim.InjectSlowRebuild("vol-3", 5*time.Second))
	require.NoError(t, w.sim.AddVolume("legacy-v1", sim.EngineV1, []string{"n1", "n2"}, "c1"))
	w.nodes = slices.Clone(runNodes)
	w.requested = w.nodes
	w.gate = newGate(w, nil, w.opts.gateStep)
	w.onStop(w.gate.open)
	w.holds = map[string]string{}
	for _, n := range w.nodes {
		w.holds[n] = newHoldProxy(t, w)
	}
}

// startLonghorn installs Longhorn v1.12.1's CRDs (once per suite) and runs
// the simulated Longhorn manager in the run's namespace until the processes
// are dead.
func (w *world) startLonghorn() {
	t := w.t
	lhCRDs.once.Do(func() {
		root, err := testenv.RepoRoot()
		if err == nil {
			err = testenv.InstallCRDs(w.ctx, kenv.Config, filepath.Join(root, "test", "longhorn-crds"))
		}
		lhCRDs.err = err
	})
	require.NoError(t, lhCRDs.err)
	cfg := rest.CopyConfig(kenv.Config)
	cfg.WarningHandler = rest.NoWarnings{}
	dyn, err := dynamic.NewForConfig(cfg)
	require.NoError(t, err)
	mgr, err := longhornsim.Start(w.ctx, dyn, w.sim, longhornsim.Options{Namespace: w.ns})
	require.NoError(t, err)
	w.onStop(mgr.Close)
}
