package report

import (
	"slices"
	"strings"
	"time"

	"github.com/switchback-dev/switchback/aggregate/upgrade"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/replay"
)

// BuildTimeline lays out the history of one manager incarnation (stream order, as
// Latest picks it). Every event is first offered to the upgrade's own fold
// (upgrade.Upgrade.Apply): what it refuses is listed in Refused and drawn
// nowhere, so the page never shows a transition the controller did not make.
func BuildTimeline(history []events.Envelope) *Timeline {
	f := folder{t: &Timeline{}, u: upgrade.New(), byName: map[string]*Node{}}
	for _, e := range history {
		if err := f.u.Apply(e); err != nil {
			f.t.Refused = append(f.t.Refused, Mark{At: e.Time, Sequence: e.Sequence, Node: e.Aggregate.Node,
				What: string(e.Type()), Message: err.Error()})
			continue
		}
		f.apply(e)
	}
	f.finish()
	return f.t
}

// Latest returns the events of the last manager incarnation the history
// mentions (a manager deleted and created again under its name starts a
// new history), and how many incarnations there were.
func Latest(history []events.Envelope) (events.ManagerRef, []events.Envelope, int) {
	var refs []events.ManagerRef
	for _, e := range history {
		if !slices.Contains(refs, e.Aggregate.Manager) {
			refs = append(refs, e.Aggregate.Manager)
		}
	}
	if len(refs) == 0 {
		return events.ManagerRef{}, nil, 0
	}
	ref := refs[len(refs)-1]
	var out []events.Envelope
	for _, e := range history {
		if e.Aggregate.Manager == ref {
			out = append(out, e)
		}
	}
	return ref, out, len(refs)
}

// folder is BuildTimeline's working state.
type folder struct {
	t      *Timeline
	u      upgrade.Upgrade
	byName map[string]*Node
	hold   *Span
	// seen is set once an event was applied: the first sets the span.
	seen bool
}

func (f *folder) node(name string) *Node {
	n, ok := f.byName[name]
	if !ok {
		n = &Node{Name: name}
		f.byName[name] = n
	}
	return n
}

// mark is the Mark of e, worded as `switchback history` words it.
func mark(e events.Envelope) Mark {
	l := replay.Describe(e)
	return Mark{At: e.Time, Sequence: e.Sequence, Node: l.Node, What: l.What, Message: l.Message}
}

func (f *folder) apply(e events.Envelope) {
	t := f.t
	if !f.seen {
		f.seen = true
		t.Start, t.End, t.FirstSequence = e.Time, e.Time, e.Sequence
	}
	if e.Time.Before(t.Start) {
		t.Start = e.Time
	}
	if e.Time.After(t.End) {
		t.End = e.Time
	}
	t.LastSequence = e.Sequence
	t.Manager = e.Aggregate.Manager
	if e.Aggregate.IsNode() {
		f.applyNode(f.node(e.Aggregate.Node), e)
		return
	}
	switch d := e.Data.(type) {
	case events.PrecheckFailed, events.UpgradeFailed:
		t.Errors = append(t.Errors, mark(e))
		if _, ok := d.(events.UpgradeFailed); ok {
			t.Outcome = ptr(mark(e))
		}
	case events.UpgradePlanned:
		t.Image, t.LonghornProfile, t.LonghornVersion = d.InstanceManagerImage, d.LonghornProfile, d.LonghornVersion
	case events.NodeScheduled:
		f.node(d.Node).Scheduled = e.Time
	case events.UpgradeCompleted, events.UpgradeCancelled:
		t.Outcome = ptr(mark(e))
	case events.CancelRequested:
		t.Cancel = ptr(mark(e))
	case events.UpgradeHeld:
		if f.hold == nil {
			f.hold = &Span{Start: e.Time, Reason: d.Reason}
		}
		f.hold.Message = d.Message
	case events.UpgradeReleased:
		if f.hold != nil {
			f.hold.End, f.hold.CloseMessage = e.Time, d.Message
			t.Holds = append(t.Holds, *f.hold)
			f.hold = nil
		}
	}
}

