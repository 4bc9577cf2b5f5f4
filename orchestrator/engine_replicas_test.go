package orchestrator_test

import (
	"cmp"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/aggregate/manager"
	"github.com/switchback-dev/switchback/aggregate/nodeupgrade"
	"github.com/switchback-dev/switchback/api/v1beta2"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/sim"
	"github.com/switchback-dev/switchback/test/harness/enginetest"
)

const gib, mib = int64(1) << 30, int64(1) << 20

// replicaLayout is four nodes and three attached 2-replica volumes
// holding data their workloads keep writing: every upgraded node holds a
// replica of two of them, and each volume has a node without a replica to
// take a temporary one.
func replicaLayout(t *testing.T, cfg sim.Config, autoBalance string) *sim.Sim {
	t.Helper()
	cfg.Profile = inPlace
	cfg.RebuildBandwidth = cmp.Or(cfg.RebuildBandwidth, 100*gib)
	cfg.ReplicaReplenishWait = time.Hour
	s := sim.New(cfg)
	for _, n := range []string{"n1", "n2", "n3", "n4"} {
		require.NoError(t, s.AddNode(n))
	}
	for name, on := range map[string][]string{"vol-a": {"n1", "n2"}, "vol-b": {"n2", "n3"}, "vol-c": {"n1", "n3"}} {
		require.NoError(t, s.AddVolumeSpec(sim.VolumeSpec{Name: name, ReplicasOn: on, AttachedTo: on[0],
			Allocated: gib, WriteRate: mib, ReplicaAutoBalance: autoBalance}))
	}
	return s
}

func addFirst(nodes ...string) v1beta2.DataEngineUpgradeManagerSpec {
	return v1beta2.DataEngineUpgradeManagerSpec{DataEngine: v1beta2.DataEngineTypeV2, Nodes: nodes, ReplicaPolicy: v1beta2.ReplicaPolicyAddFirst}
}

// replicaNames are the names of the volume's replicas, sorted.
func replicaNames(t *testing.T, s *sim.Sim, volume string) []string {
	t.Helper()
	v, err := s.Volume(t.Context(), volume)
	require.NoError(t, err)
	var out []string
	for _, r := range v.Replicas {
		out = append(out, r.Name)
	}
	slices.Sort(out)
	return out
}

// A whole add-first upgrade of three nodes: every volume gets one
// temporary replica before its first replica is failed, keeps it for the
// whole upgrade (the later node of the volume needs none of its own), and
// at the end has its count, its auto-balance and exactly its replicas
// back. The redundancy invariant holds at every change of the cluster;
// under rebuild, on the same cluster, it does not. The temporary replicas
// cost one whole copy per volume.
func TestAddFirstKeepsRedundancy(t *testing.T) {
	for _, policy := range []v1beta2.ReplicaPolicy{v1beta2.ReplicaPolicyAddFirst, v1beta2.ReplicaPolicyRebuild} {
		t.Run(string(policy), func(t *testing.T) {
			s := replicaLayout(t, sim.Config{FullRedundancy: true}, "best-effort")
			before := map[string][]string{}
			for _, v := range []string{"vol-a", "vol-b", "vol-c"} {
				before[v] = replicaNames(t, s, v)
			}
			e := enginetest.Start(t, s, enginetest.Options{})
			m := ref("add-first-" + string(policy))
			spec := addFirst("n1", "n2", "n3")
			spec.ReplicaPolicy = policy
			e.RequestSpec(m, spec)
			st := e.WaitManager(m, time.Minute, "a terminal state", terminal)
			require.Equal(t, events.ManagerCompleted, st.State, st.Message)
			io := s.IOStats()
			assert.Zero(t, io.Failed, "no I/O failed: %s", io)
			if policy == v1beta2.ReplicaPolicyRebuild {
				assert.NotEmpty(t, io.Breaches, "rebuild runs each volume on one copy while its replica rebuilds")
				return
			}
			assert.Empty(t, io.Breaches, "no volume ever served from fewer nodes than it was built with")

			raised, added, restored := map[string]int{}, map[string]int{}, map[string]int{}
			for _, ev := range e.History(m) {
				switch d := ev.Data.(type) {
				case events.ReplicaCountRaised:
					if d.FirstNode == "" {
						raised[d.Volume]++
						assert.Equal(t, 2, d.NumberOfReplicas)
						assert.Equal(t, "best-effort", d.ReplicaAutoBalance)
					}
				case events.TemporaryReplicaAdded:
					added[d.Volume]++
				case events.ReplicaCountRestored:
					restored[d.Volume]++
					assert.NotEmpty(t, d.Replica, "the temporary replica was deleted: %+v", d)
				}
			}
			want := map[string]int{"vol-a": 1, "vol-b": 1, "vol-c": 1}
			assert.Equal(t, want, raised, "one raise per volume and upgrade")
			assert.Equal(t, want, added)
			assert.Equal(t, want, restored)
			for v, names := range before {
				spec, err := s.ReplicaSpecOf(v)
				require.NoError(t, err)
				assert.Equal(t, 2, spec.NumberOfReplicas, v)
				assert.Equal(t, "best-effort", spec.ReplicaAutoBalance, v)
				assert.Equal(t, names, replicaNames(t, s, v), "%s: exactly its own replicas back", v)
			}
			extra := map[string]int64{}
			for _, r := range s.RebuildRecords() {
				if !slices.Contains(before[r.Volume], r.Replica) {
					extra[r.Volume] += r.Bytes
				}
			}
			for v := range before {
				assert.Positive(t, extra[v], v)
				assert.LessOrEqual(t, extra[v], gib+64*mib, "%s: one whole copy per volume and upgrade", v)
			}
		})
	}
}

