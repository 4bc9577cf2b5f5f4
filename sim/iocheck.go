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

// IOStats summarises the I/O checker.
type IOStats struct {
	// Issued counts I/Os sent (one per attached volume per round).
	Issued uint64
	// Failed counts failed I/Os; FailedInjected those caused by injected faults.
	Failed         uint64
	FailedInjected uint64
	// Failures are the failure episodes, oldest first, at most
	// Config.IOLogLimit; Dropped counts episodes beyond it.
	Failures []IOFailure
	Dropped  int
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
	return b.String()
}

type ioChecker struct {
	issued, failed, failedInjected uint64
	dirty                          map[string]struct{}
	failing                        map[string]*IOFailure
	failingPeak                    int
	log                            []*IOFailure
	dropped                        int
	limit                          int
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
	return ioChecker{dirty: map[string]struct{}{}, failing: map[string]*IOFailure{}, limit: limit}
}

func (c *ioChecker) mark(vol string) { c.dirty[vol] = struct{}{} }

// checkIO sends one I/O to every attached volume. Only volumes whose path
// changed since the last round are re-evaluated; the others fail or succeed
// as they did, so a round costs O(changed + failing) and gives exactly the
// counts a full scan would.
func (s *Sim) checkIO() int {
	now := s.now()
	c := &s.io
	if len(c.dirty) > 0 {
		for _, name := range sortedKeys(c.dirty) {
			var f *IOFailure
			if v := s.vols[name]; v != nil {
				f = s.ioPath(v)
			}
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
		c.dirty = drained(c.dirty)
		c.shrinkFailing()
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
	return len(c.failing)
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
	st := IOStats{Issued: s.io.issued, Failed: s.io.failed, FailedInjected: s.io.failedInjected, Dropped: s.io.dropped}
	st.Failures = make([]IOFailure, len(s.io.log))
	for i, f := range s.io.log {
		st.Failures[i] = *f
	}
	return st
}

// ResetIOStats zeroes the counters and the log (ongoing failures start a new
// episode at the next round), e.g. after building a cluster with faults.
func (s *Sim) ResetIOStats() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.io.issued, s.io.failed, s.io.failedInjected, s.io.dropped, s.io.log = 0, 0, 0, 0, nil
	for name := range s.io.failing {
		delete(s.io.failing, name)
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

// ioPath follows one I/O: initiator on the attached node, NVMe-oF target,
// then a healthy replica. It returns nil when the I/O succeeds. On
// ProfileV112 the initiator runs in the attached node's IM and dies with it;
// on ProfileInPlace it is a kernel client that does not depend on its
// node's IM, which is why moving the target away first makes an IM restart
// harmless there.
func (s *Sim) ioPath(v *volume) *IOFailure {
	if v.attached == "" {
		return nil
	}
	if n := s.nodes[v.attached]; n == nil {
		return failure(true, v.attached, "", "initiator node %s deleted", v.attached)
	} else if !n.ready {
		return failure(true, v.attached, "", "initiator node %s NotReady", v.attached)
	}
	if f := s.initiatorDown(v); f != nil {
		return f
	}
	if v.broken != "" {
		return failure(false, v.target, "", "%s", v.broken)
	}
	if f := s.targetDown(v); f != nil {
		return f
	}
	for _, r := range v.replicas {
		if s.replicaServes(v, r) {
			return nil
		}
	}
	return failure(s.replicasLostToFault(v), "", "", "no healthy replica reachable (%s)", describeReplicas(v))
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
	for _, sl := range v.slots {
		if sl.byFault {
			return true
		}
	}
	return false
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
	// UnsafePathBroken: the engine node changed while the initiator's path
	// was being switched.
	UnsafePathBroken UnsafeKind = "path-broken"
	// UnsafeNoHealthyReplica: an attached volume has no reachable healthy replica.
	UnsafeNoHealthyReplica UnsafeKind = "no-healthy-replica"
	// UnsafeEngineMoved: a volume's spec.engineNodeID differs from what its
	// user set, while the node being upgraded is not its engine's home.
	UnsafeEngineMoved UnsafeKind = "engine-moved"
	// UnsafeSwitchover: a switch-over is under way on a volume whose
	// engine's home is not the node being upgraded.
	UnsafeSwitchover UnsafeKind = "switchover"
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
			if v.broken != "" {
				out = append(out, Unsafe{Kind: UnsafePathBroken, Volume: name, Node: v.target, Detail: v.broken})
			}
			if f := s.targetDown(v); f != nil {
				out = append(out, Unsafe{Kind: UnsafeTargetDown, Volume: name, Node: f.Node, Detail: f.Reason, Injected: f.Injected})
			}
			if !slices.ContainsFunc(v.replicas, func(r *replica) bool { return s.replicaServes(v, r) }) {
				inj := s.replicasLostToFault(v)
				out = append(out, Unsafe{Kind: UnsafeNoHealthyReplica, Volume: name, Detail: failure(inj, "", "", "no healthy replica reachable (%s)", describeReplicas(v)).Reason, Injected: inj})
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
	return out
}
