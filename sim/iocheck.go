package sim

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/switchback-dev/switchback/dataplane"
)

// InjectedPrefix starts the reason of every I/O failure or unsafe condition
// caused by an injected fault rather than by an action.
const InjectedPrefix = "injected fault: "

// IOFailure is one episode of failed I/O on a volume: consecutive I/O rounds
// that failed for the same reason. Episodes keep the log short and readable
// while Count keeps the exact number of failed I/Os.
type IOFailure struct {
	Volume string
	// Node and InstanceManager name what cut the I/O path, when one did.
	Node            string
	InstanceManager string
	Reason          string
	// Injected is true when an injected fault, not an action, caused it.
	Injected    bool
	First, Last time.Time
	Count       uint64
}

// The initiator's patience, and what counts as a stall.
const (
	// QueueTimeout is how long a kernel NVMe initiator queues I/O with no
	// usable path before it fails it: its ctrl-loss-tmo (go-spdk-helper
	// initiator/nvmecli.go).
	QueueTimeout = 30 * time.Second
	// StallThreshold is the longest I/O may queue without counting as a
	// stall.
	StallThreshold = time.Second
)

// IOStall is one episode of queued I/O on a volume: the initiator had no
// usable path, or its engine waited on a dead replica link, from Start to
// End (zero while it lasts). I/O queued longer than QueueTimeout fails
// (an IOFailure).
type IOStall struct {
	Volume string
	// Cause is why the I/O waited, when it began.
	Cause string
	// Phase is what SetPhase said when it began (e.g. a node and its step).
	Phase string
	// Injected is true when an injected fault caused it.
	Injected   bool
	Start, End time.Time
}

// Duration is how long the stall lasted, or has lasted by now.
func (st IOStall) Duration(now time.Time) time.Duration {
	if st.End.IsZero() {
		return now.Sub(st.Start)
	}
	return st.End.Sub(st.Start)
}

// IOStats summarises the I/O checker.
type IOStats struct {
	// Issued counts I/Os sent (one per attached volume per round).
	Issued uint64
	// Failed counts failed I/Os; FailedInjected those caused by injected faults.
	Failed         uint64
	FailedInjected uint64
	// Queued counts I/Os that waited (and had not failed yet).
	Queued uint64
	// Failures are the failure episodes, oldest first, at most
	// Config.IOLogLimit; Dropped counts episodes beyond it.
	Failures []IOFailure
	Dropped  int
	// Stalls are the episodes of queued I/O longer than StallThreshold,
	// oldest first, those still lasting included (with End zero), at most
	// Config.IOLogLimit.
	Stalls []IOStall
	// Breaches are, with Config.FullRedundancy, the moments an attached
	// volume served from fewer nodes than the healthy replicas it was
	// built with (UnsafeRedundancy), one per episode, checked at every
	// change of the cluster; at most Config.IOLogLimit.
	Breaches []Unsafe
	// At is when the stats were taken: the end of a lasting stall.
	At time.Time
}

// StallsByActions returns the stalls not explained by an injected fault.
func (st IOStats) StallsByActions() []IOStall {
	var out []IOStall
	for _, s := range st.Stalls {
		if !s.Injected {
			out = append(out, s)
		}
	}
	return out
}

// WorstStall returns the longest stall not explained by an injected fault
// (zero when none).
func (st IOStats) WorstStall() IOStall {
	var worst IOStall
	for _, s := range st.StallsByActions() {
		if worst.Start.IsZero() || s.Duration(st.At) > worst.Duration(st.At) {
			worst = s
		}
	}
	return worst
}

// FailedByActions counts failed I/Os not explained by an injected fault:
// those the upgrade (or another caller of the actions) caused. The whole
// point of the design is that it stays 0.
func (st IOStats) FailedByActions() uint64 { return st.Failed - st.FailedInjected }

