package nodeworker

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/aggregate/nodeupgrade"
	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/sim"
	"github.com/switchback-dev/switchback/test/harness/goldentest"
	"github.com/switchback-dev/switchback/workloadmove"
)

// storageNodes is a Longhorn v1.12 cluster laid out for live upgrades: the
// workloads (initiators) on c1, the engines and replicas on the storage
// nodes n1-n3, and a detached volume; Longhorn's replica-replenishment
// wait is its default.
func storageNodes(t testing.TB, cfg sim.Config, n1 ...func(*sim.NodeSpec)) (*sim.Sim, *sim.FakeClock) {
	t.Helper()
	fc := sim.NewFakeClock(time.Time{})
	cfg.Clock = fc
	if cfg.ReplicaReplenishWait == 0 {
		cfg.ReplicaReplenishWait = 600 * time.Second
	}
	s := sim.New(cfg)
	for _, n := range []string{"c1", "n1", "n2", "n3"} {
		spec := sim.NodeSpec{Name: n}
		for _, f := range n1 {
			if n == "n1" {
				f(&spec)
			}
		}
		require.NoError(t, s.AddNodeSpec(spec))
	}
	for _, v := range []sim.VolumeSpec{
		{Name: "vol-a", AttachedTo: "c1", EngineOn: "n1", ReplicasOn: []string{"n1", "n2", "n3"}},
		{Name: "vol-b", AttachedTo: "c1", EngineOn: "n2", ReplicasOn: []string{"n1", "n2"}},
		{Name: "vol-c", AttachedTo: "c1", EngineOn: "n1", ReplicasOn: []string{"n1", "n3"}},
		{Name: "vol-d", ReplicasOn: []string{"n1", "n2"}},
	} {
		require.NoError(t, s.AddVolumeSpec(v))
	}
	s.Settle()
	return s, fc
}

// seededLatencies draws Longhorn's latencies for one seed: every order of
// its reactions and the steps' rounds is met over the seeds.
func seededLatencies(seed uint64) sim.Config {
	r := rand.New(rand.NewPCG(seed, 1))
	between := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(r.Int64N(int64(hi-lo)+1)) }
	return sim.Config{
		TargetMoveLatency:     between(time.Second, 8*time.Second),
		IMStartLatency:        between(5*time.Second, 40*time.Second),
		RebuildLatency:        between(5*time.Second, time.Minute),
		ReplicaStartLatency:   between(0, 4*time.Second),
		ReplicaRemoveLatency:  between(0, 5*time.Second),
		PodTerminationLatency: between(0, 30*time.Second),
		NodeReconcileLatency:  between(0, 30*time.Second),
	}
}

// TestSequencesKeepEveryInvariant upgrades the storage nodes one after
// another under seeded latencies and orders: nothing a sequence checks may
// ever be found.
func TestSequencesKeepEveryInvariant(t *testing.T) {
	seeds := uint64(40)
	if testing.Short() {
		seeds = 8
	}
	for seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			s, fc := storageNodes(t, seededLatencies(seed))
			q := newSequence(t, s, fc, seed)
			q.upgrade("n1", "n2", "n3")
			require.Empty(t, q.found, "seed %d, latencies %+v\n%s", seed, seededLatencies(seed), strings.Join(q.log, "\n"))
		})
	}
}

// TestGoldenSequenceV112 is one seeded upgrade of the storage nodes on the
// v1.12 profile, its data-plane calls, steps and stalls in order, against
// testdata/sequence-v1.12-storage-nodes.golden (-update rewrites it).
func TestGoldenSequenceV112(t *testing.T) {
	s, fc := storageNodes(t, sim.Config{TargetMoveLatency: 4 * time.Second, IMStartLatency: 20 * time.Second,
		RebuildLatency: 30 * time.Second, ReplicaStartLatency: 2 * time.Second, ReplicaRemoveLatency: 3 * time.Second,
		PodTerminationLatency: 10 * time.Second, NodeReconcileLatency: 5 * time.Second})
	q := newSequence(t, s, fc, 7)
	q.upgrade("n1", "n2", "n3")
	require.Empty(t, q.found)
	goldentest.Compare(t, filepath.Join("testdata", "sequence-v1.12-storage-nodes.golden"),
		"# one seeded sequence on the v1.12 profile: the steps' data-plane calls, each node's steps and stalls, in order\n"+strings.Join(q.log, "\n")+"\n",
		updating(), "the sequence")
}

