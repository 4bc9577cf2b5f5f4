package nodeworker

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/aggregate"
	"github.com/switchback-dev/switchback/aggregate/nodeupgrade"
	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/orchestrator"
	"github.com/switchback-dev/switchback/sim"
)

// A sequence drives node upgrades on a simulated Longhorn v1.12 cluster in
// one goroutine, on the simulator's clock, with no NATS: each turn either
// lets the simulated Longhorn reconcile (its clock moves to its next
// completion, or on by a random step) or runs one round of the node's
// current step (gather, decide, apply), in an order drawn from a seeded
// source; the node's history is folded with nodeupgrade.Decide and
// nodeupgrade.FoldStopping. After every turn it checks what must hold
// throughout: no I/O failed, no I/O queued over sim.StallThreshold, no
// volume without a reachable healthy replica, nothing unsafe; and, once a
// node completed, every target home and the node's replica scheduling as
// it was.

// decider is a node step's decision: decide, or a test's version of it
// with a fix reverted.
type decider func(events.NodeState, observation, nodeupgrade.State, settings) stepPlan

// violation is one thing a sequence found wrong.
type violation struct {
	kind, detail string
}

func (v violation) String() string { return v.kind + ": " + v.detail }

// Violation kinds.
const (
	violIOFailed      = "io-failed"
	violIOStall       = "io-stall"
	violUnsafe        = "unsafe"
	violNotHome       = "target-not-home"
	violScheduling    = "scheduling-not-restored"
	violIncomplete    = "incomplete"
	violNodeFailed    = "node-failed"
	violDeletedDefIM  = "deleted-default-im"
	violNoIM          = "no-instance-manager"
	violPathDown      = string(sim.UnsafePathBroken)
	violIMOverlap     = string(sim.UnsafeIMOverlap)
	violShardsLost    = string(sim.UnsafeShardsLost)
	violNoHealthyCopy = string(sim.UnsafeNoHealthyReplica)
)

// sequence is one run.
type sequence struct {
	t     testing.TB
	s     *sim.Sim
	clock *sim.FakeClock
	// plane is what the steps act on: s, or a wrapper reverting a fix of
	// the data plane.
	plane  dataplane.DataPlane
	decide decider
	rng    *rand.Rand
	ref    events.ManagerRef
	// log is what happened, in order: the steps' data-plane calls and the
	// node's step changes and stalls (the golden sequence).
	log []string
	// found are the violations, each kind once.
	found []violation
	// during is called before every turn (a test changing the cluster as a
	// user would at a given moment).
	during func(q *sequence, node string, st nodeupgrade.State)
	// limit is how much simulated time one node may take.
	limit time.Duration
	// noIMSince is since when the node in flight has had no running
	// instance manager.
	noIMSince time.Time
	// policy is the initiator policy every node upgrade starts with.
	policy string
	// states are the node upgrades as they ended, by node.
	states map[string]nodeupgrade.State
}

// noIMFor is the longest a node may go without a running instance manager:
// an IM replaced takes its pod's termination and the new one's start.
const noIMFor = 5 * time.Minute

func newSequence(t testing.TB, s *sim.Sim, clock *sim.FakeClock, seed uint64) *sequence {
	return &sequence{t: t, s: s, clock: clock, plane: s, decide: decide, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		ref: events.ManagerRef{Namespace: "longhorn-system", Name: "seq", UID: "uid-sequence"}, limit: 3 * time.Hour,
		states: map[string]nodeupgrade.State{}}
}

func (q *sequence) violate(kind, format string, args ...any) {
	if !slices.ContainsFunc(q.found, func(v violation) bool { return v.kind == kind }) {
		q.found = append(q.found, violation{kind, fmt.Sprintf(format, args...)})
	}
}

// kinds lists the violations found, by kind.
func (q *sequence) kinds() []string {
	var out []string
	for _, v := range q.found {
		out = append(out, v.kind)
	}
	return out
}