// String summarises the stats and lists the episodes.
func (st IOStats) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "I/O: %d issued, %d failed (%d by injected faults, %d by actions)",
		st.Issued, st.Failed, st.FailedInjected, st.FailedByActions())
	for _, f := range st.Failures {
		fmt.Fprintf(&b, "\n  %s %s: %s (%d I/Os until %s)", f.First.Format(time.RFC3339Nano), f.Volume, f.Reason, f.Count, f.Last.Format(time.RFC3339Nano))
	}
	if st.Dropped > 0 {
		fmt.Fprintf(&b, "\n  … %d more episodes dropped", st.Dropped)
	}
	for _, s := range st.Stalls {
		fmt.Fprintf(&b, "\n  stall %s %s for %s (%s): %s", s.Start.Format(time.RFC3339Nano), s.Volume, s.Duration(st.At), s.Phase, s.Cause)
	}
	return b.String()
}

type ioChecker struct {
	issued, failed, failedInjected, queuedIOs uint64
	dirty                                     map[string]struct{}
	failing                                   map[string]*IOFailure
	failingPeak                               int
	log                                       []*IOFailure
	dropped                                   int
	limit                                     int
	// queued are the volumes whose I/O waits now, with the stall's start.
	queued map[string]*IOStall
	// stalls are the ended stalls over StallThreshold.
	stalls []IOStall
	// phase labels the stalls that begin (SetPhase).
	phase string
	// breaching are the volumes short of redundancy now; breaches the
	// episodes (Config.FullRedundancy).
	breaching map[string]bool
	breaches  []Unsafe
}

// smallMap is the size under which emptied maps are cleared in place.
const smallMap = 64

// drained returns an empty map to reuse after processing m. Go maps never
// shrink, and iterating or clearing one costs its peak size: after the
// builder marked every volume once, a cleared map would make every later
// round O(cluster).
func drained[V any](m map[string]V) map[string]V {
	if len(m) > smallMap {
		return map[string]V{}
	}
	clear(m)
	return m
}

// shrinkFailing reallocates the failing set once it is far below its peak
// (say, after a deleted node's volumes recovered), for the same reason.
func (c *ioChecker) shrinkFailing() {
	c.failingPeak = max(c.failingPeak, len(c.failing))
	if c.failingPeak > smallMap && len(c.failing)*4 < c.failingPeak {
		c.failing = maps.Clone(c.failing)
		if c.failing == nil {
			c.failing = map[string]*IOFailure{}
		}
		c.failingPeak = len(c.failing)
	}
}

func newIOChecker(limit int) ioChecker {
	return ioChecker{dirty: map[string]struct{}{}, failing: map[string]*IOFailure{}, queued: map[string]*IOStall{}, limit: limit}
}

func (c *ioChecker) mark(vol string) { c.dirty[vol] = struct{}{} }

// checkIO sends one I/O to every attached volume. Only volumes whose path
// changed since the last round are re-evaluated; the others fail, wait or
// succeed as they did, so a round costs O(changed + failing + waiting) and
// gives exactly the counts a full scan would. I/O that has waited
// QueueTimeout fails.
func (s *Sim) checkIO() int {
	now := s.now()
	c := &s.io
	if len(c.dirty) > 0 {
		for _, name := range sortedKeys(c.dirty) {
			var o ioOutcome
			if v := s.vols[name]; v != nil {
				o = s.ioPath(v)
			}
			f := o.fail
			if o.queue != "" {
				q := c.queued[name]
				if q == nil {
					q = &IOStall{Volume: name, Cause: o.queue, Phase: c.phase, Injected: o.injected, Start: now}
					c.queued[name] = q
					s.schedule(&timer{due: now.Add(QueueTimeout), kind: timerIOTimeout, obj: name})
				}
				f = c.timedOut(q, now)
			} else if q := c.queued[name]; q != nil {
				c.endStall(q, now)
				delete(c.queued, name)
			}
			c.setFailing(name, f, now)
			if s.cfg.FullRedundancy {
				s.checkRedundancy(name, now)
			}
		}
		c.dirty = drained(c.dirty)
		c.shrinkFailing()
	}
	for name, q := range c.queued {
		if f := c.timedOut(q, now); f != nil && c.failing[name] == nil {
			c.setFailing(name, f, now)
		}
	}
	c.issued += uint64(s.attached)
	for _, f := range c.failing {
		f.Count++
		f.Last = now
		c.failed++
		if f.Injected {
			c.failedInjected++
		}
	}
	c.queuedIOs += uint64(len(c.queued) - min(len(c.queued), c.timedOutCount(now)))
	return len(c.failing)
}