// updating reports -update, which golden_test.go defines for the package's
// tests.
func updating() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}

// onePatchFailure is the data plane that fails a replica as the upgrade did
// before: spec.failedAt and desireState stopped in one write (the engine's
// RAID still holding it).
type onePatchFailure struct{ *sim.Sim }

func (p onePatchFailure) FailReplica(_ context.Context, volume, replica string) error {
	return p.ForceStopReplica(volume, replica)
}

func (onePatchFailure) StopReplica(context.Context, string, string) error { return nil }

// backgroundIMDeletion is the data plane that deletes an instance manager
// as the upgrade did before: with the apiserver's default (background)
// propagation, its object gone at once while its pod terminates.
type backgroundIMDeletion struct{ *sim.Sim }

func (p backgroundIMDeletion) DeleteInstanceManager(_ context.Context, name string) error {
	return p.DeleteInstanceManagerObject(name, false)
}

// multipathUnread is the data plane as the steps saw it before the worker
// read its host's nvme_core.multipath: nothing known against a switch-over.
type multipathUnread struct{ *sim.Sim }

func (p multipathUnread) Volume(ctx context.Context, name string) (dataplane.Volume, error) {
	v, err := p.Sim.Volume(ctx, name)
	v.InitiatorMultipath = dataplane.MultipathUnknown
	return v, err
}

func (p multipathUnread) VolumesOn(ctx context.Context, node string) ([]dataplane.Volume, error) {
	return unread(p.Sim.VolumesOn(ctx, node))
}

func (p multipathUnread) Volumes(ctx context.Context) ([]dataplane.Volume, error) {
	return unread(p.Sim.Volumes(ctx))
}

func unread(vols []dataplane.Volume, err error) ([]dataplane.Volume, error) {
	for i := range vols {
		vols[i].InitiatorMultipath = dataplane.MultipathUnknown
	}
	return vols, err
}

// restoringSchedulingFirst is the switch-back as it was: the node's replica
// scheduling restored in the same round as the targets are moved home, and
// a target moved whatever its volume's replicas do.
func restoringSchedulingFirst(step events.NodeState, o observation, st nodeupgrade.State, c settings) stepPlan {
	if step != events.NodeSwitchingBack {
		return decide(step, o, st, c)
	}
	p := stepPlan{done: true}
	p.restoreScheduling(o, st, c)
	for _, v := range o.sortedRecorded() {
		rec := st.Volumes[v.Name]
		if rec.State != events.VolumeSwitchedOver && rec.State != events.VolumeSwitchingBack {
			continue
		}
		before := *rec.EngineNodeBefore
		home := v.EngineHome(before)
		if rec.State != events.VolumeSwitchingBack {
			p.volume(v.Name, events.VolumeSwitchingBack, home, "target moving back to "+home)
		}
		if v.EngineNode == before && settledOn(v, home) {
			p.volume(v.Name, events.VolumeSwitchedBack, home, "target back on "+home)
			continue
		}
		p.moveEngine(v, c.node, before, home, "TargetNotMovedBack")
	}
	return p
}

// ignoring is decide with part of what a round observed hidden, as the
// steps that did not look at it decided.
func ignoring(hide func(*observation)) decider {
	return func(step events.NodeState, o observation, st nodeupgrade.State, c settings) stepPlan {
		hide(&o)
		return decide(step, o, st, c)
	}
}

// recordingNothingLate is decide as it was before the steps past
// initializing recorded the volumes that came to concern the node since.
func recordingNothingLate(step events.NodeState, o observation, st nodeupgrade.State, c settings) stepPlan {
	p := decide(step, o, st, c)
	if step == events.NodeInitializing {
		return p
	}
	p.volumes = slices.DeleteFunc(p.volumes, func(v nodeupgrade.SetVolumeState) bool {
		_, known := st.Volumes[v.Volume]
		return !known && v.To == events.VolumePending
	})
	return p
}