// upgrade upgrades the nodes one after another, stopping at the first that
// does not complete.
func (q *sequence) upgrade(nodes ...string) {
	for _, n := range nodes {
		if !q.upgradeNode(n) {
			return
		}
	}
}

// node is one node's upgrade in a sequence.
type node struct {
	q    *sequence
	name string
	st   nodeupgrade.State
	c    settings
	pc   pacing
	ids  int
	// before is the node's spec.allowScheduling and the engine node of
	// every volume, as they were.
	before  bool
	engines map[string]string
}

func (q *sequence) upgradeNode(name string) bool {
	ctx := context.Background()
	image, err := q.s.DefaultInstanceManagerImage(ctx)
	require.NoError(q.t, err)
	n0, err := q.s.Node(ctx, name)
	require.NoError(q.t, err)
	nd := &node{q: q, name: name, before: n0.AllowScheduling, engines: engineNodes(q.t, q.s),
		c: settings{node: name, image: image, snapshot: "switchback-seq-" + name, idPrefix: "worker/seq/" + name + "/"}}
	nd.exec(nodeupgrade.Start{Meta: aggregate.Meta{ID: nd.nextID()}, Node: name, DataEngine: dataplane.DataEngineV2, InstanceManagerImage: image, Attempt: 1,
		LonghornProfile: string(dataplane.ProfileV112), InitiatorPolicy: q.policy})
	defer func() { q.states[name] = nd.st }()
	start := q.clock.Now()
	q.s.SetPhase(name + "/" + string(nd.st.State))
	for !nd.st.Terminal() {
		if q.clock.Now().Sub(start) > q.limit {
			q.violate(violIncomplete, "node %s still %s after %s: %s", name, nd.st.State, q.limit, nd.st.Message)
			return false
		}
		if q.during != nil {
			q.during(q, name, nd.st)
		}
		if q.rng.IntN(3) == 0 {
			q.reconcile(time.Second)
		} else if progressed, wait := nd.round(ctx); !progressed {
			q.reconcile(wait)
		}
		q.check(name)
		if len(q.found) > 0 {
			return false // what the turn found is what the test asks about
		}
	}
	if nd.st.State != events.NodeCompleted {
		q.violate(violNodeFailed, "node %s ended %s: %s", name, nd.st.State, nd.st.Message)
		return false
	}
	q.checkEnd(nd)
	return true
}

// reconcile lets the simulated Longhorn run: up to its next completion,
// or, when it has none within wait, by wait; half the time by a random
// part of that instead, so that the steps' rounds fall between Longhorn's
// reactions in every order.
func (q *sequence) reconcile(wait time.Duration) {
	d := max(wait, time.Millisecond)
	if due, ok := q.s.NextDue(); ok && due.Sub(q.clock.Now()) < d {
		d = max(due.Sub(q.clock.Now()), 0)
	}
	if q.rng.IntN(2) == 0 {
		d = time.Duration(q.rng.Int64N(int64(d) + 1))
	}
	q.s.Advance(d)
}