// checkRedundancy records the start of an episode of the volume named
// serving from fewer nodes than it was built with.
func (s *Sim) checkRedundancy(name string, now time.Time) {
	c := &s.io
	v := s.vols[name]
	short := v != nil && v.attached != "" && s.servingNodes(v) < v.redundancy
	switch {
	case !short:
		delete(c.breaching, name)
	case !c.breaching[name]:
		if c.breaching == nil {
			c.breaching = map[string]bool{}
		}
		c.breaching[name] = true
		if len(c.breaches) < c.limit {
			c.breaches = append(c.breaches, Unsafe{Kind: UnsafeRedundancy, Volume: name, Injected: s.replicasLostToFault(v),
				Detail: fmt.Sprintf("%s: healthy replicas on %d node(s), built with %d (%s)", now.Format(time.RFC3339Nano), s.servingNodes(v), v.redundancy, describeReplicas(v))})
		}
	}
}

// setFailing records what a volume's I/O does now: f nil succeeds (or
// waits), a failure of the same reason continues its episode.
func (c *ioChecker) setFailing(name string, f *IOFailure, now time.Time) {
	old := c.failing[name]
	switch {
	case f == nil:
		delete(c.failing, name)
	case old != nil && old.Reason == f.Reason:
	default:
		f.Volume, f.First = name, now
		c.failing[name] = f
		if len(c.log) < c.limit {
			c.log = append(c.log, f)
		} else {
			c.dropped++
		}
	}
}

// timedOut is the failure of I/O that has waited QueueTimeout, nil before.
func (c *ioChecker) timedOut(q *IOStall, now time.Time) *IOFailure {
	if now.Sub(q.Start) < QueueTimeout {
		return nil
	}
	return failure(q.Injected, "", "", "I/O queued for %s failed (the initiator's ctrl-loss-tmo): %s", QueueTimeout, q.Cause)
}

func (c *ioChecker) timedOutCount(now time.Time) int {
	n := 0
	for _, q := range c.queued {
		if now.Sub(q.Start) >= QueueTimeout {
			n++
		}
	}
	return n
}

// endStall ends a stall, keeping it when it lasted over StallThreshold.
func (c *ioChecker) endStall(q *IOStall, now time.Time) {
	q.End = now
	if q.Duration(now) > StallThreshold && len(c.stalls) < c.limit {
		c.stalls = append(c.stalls, *q)
	}
}

// SetPhase labels the stalls that begin from now on (the harness's node and
// step), so that a stall reports what the upgrade was doing.
func (s *Sim) SetPhase(label string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.io.phase = label
}

// CheckIO runs a round of I/O now (after applying due completions) and
// returns how many I/Os of that round failed.
func (s *Sim) CheckIO() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tick()
	return s.checkIO()
}

// IOStats returns the checker's counters and failure log.
func (s *Sim) IOStats() IOStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tick()
	now := s.now()
	st := IOStats{Issued: s.io.issued, Failed: s.io.failed, FailedInjected: s.io.failedInjected, Queued: s.io.queuedIOs, Dropped: s.io.dropped, At: now}
	st.Failures = make([]IOFailure, len(s.io.log))
	for i, f := range s.io.log {
		st.Failures[i] = *f
	}
	st.Stalls = slices.Clone(s.io.stalls)
	st.Breaches = slices.Clone(s.io.breaches)
	for _, name := range sortedKeys(s.io.queued) {
		if q := s.io.queued[name]; q.Duration(now) > StallThreshold {
			st.Stalls = append(st.Stalls, *q)
		}
	}
	slices.SortStableFunc(st.Stalls, func(a, b IOStall) int { return a.Start.Compare(b.Start) })
	return st
}