// once calls f the first time cond holds.
func once(cond func(q *sequence, node string, st nodeupgrade.State) bool, f func(q *sequence)) func(*sequence, string, nodeupgrade.State) {
	done := false
	return func(q *sequence, node string, st nodeupgrade.State) {
		if !done && cond(q, node, st) {
			done = true
			f(q)
		}
	}
}

// inTurn runs each of fs at every turn.
func inTurn(fs ...func(*sequence, string, nodeupgrade.State)) func(*sequence, string, nodeupgrade.State) {
	return func(q *sequence, node string, st nodeupgrade.State) {
		for _, f := range fs {
			f(q, node, st)
		}
	}
}

// at is true from the node's step on.
func at(node string, step events.NodeState) func(*sequence, string, nodeupgrade.State) bool {
	return func(_ *sequence, n string, st nodeupgrade.State) bool { return n == node && st.State == step }
}

// since is true once d passed since the sequence began.
func since(start *time.Time, d time.Duration) func(*sequence, string, nodeupgrade.State) bool {
	return func(q *sequence, _ string, _ nodeupgrade.State) bool {
		if start.IsZero() {
			*start = q.clock.Now()
		}
		return q.clock.Now().Sub(*start) >= d
	}
}

// ruleCase is a Longhorn rule, or a situation of a real cluster, that a fix
// of the node steps or the data plane exists for: the scenario, the fix
// reverted (mutate), and what the sequence then finds.
type ruleCase struct {
	name string
	// rules are the simulator's rules the finding depends on: with any one
	// off, the fix reverted finds nothing of the kind.
	rules []sim.Rule
	cfg   sim.Config
	// n1 shapes the node upgraded as it is built; setup shapes the
	// cluster before the upgrade; during changes it under the upgrade, as a
	// user would (each run gets its own).
	n1     func(*sim.NodeSpec)
	setup  func(t testing.TB, s *sim.Sim)
	during func() func(*sequence, string, nodeupgrade.State)
	// mutate reverts the fix in the run's sequence.
	mutate func(q *sequence)
	// want is the kind of violation the fix reverted makes.
	want string
}