// round is one round of the node's current step: it reports whether it
// changed anything, and else how long the worker would wait.
func (nd *node) round(ctx context.Context) (bool, time.Duration) {
	q := nd.q
	step := nd.st.State
	var p stepPlan
	o, err := gather(ctx, q.plane, nd.name, step, nd.st, q.clock.Now())
	switch {
	case err != nil:
		p.block = waiting("", "DataPlaneError", "%v", err)
	case nd.st.CancelRequested:
		p = decideCancel(o, nd.st, nd.c)
	default:
		p = q.decide(step, o, nd.st, nd.c)
	}
	progressed := len(p.record)+len(p.rebuilds)+len(p.volumes)+len(p.actions)+len(p.confirm) > 0
	for _, c := range p.record {
		nd.exec(c)
	}
	if len(p.rebuilds) > 0 {
		nd.exec(nodeupgrade.RecordRebuilds{Meta: aggregate.Meta{ID: nd.nextID()}, Events: p.rebuilds})
	}
	if len(p.volumes) > 0 {
		nd.exec(nodeupgrade.SetVolumeStates{Meta: aggregate.Meta{ID: nd.nextID()}, Changes: p.volumes})
	}
	for _, a := range p.actions {
		err := call(ctx, q.plane, a)
		line := a.String()
		if err != nil {
			line += " → " + err.Error()
		}
		nd.logCall(line)
		if a.Call == dataplane.CallDeleteInstanceManager {
			nd.checkDeleted(o, a.Object)
		}
	}
	for _, c := range p.confirm {
		nd.exec(c)
	}
	switch {
	case p.fatal != nil:
		nd.exec(nodeupgrade.Fail{Meta: aggregate.Meta{ID: nd.nextID()}, Step: step, Reason: p.fatal.reason, Message: p.fatal.message})
		return true, 0
	case p.done && nd.st.CancelRequested:
		nd.exec(nodeupgrade.ConfirmCancelled{Meta: aggregate.Meta{ID: nd.nextID()}, Message: "cancelled"})
		return true, 0
	case p.done:
		nd.exec(nodeupgrade.CompleteStep{Meta: aggregate.Meta{ID: nd.nextID()}, From: step, Message: "done"})
		q.s.SetPhase(nd.name + "/" + string(nd.st.State))
		return true, 0
	}
	t := pace(outcome{progressed: progressed, block: p.block}, nd.st.Stalled, nd.pc, q.clock.Now(),
		policy{stallAfter: 2 * time.Minute, failAfter: 10 * time.Minute, idle: 30 * time.Second})
	nd.pc = t.pacing
	if t.resume {
		nd.exec(nodeupgrade.ReportProgress{Meta: aggregate.Meta{ID: nd.nextID()}, Step: step, Message: "progressing again"})
	}
	if t.fail != nil {
		nd.exec(nodeupgrade.Fail{Meta: aggregate.Meta{ID: nd.nextID()}, Step: step, Reason: t.fail.reason, Message: t.fail.message})
		return true, 0
	}
	if b := t.stall; b != nil {
		nd.exec(nodeupgrade.ReportStall{Meta: aggregate.Meta{ID: nd.nextID()}, Step: step, Volume: b.volume, Reason: b.reason, Message: b.message})
	}
	return progressed, t.wait
}

// logCall records a data-plane call unless it repeats the line before (a
// wait asking again).
func (nd *node) logCall(line string) {
	q := nd.q
	if n := len(q.log); n == 0 || q.log[n-1] != line {
		q.log = append(q.log, line)
	}
}

// checkDeleted flags the deletion of an IM of Longhorn's default image
// (not the upgrade's target): Longhorn creates it again.
func (nd *node) checkDeleted(o observation, name string) {
	image, err := nd.q.s.DefaultInstanceManagerImage(context.Background())
	require.NoError(nd.q.t, err)
	for _, im := range o.ims {
		if im.Name == name && im.Image == image && image != nd.c.image {
			nd.q.violate(violDeletedDefIM, "the worker deleted instance manager %s of Longhorn's default image %s", name, image)
		}
	}
}

// nextID is the id of the harness's next command of its own (the steps'
// commands carry theirs).
func (nd *node) nextID() string {
	nd.ids++
	return fmt.Sprintf("%s%d", nd.c.idPrefix, nd.ids)
}

// exec decides and folds one node command.
func (nd *node) exec(cmd nodeupgrade.Command) {
	q := nd.q
	id := cmd.CommandID()
	evs, err := nodeupgrade.Decide(nd.st, cmd)
	require.NoError(q.t, err, "%T", cmd)
	if len(evs) == 0 {
		return
	}
	envs := events.New(events.NodeAggregate(q.ref, nd.name), events.SourceWorker+"/"+nd.name, id, q.clock.Now(), evs...)
	was := nd.st
	nd.st, err = nodeupgrade.FoldStopping(nd.st, envs)
	require.NoError(q.t, err)
	nd.projectTargetsAway(envs)
	nd.requestHashing(envs)
	switch {
	case nd.st.State != was.State:
		q.log = append(q.log, fmt.Sprintf("# %s: %s", nd.name, nd.st.State))
	case nd.st.Stalled && (!was.Stalled || nd.st.StallReason != was.StallReason):
		q.log = append(q.log, fmt.Sprintf("# %s: stalled %s (%s)", nd.name, nd.st.StallReason, nd.st.StallVolume))
	}
}