// ResetIOStats zeroes the counters and the log (ongoing failures start a new
// episode at the next round), e.g. after building a cluster with faults.
func (s *Sim) ResetIOStats() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.io.issued, s.io.failed, s.io.failedInjected, s.io.queuedIOs, s.io.dropped, s.io.log, s.io.stalls, s.io.breaches = 0, 0, 0, 0, 0, nil, nil, nil
	for name := range s.io.failing {
		delete(s.io.failing, name)
		s.markVolume(name)
	}
	for name := range s.io.queued {
		delete(s.io.queued, name)
		s.markVolume(name)
	}
}

func failure(injected bool, nodeName, imName, format string, args ...any) *IOFailure {
	reason := fmt.Sprintf(format, args...)
	if injected {
		reason = InjectedPrefix + reason
	}
	return &IOFailure{Node: nodeName, InstanceManager: imName, Reason: reason, Injected: injected}
}

// ioOutcome is what one I/O to a volume does: succeed (zero), fail, or
// wait (queue says why).
type ioOutcome struct {
	fail     *IOFailure
	queue    string
	injected bool
}

// ioPath follows one I/O: initiator on the attached node, a usable path to
// an NVMe-oF target, the engine's RAID, then a healthy replica. On
// ProfileV112 the initiator runs in the attached node's IM and dies with
// it; on ProfileInPlace it is a kernel client that does not depend on its
// node's IM, which is why moving the target away first makes an IM restart
// harmless there. An initiator with no usable path, or an engine waiting on
// a dead replica link, queues the I/O.
func (s *Sim) ioPath(v *volume) ioOutcome {
	if v.attached == "" {
		return ioOutcome{}
	}
	if n := s.nodes[v.attached]; n == nil {
		return ioOutcome{fail: failure(true, v.attached, "", "initiator node %s deleted", v.attached)}
	} else if !n.ready {
		return ioOutcome{fail: failure(true, v.attached, "", "initiator node %s NotReady", v.attached)}
	}
	if f := s.initiatorDown(v); f != nil {
		return ioOutcome{fail: f}
	}
	if o, ok := s.paths(v); !ok {
		return o
	}
	for _, r := range v.replicas {
		if r.linkDown && r.inEngine {
			return ioOutcome{queue: fmt.Sprintf("the engine's RAID waits on replica %s, whose instance stopped while the engine held it (fast-io-fail %s)", r.name, s.cfg.ReplicaIOTimeout),
				injected: r.byFault}
		}
	}
	for _, r := range v.replicas {
		if s.replicaServes(v, r) {
			return ioOutcome{}
		}
	}
	return ioOutcome{fail: failure(s.replicasLostToFault(v), "", "", "no healthy replica reachable (%s)", describeReplicas(v))}
}

// paths says whether the initiator has a usable path to a running target,
// and when not, what its I/O does. During a switch-over the new engine's
// path serves from the initiator's preparing phase (non-optimized) and is
// the only one from its switching phase.
func (s *Sim) paths(v *volume) (ioOutcome, bool) {
	sw := v.sw
	newPath := sw != nil && sw.ef >= efPreparing && sw.engine.valid() && s.keepsPaths(v)
	if sw != nil && sw.ef == efSwitching {
		if newPath {
			return ioOutcome{}, true
		}
		if !s.keepsPaths(v) {
			return ioOutcome{queue: fmt.Sprintf("the old path to %s is inaccessible and the kernel of %s (nvme_core.multipath=N) did not put the new path to %s under the device", v.target, v.attached, sw.dest)}, false
		}
		return ioOutcome{queue: fmt.Sprintf("the new engine on %s stopped while the initiator's only path led to it", sw.dest)}, false
	}
	if v.pathDown != "" && !newPath {
		return ioOutcome{queue: v.pathDown}, false
	}
	if f := s.targetDown(v); f != nil && !newPath {
		return ioOutcome{fail: f}, false
	}
	return ioOutcome{}, true
}