// ruleCases are the fixes of the node steps against Longhorn v1.12.1's
// rules (sim/RULES.md names the case proving each rule).
var ruleCases = []ruleCase{
	{name: "switch-back: scheduling restored only once every target is home",
		rules: []sim.Rule{sim.RuleRevertWhileSwitchingOver, sim.RuleRevertLeavesPathDown},
		cfg: sim.Config{TargetMoveLatency: 4 * time.Second, IMStartLatency: 10 * time.Second, RebuildLatency: 20 * time.Second,
			ReplicaStartLatency: 3500 * time.Millisecond},
		mutate: func(q *sequence) { q.decide = restoringSchedulingFirst },
		want:   violPathDown},
	{name: "failing-replicas: a replica stopped only once its engine removed it",
		rules:  []sim.Rule{sim.RuleReplicaLinkTimeout},
		cfg:    sim.Config{TargetMoveLatency: 4 * time.Second, IMStartLatency: 10 * time.Second, RebuildLatency: 20 * time.Second, ReplicaRemoveLatency: 3 * time.Second},
		mutate: func(q *sequence) { q.plane = onePatchFailure{q.s} },
		want:   violIOStall},
	{name: "upgrading-instance-manager: the old IM deleted in the foreground",
		rules: []sim.Rule{sim.RuleIMPodLingers},
		cfg: sim.Config{TargetMoveLatency: 4 * time.Second, IMStartLatency: 10 * time.Second, RebuildLatency: 20 * time.Second,
			PodTerminationLatency: 20 * time.Second, NodeReconcileLatency: 30 * time.Second},
		mutate: func(q *sequence) { q.plane = backgroundIMDeletion{q.s} },
		want:   violIMOverlap},
	{name: "a cordoned node is held before its IM is touched",
		rules: []sim.Rule{sim.RuleNoIMOnCordonedNode},
		cfg:   sim.Config{TargetMoveLatency: 4 * time.Second, IMStartLatency: 10 * time.Second, RebuildLatency: 20 * time.Second},
		setup: func(t testing.TB, s *sim.Sim) { require.NoError(t, s.Cordon("n1")) },
		during: func() func(*sequence, string, nodeupgrade.State) {
			var t0 time.Time
			return once(since(&t0, 20*time.Minute), uncordon("n1"))
		},
		mutate: func(q *sequence) { q.decide = ignoring(func(o *observation) { o.node.Cordoned = false }) },
		want:   violNoIM},
	{name: "a default image changed under the upgrade holds it, Longhorn's IM left alone",
		rules: []sim.Rule{sim.RuleDefaultIMFollowsSetting},
		cfg:   sim.Config{TargetMoveLatency: 4 * time.Second, IMStartLatency: 10 * time.Second, RebuildLatency: 20 * time.Second},
		during: func() func(*sequence, string, nodeupgrade.State) {
			var t0 time.Time
			return inTurn(
				once(at("n1", events.NodeSwitchingOver), setDefaultImage("longhornio/longhorn-instance-manager:v1.12.2")),
				once(since(&t0, 20*time.Minute), setDefaultImage(sim.NewIMImage)))
		},
		// A Longhorn upgrade rolls every manager out with the setting: the
		// fix reverted must ignore both.
		mutate: func(q *sequence) {
			q.decide = ignoring(func(o *observation) { o.defaultImage, o.node.ManagerIMImage = "", sim.NewIMImage })
		},
		want: violDeletedDefIM},
	{name: "a node whose longhorn-manager has not rolled out is held, its IM kept",
		rules: []sim.Rule{sim.RuleDefaultIMFollowsSetting},
		cfg:   sim.Config{TargetMoveLatency: 4 * time.Second, IMStartLatency: 10 * time.Second, RebuildLatency: 20 * time.Second},
		n1:    func(n *sim.NodeSpec) { n.ManagerImage = sim.OldIMImage },
		during: func() func(*sequence, string, nodeupgrade.State) {
			var t0 time.Time
			return once(since(&t0, 20*time.Minute), rollOutManager("n1"))
		},
		mutate: func(q *sequence) {
			q.decide = ignoring(func(o *observation) { o.node.ManagerIMImage = sim.NewIMImage })
		},
		want: violNoIM},
	{name: "an IM running shards is held, not emptied",
		rules: []sim.Rule{sim.RuleShardsNotCounted},
		cfg:   sim.Config{TargetMoveLatency: 4 * time.Second, IMStartLatency: 10 * time.Second, RebuildLatency: 20 * time.Second},
		setup: func(t testing.TB, s *sim.Sim) { require.NoError(t, s.SetShards("n1", 2)) },
		during: func() func(*sequence, string, nodeupgrade.State) {
			var t0 time.Time
			return once(since(&t0, 20*time.Minute), moveShards("n1"))
		},
		mutate: func(q *sequence) {
			q.decide = ignoring(func(o *observation) {
				for i := range o.ims {
					o.ims[i].Shards = 0
				}
			})
		},
		want: violShardsLost},
	{name: "a volume whose initiator's kernel has no native multipath keeps its target",
		rules: []sim.Rule{sim.RuleNoSecondPathWithoutMultipath},
		cfg:   sim.Config{TargetMoveLatency: 4 * time.Second, IMStartLatency: 10 * time.Second, RebuildLatency: 20 * time.Second},
		setup: func(t testing.TB, s *sim.Sim) { require.NoError(t, s.SetMultipath("c1", dataplane.MultipathOff)) },
		during: func() func(*sequence, string, nodeupgrade.State) {
			var t0 time.Time
			return once(since(&t0, 20*time.Minute), setMultipath("c1", dataplane.MultipathOn))
		},
		mutate: func(q *sequence) { q.plane = multipathUnread{q.s} },
		want:   violPathDown},
	{name: "a volume attached during the node's window, its target on the node, is recorded and moved",
		cfg: sim.Config{TargetMoveLatency: 4 * time.Second, IMStartLatency: 10 * time.Second, RebuildLatency: 20 * time.Second},
		// Detached, its engine placed on n1 (spec.engineNodeID survives a
		// detach): nothing of it on n1 when the node is recorded.
		setup: func(t testing.TB, s *sim.Sim) {
			require.NoError(t, s.AddVolumeSpec(sim.VolumeSpec{Name: "vol-e", EngineOn: "n1", ReplicasOn: []string{"n2", "n3"}}))
		},
		during: func() func(*sequence, string, nodeupgrade.State) {
			return once(at("n1", events.NodeFailingReplicas), attach("vol-e", "c1"))
		},
		mutate: func(q *sequence) { q.decide = recordingNothingLate },
		want:   violIncomplete},
}

