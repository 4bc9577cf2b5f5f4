// Package report turns one upgrade's history into a picture of it: Fold
// reads a manager's events (pure, no I/O) into a Timeline — per node its
// steps, stalls and errors, per volume its switch-over moves, the cancel
// point and the totals — and Render writes that as one self-contained HTML
// page (`switchback report`), which needs no network to be viewed.
package report

import (
	"time"

	"github.com/switchback-dev/switchback/events"
)

// Timeline is an upgrade as its history tells it, laid out in time.
type Timeline struct {
	// Manager is the incarnation the events belong to.
	Manager events.ManagerRef
	// Start and End are the times of the first and last applied event: the
	// span every bar is drawn against.
	Start, End time.Time
	// FirstSequence and LastSequence are the stream sequences read.
	FirstSequence, LastSequence uint64
	// UntilSeq is the sequence the history was cut at (`--until-seq`), 0
	// when it was read to its end. Fold leaves it to the caller.
	UntilSeq uint64
	// State is the manager's state at the end of the history.
	State events.ManagerState
	// Image, LonghornProfile and LonghornVersion come from the plan.
	Image           string
	LonghornProfile string
	LonghornVersion string
	// Nodes are in plan order, then nodes outside the plan by name.
	Nodes []*Node
	// Outcome is how the upgrade ended (completed, failed or cancelled),
	// nil while it runs.
	Outcome *Mark
	// Cancel is where the cancel was requested, nil without one.
	Cancel *Mark
	// Holds are the spans during which no new node could start.
	Holds []Span
	// Errors are the failed prechecks, failed nodes and volumes, and the
	// upgrade's failure, in history order.
	Errors []Mark
	// Refused are the events the folds rejected (a faulty writer); they are
	// left out of everything else, as the controller leaves them out.
	Refused []Mark
	Totals  Totals
}

// Mark is one moment of the history worth pointing at.
type Mark struct {
	At       time.Time
	Sequence uint64
	// Node is the node concerned, "" for the manager.
	Node string
	// What says what happened; Message is the event's own explanation.
	What    string
	Message string
}

// Span is a stretch of time with the messages that opened and closed it.
type Span struct {
	Start, End time.Time
	// Open is set when the history ends before the span does; End is then
	// the timeline's end.
	Open         bool
	Reason       string
	Message      string
	CloseMessage string
}

// Node is one node's upgrade.
type Node struct {
	Name string
	// Attempt is the attempt the worker started.
	Attempt int
	// Scheduled is when the manager handed the node to its worker; Start and
	// End span its steps (zero until started).
	Scheduled  time.Time
	Start, End time.Time
	// State is the node's state at the end of the history ("" when never
	// started).
	State events.NodeState
	// Message is the last message of the node's history.
	Message string
	Steps   []*Step
	Stalls  []*Stall
	Volumes []*Volume
	// Moved are the pods the node's upgrade moved off it, in order.
	Moved []PodMove
	// Rebuild sums the node's rebuilds, nil when none was planned.
	Rebuild *Rebuild
}

// Rebuild is what a node's rebuilds were expected to copy (the plan's
// bytes: Longhorn reports none) and when they were seen.
type Rebuild struct {
	// Volumes, Hashed and Finished count the volumes whose rebuild was
	// planned, hashed first, and seen over.
	Volumes, Hashed, Finished int
	// Expected and Full are the bytes expected, and a whole copy's.
	Expected, Full int64
	// First is when the first rebuild was seen under way, Last when the
	// last was seen over.
	First, Last time.Time
	// Temporary counts the temporary replicas the node added
	// (replicaPolicy add-first).
	Temporary int
}

// Took is the time from the first rebuild seen to the last over (zero
// unless both were).
func (r *Rebuild) Took() time.Duration {
	if r.First.IsZero() || !r.Last.After(r.First) {
		return 0
	}
	return r.Last.Sub(r.First)
}

// PodMove is one pod moved off a node so that its initiators went.
type PodMove struct {
	At      time.Time
	Pod     string
	Volumes []string
	// Restart marks a share-manager pod restarted elsewhere (its NFS
	// clients reconnect) rather than evicted.
	Restart bool
}

// Step is one working step of a node, from the event that entered it to
// the one that left it.
type Step struct {
	Name events.NodeState
	Span
	// Outcome is how the step was left: "next" for the following step,
	// "completed", "failed" or "cancelled"; "" while open.
	Outcome string
	// Stalled is set when the step stalled at least once.
	Stalled bool
}

// Duration is how long the step took (or has taken, if open).
func (s *Step) Duration() time.Duration { return s.End.Sub(s.Start) }

// Stall is a stretch during which a step made no progress.
type Stall struct {
	Step   events.NodeState
	Volume string
	Span
	// Messages are the distinct messages the stall was reported with, in
	// order: its cause may change while it lasts.
	Messages []string
}

// Volume is one volume whose target the node's upgrade moved.
type Volume struct {
	Name string
	// Node is the node whose upgrade moved it.
	Node  string
	Moves []Move
}

// Away is how long the volume's target was away from its node: from its
// first move to its last (the history's end when still away).
func (v *Volume) Away(end time.Time) time.Duration {
	if len(v.Moves) == 0 {
		return 0
	}
	last := v.Moves[len(v.Moves)-1]
	if last.To != events.VolumeSwitchedBack && last.To != events.VolumeError {
		return end.Sub(v.Moves[0].At)
	}
	return last.At.Sub(v.Moves[0].At)
}

// Move is one switch-over state change of a volume.
type Move struct {
	At         time.Time
	From, To   events.VolumeState
	TargetNode string
	Message    string
}

// Totals sum the timeline up.
type Totals struct {
	// Duration is the timeline's span.
	Duration time.Duration
	// Steps is the time spent in each step, summed over the nodes, in step
	// order.
	Steps []StepTotal
	// Nodes are the started nodes, slowest first.
	Nodes []NodeTotal
	// Volumes are the moved volumes, longest away first (at most
	// SlowestVolumes).
	Volumes []VolumeTotal
	// Stalled is the time spent stalled, summed over the nodes.
	Stalled time.Duration
}

// SlowestVolumes is how many volumes Totals.Volumes keeps.
const SlowestVolumes = 10

// StepTotal is the time one step took over all nodes.
type StepTotal struct {
	Step  events.NodeState
	Nodes int
	Total time.Duration
}

// NodeTotal is the time one node took.
type NodeTotal struct {
	Node     string
	State    events.NodeState
	Duration time.Duration
	Stalled  time.Duration
}

// VolumeTotal is how long one volume's target was away.
type VolumeTotal struct {
	Node, Volume string
	Away         time.Duration
}