// initiatorDown reports, on ProfileV112, an initiator whose IM stopped or
// restarted since the volume attached: Longhorn marks such a volume faulted
// and the workload loses its device until it is attached again.
func (s *Sim) initiatorDown(v *volume) *IOFailure {
	if v.engine != EngineV2 || s.cfg.Profile.InitiatorsSurviveIM() || v.initiator.valid() {
		return nil
	}
	m := v.initiator.im
	if m == nil {
		return failure(false, v.attached, "", "initiator on %s has no v2 instance manager", v.attached)
	}
	return failure(m.byFault, v.attached, m.name, "initiator on %s lost: instance manager %s was stopped", v.attached, m.name)
}

// targetDown reports why the volume's target cannot serve, or nil. NotReady
// and deleted nodes only happen through injected faults; an engine whose IM
// stopped or restarted was lost by an action (an IM that fails to start
// never gets an engine moved onto it), so that failure is the caller's.
func (s *Sim) targetDown(v *volume) *IOFailure {
	if v.target == "" {
		return failure(false, "", "", "no target")
	}
	n := s.nodes[v.target]
	switch {
	case n == nil:
		return failure(true, v.target, "", "target node %s deleted", v.target)
	case !n.ready:
		return failure(true, v.target, "", "target node %s NotReady", v.target)
	case v.engine != EngineV2 || v.targetIM.valid():
		return nil
	case v.targetIM.im == nil:
		return failure(false, v.target, "", "target node %s has no v2 instance manager", v.target)
	}
	m := v.targetIM.im
	return failure(m.byFault, v.target, m.name, "target on %s lost: instance manager %s was stopped", v.target, m.name)
}

func (s *Sim) replicaServes(v *volume, r *replica) bool {
	if r.state != dataplane.ReplicaRunning {
		return false
	}
	n := s.nodes[r.node]
	if n == nil || !n.ready {
		return false
	}
	return v.engine == EngineV1 || n.imRunning()
}

// replicasLostToFault attributes a volume without healthy replicas to an
// injected fault when any of its replicas was lost to one (node NotReady or
// deleted). Slow or never-finishing rebuilds do not count: the upgrade's
// health gate must wait for them.
func (s *Sim) replicasLostToFault(v *volume) bool {
	for _, r := range v.replicas {
		if r.byFault {
			return true
		}
		if n := s.nodes[r.node]; n == nil || !n.ready {
			return true
		}
	}
	return false
}

// servingNodes counts the nodes holding a replica of v that serves its
// I/O.
func (s *Sim) servingNodes(v *volume) int {
	var nodes []string
	for _, r := range v.replicas {
		if s.replicaServes(v, r) && !slices.Contains(nodes, r.node) {
			nodes = append(nodes, r.node)
		}
	}
	return len(nodes)
}

func describeReplicas(v *volume) string {
	if len(v.replicas) == 0 {
		return "no replicas"
	}
	// States are left out: an outage is one episode while its replicas go
	// from error to rebuilding, not one per transition.
	parts := make([]string, len(v.replicas))
	for i, r := range v.replicas {
		parts[i] = r.name + "@" + r.node
	}
	return strings.Join(parts, ", ")
}

// UnsafeKind classifies an unsafe condition.
type UnsafeKind string

// Unsafe condition kinds.
const (
	// UnsafeTargetDown: an attached volume's target is on a down IM or node.
	UnsafeTargetDown UnsafeKind = "target-down"
	// UnsafeInitiatorDown: an attached volume's initiator died with its IM.
	UnsafeInitiatorDown UnsafeKind = "initiator-down"
	// UnsafePathBroken: the initiator has no usable path although its
	// target runs: a switch-over withdrawn or reverted after the old path
	// was made inaccessible.
	UnsafePathBroken UnsafeKind = "path-broken"
	// UnsafeIMOverlap: an instance manager's pod started while a deleted
	// one's still terminated on the node (two SPDK targets, or a pod
	// refused for want of hugepages).
	UnsafeIMOverlap UnsafeKind = "im-overlap"
	// UnsafeShardsLost: an instance manager running erasure-coded shards
	// was removed.
	UnsafeShardsLost UnsafeKind = "shards-lost"
	// UnsafeNoHealthyReplica: an attached volume has no reachable healthy replica.
	UnsafeNoHealthyReplica UnsafeKind = "no-healthy-replica"
	// UnsafeEngineMoved: a volume's spec.engineNodeID differs from what its
	// user set, while the node being upgraded is not its engine's home.
	UnsafeEngineMoved UnsafeKind = "engine-moved"
	// UnsafeSwitchover: a switch-over is under way on a volume whose
	// engine's home is not the node being upgraded.
	UnsafeSwitchover UnsafeKind = "switchover"
	// UnsafeRedundancy: with Config.FullRedundancy, an attached volume
	// serves from fewer nodes than the healthy replicas it was built with.
	UnsafeRedundancy UnsafeKind = "redundancy"
)