func uncordon(node string) func(*sequence) {
	return func(q *sequence) { require.NoError(q.t, q.s.Uncordon(node)) }
}

func setDefaultImage(image string) func(*sequence) {
	return func(q *sequence) { require.NoError(q.t, q.s.SetDefaultIMImage(image)) }
}

func rollOutManager(node string) func(*sequence) {
	return func(q *sequence) { require.NoError(q.t, q.s.SetManagerImage(node, sim.NewIMImage)) }
}

func setMultipath(node string, m dataplane.Multipath) func(*sequence) {
	return func(q *sequence) { require.NoError(q.t, q.s.SetMultipath(node, m)) }
}

func moveShards(node string) func(*sequence) {
	return func(q *sequence) { require.NoError(q.t, q.s.SetShards(node, 0)) }
}

func attach(volume, node string) func(*sequence) {
	return func(q *sequence) { require.NoError(q.t, q.s.AttachVolume(volume, node)) }
}

// run runs one case's upgrade of n1, with rules off as given and the fix
// reverted or not, and returns the violation kinds found.
func (rc ruleCase) run(t *testing.T, off []sim.Rule, reverted bool) []string {
	t.Helper()
	cfg := rc.cfg
	cfg.Disable = off
	var tweaks []func(*sim.NodeSpec)
	if rc.n1 != nil {
		tweaks = append(tweaks, rc.n1)
	}
	s, fc := storageNodes(t, cfg, tweaks...)
	if rc.setup != nil {
		rc.setup(t, s)
	}
	q := newSequence(t, s, fc, 1)
	q.limit = time.Hour
	if rc.during != nil {
		q.during = rc.during()
	}
	if reverted {
		rc.mutate(q)
	}
	q.upgrade("n1")
	return q.kinds()
}

// TestRulesAreLoadBearing proves each fix against the rule it exists for:
// with the fix, the sequence finds nothing; with it reverted, it finds the
// case's violation; and with the rule it depends on switched off, the
// reverted fix finds none of it, so the rule is what a test needs to see
// the hazard.
func TestRulesAreLoadBearing(t *testing.T) {
	for _, rc := range ruleCases {
		t.Run(rc.name, func(t *testing.T) {
			assert.Empty(t, rc.run(t, nil, false), "with the fix")
			assert.Contains(t, rc.run(t, nil, true), rc.want, "with the fix reverted")
			for _, rule := range rc.rules {
				assert.NotContains(t, rc.run(t, []sim.Rule{rule}, true), rc.want, "with the fix reverted and %s off", rule)
			}
		})
	}
}