// Cancelled while the second node waits for a temporary replica (its
// copy takes a while): the node goes back to a safe point, and every
// volume's count and replicas are restored, the first node's temporary
// replicas included.
func TestAddFirstCancelRestores(t *testing.T) {
	s := replicaLayout(t, sim.Config{RebuildBandwidth: 2 * gib}, "")
	e := enginetest.Start(t, s, enginetest.Options{StallAfter: time.Minute})
	m := ref("add-first-cancel")
	e.RequestSpec(m, addFirst("n1", "n2", "n3"))
	e.WaitNode(m, "n2", time.Minute, "n2 asked for a temporary replica", func(ns nodeupgrade.State) bool {
		t := ns.Rebuilds["vol-b"].Temporary
		return t != nil && t.Raised != nil
	})
	e.Cancel(m)
	st := e.WaitManager(m, time.Minute, "cancelled", terminal)
	require.Equal(t, events.ManagerCancelled, st.State, st.Message)
	// Restored before the cancel was recorded.
	for _, v := range []string{"vol-a", "vol-b", "vol-c"} {
		spec, err := s.ReplicaSpecOf(v)
		require.NoError(t, err)
		assert.Equal(t, 2, spec.NumberOfReplicas, v)
		assert.Len(t, replicaNames(t, s, v), 2, v)
	}
	assert.Zero(t, s.IOStats().Failed)
}