// Unsafe is one unsafe condition of the cluster.
type Unsafe struct {
	Kind   UnsafeKind
	Volume string
	Node   string
	Detail string
	// Injected is true when an injected fault explains the condition.
	Injected bool
}

// String renders the condition for test failures.
func (u Unsafe) String() string {
	return fmt.Sprintf("%s %s: %s", u.Kind, u.Volume, u.Detail)
}

// Unsafe lists the unsafe conditions right now, sorted by volume. inFlight is
// the node being upgraded ("" for none): volumes whose engine lives there may
// have it elsewhere, their engine node changed and a switch-over under way.
func (s *Sim) Unsafe(inFlight string) []Unsafe {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tick()
	var out []Unsafe
	for _, name := range s.sortedVolumeNames() {
		v := s.vols[name]
		attachedLost := false
		if n := s.nodes[v.attached]; v.attached != "" && (n == nil || !n.ready) {
			attachedLost = true
		}
		home := v.baseline
		if home == "" {
			home = v.attached
		}
		if v.attached != "" {
			if f := s.initiatorDown(v); f != nil {
				out = append(out, Unsafe{Kind: UnsafeInitiatorDown, Volume: name, Node: f.Node, Detail: f.Reason, Injected: f.Injected})
			}
			if v.pathDown != "" {
				out = append(out, Unsafe{Kind: UnsafePathBroken, Volume: name, Node: v.target, Detail: v.pathDown})
			}
			if f := s.targetDown(v); f != nil {
				out = append(out, Unsafe{Kind: UnsafeTargetDown, Volume: name, Node: f.Node, Detail: f.Reason, Injected: f.Injected})
			}
			serving := s.servingNodes(v)
			if serving == 0 {
				inj := s.replicasLostToFault(v)
				out = append(out, Unsafe{Kind: UnsafeNoHealthyReplica, Volume: name, Detail: failure(inj, "", "", "no healthy replica reachable (%s)", describeReplicas(v)).Reason, Injected: inj})
			} else if s.cfg.FullRedundancy && serving < v.redundancy {
				out = append(out, Unsafe{Kind: UnsafeRedundancy, Volume: name, Injected: s.replicasLostToFault(v) || attachedLost,
					Detail: fmt.Sprintf("healthy replicas on %d node(s), built with %d (%s)", serving, v.redundancy, describeReplicas(v))})
			}
			if v.sw != nil && (inFlight == "" || home != inFlight) {
				out = append(out, Unsafe{Kind: UnsafeSwitchover, Volume: name, Node: v.sw.dest, Injected: attachedLost,
					Detail: fmt.Sprintf("switch-over to %s %s (upgrade in flight on %q)", v.sw.dest, v.sw.state, inFlight)})
			}
		}
		if v.engineNode != v.baseline && (inFlight == "" || home != inFlight) {
			out = append(out, Unsafe{Kind: UnsafeEngineMoved, Volume: name, Node: v.engineNode, Injected: attachedLost,
				Detail: fmt.Sprintf("spec.engineNodeID %q, set by its user to %q (upgrade in flight on %q)", v.engineNode, v.baseline, inFlight)})
		}
	}
	for _, o := range s.overlaps {
		out = append(out, Unsafe{Kind: UnsafeIMOverlap, Detail: o})
	}
	for _, l := range s.shardsLost {
		out = append(out, Unsafe{Kind: UnsafeShardsLost, Detail: l})
	}
	return out
}