// TestEveryRuleHasItsCase: every rule the simulator plays is load-bearing
// for a case here or for a named test of the Longhorn adapter.
func TestEveryRuleHasItsCase(t *testing.T) {
	proven := map[sim.Rule]bool{
		// Played on Longhorn's objects by the simulated manager, proven by
		// the adapter's tests (longhorn/rules_test.go).
		sim.RuleSnapshotCRSync: true, sim.RuleV1120TargetIP: true,
		// What a revert needs and the one rebuild at a time: the first case
		// (the switch-back) finds its stall only through them; their
		// physics tests are in sim/rules_test.go.
		sim.RuleReplenishWithOneEngine: true, sim.RuleOneRebuildPerVolume: true, sim.RuleReplenishmentWait: true,
		// A new IM beside a lingering pod fails (its overlap is what the
		// foreground case finds either way).
		sim.RuleIMOverlapFails: true,
		// The order of a temporary replica's restore, the controller's:
		// orchestrator TestAddFirstKeepsRedundancy.
		sim.RuleExtraReplicaCleanup: true,
		// Room for a temporary replica, the precheck's: orchestrator
		// TestAddFirstRefusedWithoutRoom.
		sim.RuleReplicaSpace: true,
	}
	for _, rc := range ruleCases {
		for _, r := range rc.rules {
			proven[r] = true
		}
	}
	for _, r := range sim.Rules {
		assert.True(t, proven[r.Rule], "rule %s has no case", r.Rule)
	}
}

// TestSwitchoverRedirectedWhenItsTemporaryTargetIsLost: Longhorn has no
// timeout on a switch-over, and one whose temporary target goes NotReady
// while it prepares stays preparing for good. The switch-over is sent to
// another node and the upgrade completes, Longhorn rebuilding the lost
// node's replica elsewhere; with the redirect reverted (the lost node shown
// fit), the node never gets past switching-over.
func TestSwitchoverRedirectedWhenItsTemporaryTargetIsLost(t *testing.T) {
	run := func(t *testing.T, reverted bool) (kinds []string, redirected bool) {
		fc := sim.NewFakeClock(time.Time{})
		s := sim.New(sim.Config{Clock: fc, TargetMoveLatency: 4 * time.Second, IMStartLatency: 10 * time.Second, RebuildLatency: 20 * time.Second,
			ReplicaReplenishWait: 600 * time.Second})
		for _, n := range []string{"c1", "n1", "n2", "n3", "n4"} {
			require.NoError(t, s.AddNode(n))
		}
		require.NoError(t, s.AddVolumeSpec(sim.VolumeSpec{Name: "vol-x", AttachedTo: "c1", EngineOn: "n1", ReplicasOn: []string{"n1", "n2", "n3"}}))
		s.Settle()
		q := newSequence(t, s, fc, 1)
		q.limit = time.Hour
		// The node stays lost: Longhorn rebuilds its replica elsewhere.
		var lost string
		q.during = func(q *sequence, node string, st nodeupgrade.State) {
			if v := st.Volumes["vol-x"]; lost == "" && node == "n1" && v.State == events.VolumeSwitchingOver && v.TargetNode != "" {
				lost = v.TargetNode
				require.NoError(q.t, q.s.InjectNodeNotReady(lost))
			}
			redirected = redirected || (lost != "" && st.Volumes["vol-x"].TargetNode != lost && st.Volumes["vol-x"].State == events.VolumeSwitchingOver)
		}
		if reverted {
			q.decide = ignoring(func(o *observation) {
				if o.placement == nil {
					return
				}
				for i := range o.placement.Nodes {
					if o.placement.Nodes[i].Name == lost {
						o.placement.Nodes[i].Ready = true
					}
				}
				for i := range o.placement.InstanceManagers {
					if o.placement.InstanceManagers[i].Node == lost {
						o.placement.InstanceManagers[i].State = dataplane.IMRunning
					}
				}
			})
		}
		q.upgrade("n1")
		require.NotEmpty(t, lost, "the temporary target was lost while the volume switched over")
		return q.kinds(), redirected
	}
	kinds, redirected := run(t, false)
	assert.Empty(t, kinds, "with the redirect")
	assert.True(t, redirected, "the switch-over was redirected")
	kinds, redirected = run(t, true)
	assert.Contains(t, kinds, violIncomplete, "with the redirect reverted")
	assert.False(t, redirected)
}