// The worker and the controller killed together, in the middle of a
// temporary replica's copy and in the middle of a hashing: fresh ones take
// over from the history, and the upgrade completes with one raise and one
// hashing request per volume and node, every volume's count and replicas
// back, nothing done twice, and the redundancy invariant held throughout.
func TestAddFirstKilledMidway(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  sim.Config
		// at says, of a volume's rebuild on the first node, that the
		// kill lands where the case means.
		at func(rb nodeupgrade.Rebuild) bool
	}{
		{name: "mid-temporary-replica", cfg: sim.Config{RebuildBandwidth: 2 * gib}, at: func(rb nodeupgrade.Rebuild) bool {
			return rb.Temporary != nil && rb.Temporary.Raised != nil
		}},
		{name: "mid-hash", cfg: sim.Config{HashBandwidth: gib}, at: func(rb nodeupgrade.Rebuild) bool {
			return rb.Hashing != nil && rb.Planned == nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.FullRedundancy = true
			s := replicaLayout(t, tc.cfg, "")
			before := map[string][]string{}
			for _, v := range []string{"vol-a", "vol-b", "vol-c"} {
				before[v] = replicaNames(t, s, v)
			}
			e := enginetest.Start(t, s, enginetest.Options{AckWait: 300 * time.Millisecond, StallAfter: time.Minute})
			m := ref("add-first-kill-" + tc.name)
			e.RequestSpec(m, addFirst("n1", "n2", "n3"))
			first := e.WaitManager(m, time.Minute, "planned", func(st manager.State) bool { return st.Planned() }).Plan[0]
			e.WaitNode(m, first, time.Minute, tc.name, func(ns nodeupgrade.State) bool {
				return slices.ContainsFunc(slices.Collect(maps.Values(ns.Rebuilds)), tc.at)
			})
			e.StopWorker(first)
			e.StopOrchestrators()
			e.StartOrchestrator()
			e.StartWorker(first)
			st := e.WaitManager(m, time.Minute, "a terminal state", terminal)
			require.Equal(t, events.ManagerCompleted, st.State, st.Message)
			io := s.IOStats()
			assert.Zero(t, io.Failed, "%s", io)
			assert.Empty(t, io.Breaches)
			h := e.History(m)
			for key, n := range enginetest.Transitions(h) {
				assert.Equal(t, 1, n, "transition %q appears once", key)
			}
			raised, hashed := map[string]int{}, map[string]int{}
			for _, ev := range h {
				switch d := ev.Data.(type) {
				case events.ReplicaCountRaised:
					if d.FirstNode == "" {
						raised[d.Volume]++
					}
				case events.HashingRequested:
					hashed[ev.Aggregate.Node+"/"+d.Volume]++
				}
			}
			assert.Equal(t, map[string]int{"vol-a": 1, "vol-b": 1, "vol-c": 1}, raised)
			for key, n := range hashed {
				assert.Equal(t, 1, n, "hashing of %s asked for once", key)
			}
			for v, names := range before {
				spec, err := s.ReplicaSpecOf(v)
				require.NoError(t, err)
				assert.Equal(t, 2, spec.NumberOfReplicas, v)
				assert.Equal(t, names, replicaNames(t, s, v), "%s: exactly its own replicas back", v)
			}
		})
	}
}

// Under add-first, a cluster whose only node without a replica of a
// volume has no room for one is refused by the precheck
// TemporaryReplicasFit, naming the volume and the disk, before anything
// is touched (RuleReplicaSpace: Longhorn would never build the replica
// the node's upgrade waits for); under rebuild the same cluster upgrades.
func TestAddFirstRefusedWithoutRoom(t *testing.T) {
	for _, policy := range []v1beta2.ReplicaPolicy{v1beta2.ReplicaPolicyAddFirst, v1beta2.ReplicaPolicyRebuild} {
		t.Run(string(policy), func(t *testing.T) {
			s := sim.New(sim.Config{Profile: inPlace, ReplicaReplenishWait: time.Hour})
			for _, n := range []sim.NodeSpec{{Name: "n1"}, {Name: "n2"}, {Name: "n3", Storage: gib}} {
				require.NoError(t, s.AddNodeSpec(n))
			}
			require.NoError(t, s.AddVolumeSpec(sim.VolumeSpec{Name: "vol-a", ReplicasOn: []string{"n1", "n2"}, AttachedTo: "n1", Allocated: gib}))
			e := enginetest.Start(t, s, enginetest.Options{})
			m := ref("no-room-" + string(policy))
			spec := addFirst("n1", "n2")
			spec.ReplicaPolicy = policy
			e.RequestSpec(m, spec)
			st := e.WaitManager(m, time.Minute, "a terminal state", terminal)
			if policy == v1beta2.ReplicaPolicyRebuild {
				require.Equal(t, events.ManagerCompleted, st.State, st.Message)
				return
			}
			require.Equal(t, events.ManagerError, st.State)
			i := slices.IndexFunc(st.Prechecks, func(p manager.PrecheckResult) bool { return p.Check == "TemporaryReplicasFit" })
			require.GreaterOrEqual(t, i, 0)
			assert.False(t, st.Prechecks[i].Passed)
			assert.Equal(t, "NoRoomForTemporaryReplica", st.Prechecks[i].Reason)
			assert.Contains(t, st.Prechecks[i].Message, "temporary replica of volume vol-a (1.00 GiB): n3: disk disk-1 would keep 0 bytes available")
			assert.Empty(t, st.Nodes, "no node was touched")
			actions, _ := s.ActionLog()
			assert.Empty(t, actions, "the cluster was not touched")
		})
	}
}