func (f *folder) applyNode(n *Node, e events.Envelope) {
	switch d := e.Data.(type) {
	case events.NodeUpgradeStarted:
		n.Start, n.Attempt = e.Time, d.Attempt
		n.Steps = append(n.Steps, &Step{Name: events.NodePending, Span: Span{Start: e.Time}})
	case events.NodeStateChanged:
		f.endStep(n, e, "next", d.Message)
		n.Steps = append(n.Steps, &Step{Name: d.To, Span: Span{Start: e.Time, Message: d.Message}})
	case events.NodeStalled:
		if s := openStall(n); s != nil {
			// One stall whose cause changed on the way: its reasons in turn.
			if s.Volume = d.Volume; !strings.HasSuffix(s.Reason, d.Reason) {
				s.Reason += ", then " + d.Reason
			}
			s.Messages = appendNew(s.Messages, d.Message)
			break
		}
		n.Stalls = append(n.Stalls, &Stall{Step: d.Step, Volume: d.Volume,
			Span: Span{Start: e.Time, Reason: d.Reason}, Messages: []string{d.Message}})
		if s := openStep(n); s != nil {
			s.Stalled = true
		}
	case events.NodeResumed:
		endStall(n, e.Time, d.Message)
	case events.NodeUpgradeCompleted:
		f.endStep(n, e, "completed", d.Message)
	case events.NodeUpgradeFailed:
		f.endStep(n, e, "failed", d.Reason+": "+d.Message)
		f.t.Errors = append(f.t.Errors, mark(e))
	case events.NodeUpgradeCancelled:
		f.endStep(n, e, "cancelled", d.Message)
	case events.RebuildPlanned:
		r := rebuildOf(n)
		r.Volumes++
		r.Expected, r.Full = r.Expected+d.ExpectedBytes, r.Full+d.FullBytes
		if d.Hashed {
			r.Hashed++
		}
	case events.RebuildStarted:
		if r := rebuildOf(n); r.First.IsZero() || d.At.Before(r.First) {
			r.First = d.At
		}
	case events.RebuildFinished:
		r := rebuildOf(n)
		r.Finished++
		if d.At.After(r.Last) {
			r.Last = d.At
		}
	case events.TemporaryReplicaAdded:
		rebuildOf(n).Temporary++
	case events.PodMoved:
		n.Moved = append(n.Moved, PodMove{At: e.Time, Pod: d.Pod, Volumes: slices.Clone(d.Volumes), Restart: d.Restart})
	case events.VolumeStateChanged:
		if !isMove(d.To) {
			break
		}
		v := volume(n, d.Volume)
		v.Moves = append(v.Moves, Move{At: e.Time, From: d.From, To: d.To, TargetNode: d.TargetNode, Message: d.Message})
		if d.To == events.VolumeError {
			f.t.Errors = append(f.t.Errors, mark(e))
		}
	}
	if st, ok := f.u.Nodes[n.Name]; ok {
		n.State, n.Message = st.State, st.Message
	}
}

// endStep closes the node's open step as e leaves it (a new step, or an
// end): whatever stalled it is over too, as the node's fold has it.
func (f *folder) endStep(n *Node, e events.Envelope, outcome, message string) {
	endStall(n, e.Time, message)
	if s := openStep(n); s != nil {
		s.End, s.Outcome, s.CloseMessage = e.Time, outcome, message
	}
	if outcome != "next" {
		n.End = e.Time
	}
}

// isMove says whether a volume change is part of a switch-over: being
// recorded, or done without a move, is not.
func isMove(s events.VolumeState) bool {
	switch s {
	case events.VolumeSwitchingOver, events.VolumeSwitchedOver, events.VolumeSwitchingBack,
		events.VolumeSwitchedBack, events.VolumeError:
		return true
	}
	return false
}

func volume(n *Node, name string) *Volume {
	for _, v := range n.Volumes {
		if v.Name == name {
			return v
		}
	}
	v := &Volume{Name: name, Node: n.Name}
	n.Volumes = append(n.Volumes, v)
	return v
}

func openStep(n *Node) *Step {
	if len(n.Steps) == 0 || n.Steps[len(n.Steps)-1].Outcome != "" {
		return nil
	}
	return n.Steps[len(n.Steps)-1]
}

func openStall(n *Node) *Stall {
	if len(n.Stalls) == 0 || !n.Stalls[len(n.Stalls)-1].End.IsZero() {
		return nil
	}
	return n.Stalls[len(n.Stalls)-1]
}

func endStall(n *Node, at time.Time, message string) {
	if s := openStall(n); s != nil {
		s.End, s.CloseMessage = at, message
	}
}

// finish closes what the history left open at its end, orders the nodes
// and sums up.
func (f *folder) finish() {
	t := f.t
	t.State = f.u.Manager.State
	if f.hold != nil {
		f.hold.Open = true
		t.Holds = append(t.Holds, *f.hold)
	}
	for _, name := range f.u.NodeNames() {
		t.Nodes = append(t.Nodes, f.node(name))
		delete(f.byName, name)
	}
	// Nodes only the manager named (scheduled, never started) and not in
	// the plan: a refused plan cannot hide them.
	rest := make([]string, 0, len(f.byName))
	for name := range f.byName {
		rest = append(rest, name)
	}
	slices.Sort(rest)
	for _, name := range rest {
		t.Nodes = append(t.Nodes, f.byName[name])
	}
	for i := range t.Holds {
		t.close(&t.Holds[i])
	}
	for _, n := range t.Nodes {
		for _, s := range n.Steps {
			t.close(&s.Span)
		}
		for _, s := range n.Stalls {
			t.close(&s.Span)
		}
		if !n.Start.IsZero() && n.End.IsZero() {
			n.End = t.End
		}
	}
	t.Totals = totals(t)
}

// close ends an open span at the timeline's end, and keeps every span
// inside the timeline (event times are the writers' clocks: they may step
// back).
func (t *Timeline) close(s *Span) {
	if s.End.IsZero() {
		s.End, s.Open = t.End, true
	}
	s.Start = clampTime(s.Start, t.Start, t.End)
	s.End = clampTime(s.End, s.Start, t.End)
}

func clampTime(v, lo, hi time.Time) time.Time {
	if v.Before(lo) {
		return lo
	}
	if v.After(hi) {
		return hi
	}
	return v
}

func appendNew(list []string, s string) []string {
	if s == "" || slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}

func ptr[T any](v T) *T { return &v }

// rebuildOf is n's rebuild summary, made on first use.
func rebuildOf(n *Node) *Rebuild {
	if n.Rebuild == nil {
		n.Rebuild = &Rebuild{}
	}
	return n.Rebuild
}