// projectTargetsAway plays the controller's part: the records of targets
// away the volume changes among envs call for, written at once.
func (nd *node) projectTargetsAway(envs []events.Envelope) {
	q := nd.q
	for _, e := range envs {
		d, ok := e.Data.(events.VolumeStateChanged)
		if !ok {
			continue
		}
		v, err := q.s.Volume(context.Background(), d.Volume)
		if err != nil {
			continue
		}
		if want, write, _ := orchestrator.TargetAwayRecord(nd.name, nd.st.Volumes[d.Volume], v); write {
			require.NoError(q.t, q.s.RecordTargetAway(context.Background(), d.Volume, want))
		}
	}
}

// requestHashing plays the controller's part in the hashing of snapshots:
// each request recorded among envs written at once (one refused because
// another is in progress is left, as the controller leaves it).
func (nd *node) requestHashing(envs []events.Envelope) {
	for _, e := range envs {
		if d, ok := e.Data.(events.HashingRequested); ok {
			err := nd.q.s.RequestSnapshotHashing(context.Background(), d.Volume, d.At)
			if !errors.Is(err, dataplane.ErrRefused) {
				require.NoError(nd.q.t, err)
			}
		}
	}
}

// check is what must hold after every turn while node is upgraded.
func (q *sequence) check(node string) {
	ims, err := q.s.InstanceManagers(context.Background(), node)
	require.NoError(q.t, err)
	if slices.ContainsFunc(ims, func(im dataplane.InstanceManager) bool { return im.State == dataplane.IMRunning }) {
		q.noIMSince = time.Time{}
	} else if now := q.clock.Now(); q.noIMSince.IsZero() {
		q.noIMSince = now
	} else if now.Sub(q.noIMSince) > noIMFor {
		q.violate(violNoIM, "node %s has had no running instance manager for %s", node, now.Sub(q.noIMSince))
	}
	st := q.s.IOStats()
	if n := st.FailedByActions(); n > 0 {
		q.violate(violIOFailed, "%d I/O(s) failed: %s", n, st)
	}
	for _, s := range st.StallsByActions() {
		q.violate(violIOStall, "volume %s queued I/O for %s at %s: %s", s.Volume, s.Duration(st.At), s.Phase, s.Cause)
	}
	for _, u := range q.s.Unsafe(node) {
		if u.Injected {
			continue
		}
		switch u.Kind {
		case sim.UnsafeIMOverlap, sim.UnsafeShardsLost, sim.UnsafeNoHealthyReplica, sim.UnsafePathBroken:
			q.violate(string(u.Kind), "%s", u)
		default:
			q.violate(violUnsafe, "%s", u)
		}
	}
}

// checkEnd is what must hold once a node completed.
func (q *sequence) checkEnd(nd *node) {
	ctx := context.Background()
	n, err := q.s.Node(ctx, nd.name)
	require.NoError(q.t, err)
	if n.AllowScheduling != nd.before {
		q.violate(violScheduling, "node %s allows scheduling %t, %t before", nd.name, n.AllowScheduling, nd.before)
	}
	for vol, was := range nd.engines {
		if now := engineNodes(q.t, q.s)[vol]; now != was {
			q.violate(violNotHome, "volume %s: spec.engineNodeID %q, %q before", vol, now, was)
		}
	}
	for _, u := range q.s.Unsafe("") {
		if !u.Injected {
			q.violate(violUnsafe, "%s", u)
		}
	}
}

func engineNodes(t testing.TB, s *sim.Sim) map[string]string {
	vols, err := s.Volumes(context.Background())
	require.NoError(t, err)
	out := map[string]string{}
	for _, v := range vols {
		if v.DataEngine == dataplane.DataEngineV2 {
			out[v.Name] = v.EngineNode
		}
	}
	return out
}