// TestMoveWorkloadsEmptiesAWorkloadNode: with move-workloads, the node that
// holds every initiator (c1) is upgraded too, after the storage nodes: the
// node is tainted first, each pod using a volume attached there is evicted
// once and lands on an upgraded node, the taint comes off once the new
// instance manager runs, and every check of a sequence holds throughout.
func TestMoveWorkloadsEmptiesAWorkloadNode(t *testing.T) {
	for seed := range uint64(8) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			s, fc := storageNodes(t, seededLatencies(seed))
			require.NoError(t, s.AddPods())
			q := newSequence(t, s, fc, seed)
			q.policy = events.InitiatorPolicyMoveWorkloads
			taintedWhileReplaced := false
			q.during = func(q *sequence, node string, st nodeupgrade.State) {
				if node == "c1" && st.State == events.NodeUpgradingInstanceManager {
					n, err := q.s.Node(context.Background(), "c1")
					require.NoError(t, err)
					taintedWhileReplaced = n.WorkloadTainted
				}
			}
			q.upgrade("n1", "n2", "n3", "c1")
			require.Empty(t, q.found)
			assert.True(t, taintedWhileReplaced, "the node is tainted while its instance manager is replaced")

			c1 := q.states["c1"]
			require.NotNil(t, c1.Taint)
			assert.True(t, c1.Taint.Removed, "the taint came off")
			var moved []string
			for _, m := range c1.Moved {
				moved = append(moved, m.Pod)
			}
			assert.Equal(t, []string{"app/vol-a-0", "app/vol-b-0", "app/vol-c-0"}, moved, "each pod moved once")
			n, err := s.Node(context.Background(), "c1")
			require.NoError(t, err)
			assert.False(t, n.WorkloadTainted)
			for _, p := range s.Pods() {
				assert.Contains(t, []string{"n1", "n2", "n3"}, p.Node, "pod %s landed on an upgraded node", p)
			}
			for _, n := range []string{"n1", "n2", "n3"} {
				assert.Empty(t, q.states[n].Moved, "a storage node moves nothing")
				assert.Nil(t, q.states[n].Taint, "a storage node is not tainted")
			}
			taint := slices.Index(q.log, "TaintNode c1")
			first := slices.IndexFunc(q.log, func(l string) bool { return strings.HasPrefix(l, "EvictPod ") })
			require.GreaterOrEqual(t, taint, 0)
			assert.Less(t, taint, first, "tainted before the first eviction")
		})
	}
}

// TestMoveWorkloadsNeverTouchesAPinnedNode: a DaemonSet's pod using a
// volume attached to c1 pins it: c1 stalls naming the pod, nothing is
// evicted, and the node is not even tainted.
func TestMoveWorkloadsNeverTouchesAPinnedNode(t *testing.T) {
	s, fc := storageNodes(t, sim.Config{})
	require.NoError(t, s.AddPod(sim.PodSpec{Namespace: "app", Name: "agent", Node: "c1", Controller: "DaemonSet", Claims: []string{"vol-a"}}))
	require.NoError(t, s.AddPods())
	q := newSequence(t, s, fc, 1)
	q.policy = events.InitiatorPolicyMoveWorkloads
	q.limit = 30 * time.Minute
	q.upgrade("c1")
	assert.Equal(t, []string{violIncomplete}, q.kinds())
	c1 := q.states["c1"]
	assert.Equal(t, events.NodeInitializing, c1.State)
	assert.Equal(t, workloadmove.PinDaemonSetPod, c1.StallReason)
	assert.Contains(t, c1.StallMessage, "app/agent")
	assert.Nil(t, c1.Taint)
	assert.Empty(t, c1.Moved)
	for _, l := range q.log {
		assert.NotRegexp(t, "^(TaintNode|EvictPod)", l)
	}
}

// TestWaitLeavesAWorkloadNodeAlone: with the default policy the same node
// stalls on its initiators, touching nothing, as before.
func TestWaitLeavesAWorkloadNodeAlone(t *testing.T) {
	s, fc := storageNodes(t, sim.Config{})
	require.NoError(t, s.AddPods())
	q := newSequence(t, s, fc, 1)
	q.limit = 30 * time.Minute
	q.upgrade("c1")
	assert.Equal(t, []string{violIncomplete}, q.kinds())
	assert.Equal(t, ReasonInitiatorsOnNode, q.states["c1"].StallReason)
	for _, l := range q.log {
		assert.True(t, strings.HasPrefix(l, "# "), "no data-plane call: %s", l)
	}
}
