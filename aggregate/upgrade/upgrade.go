// Package upgrade is the one fold of an upgrade: a manager incarnation and
// its node upgrades, each folded with its own aggregate's Evolve (the very
// functions the command side decides with), in stream order. `switchback
// replay` and `replay --verify`, the projector's view and the
// orchestrator's read model of the upgrades in progress all fold with it.
package upgrade

import (
	"slices"

	"github.com/switchback-dev/switchback/aggregate/manager"
	"github.com/switchback-dev/switchback/aggregate/nodeupgrade"
	"github.com/switchback-dev/switchback/events"
)

// Upgrade is one manager incarnation and its node upgrades, folded.
type Upgrade struct {
	Manager manager.State
	// Nodes are the node upgrades by node; an owned upgrade's (NewOwned)
	// lag behind Apply until Sync.
	Nodes map[string]nodeupgrade.State
	// LastSequence is the stream sequence of the last event applied or
	// refused.
	LastSequence uint64

	// folders are the node folds of an owned upgrade; behind is the one
	// whose state Nodes may not show yet, the fold of the last node event's
	// node, behindNode.
	folders    map[string]*nodeupgrade.Folder
	behind     *nodeupgrade.Folder
	behindNode string
}

// New returns the upgrade before its first event.
func New() Upgrade { return Upgrade{Nodes: map[string]nodeupgrade.State{}} }

// NewOwned returns the upgrade before its first event, for a fold read only
// between runs of events (a replay): a volume change writes into its node's
// volume map instead of copying the map, once per change, as Evolve does,
// and Nodes is brought up to date by Sync rather than at every event (a
// node state is large to copy). A node state read from Nodes may change at
// the next Apply.
func NewOwned() Upgrade {
	u := New()
	u.folders = map[string]*nodeupgrade.Folder{}
	return u
}

// Apply folds one event of the upgrade's history: a node's subject into
// that node's upgrade, the manager's into the manager. An event its
// aggregate refuses (an illegal transition a faulty writer appended) leaves
// the state as it was and is returned as the error; LastSequence moves on
// either way, the event having been looked at.
func (u *Upgrade) Apply(e events.Envelope) error {
	u.LastSequence = e.Sequence
	if !e.Aggregate.IsNode() {
		next, err := manager.Evolve(u.Manager, e)
		if err != nil {
			return err
		}
		u.Manager = next
		return nil
	}
	if u.Nodes == nil {
		u.Nodes = map[string]nodeupgrade.State{}
	}
	if u.folders != nil {
		return u.folder(e.Aggregate.Node).Apply(e)
	}
	next, err := nodeupgrade.Evolve(u.Nodes[e.Aggregate.Node], e)
	if err != nil {
		return err
	}
	u.Nodes[e.Aggregate.Node] = next
	return nil
}

// folder returns an owned upgrade's fold of node, the one behind: a run of
// one node's events (its volumes' changes) finds it without a lookup.
func (u *Upgrade) folder(node string) *nodeupgrade.Folder {
	if u.behind != nil && u.behindNode == node {
		return u.behind
	}
	u.Sync()
	f := u.folders[node]
	if f == nil {
		f = nodeupgrade.NewFolder(u.Nodes[node])
		u.folders[node] = f
	}
	u.behind, u.behindNode = f, node
	return f
}

// Sync brings an owned upgrade's Nodes up to date with what was applied;
// an upgrade made by New is always up to date.
func (u *Upgrade) Sync() {
	if u.behind == nil {
		return
	}
	// A node none of whose events applied has no state to show.
	if s := u.behind.Current(); s.Exists {
		u.Nodes[u.behindNode] = s
	}
	u.behind, u.behindNode = nil, ""
}

// Active reports whether the upgrade is in progress: requested and not
// ended (events.ManagerState.Terminal, the one definition the admission
// webhook applies to the resources' status too).
func (u *Upgrade) Active() bool { return u.Manager.Exists && !u.Manager.Terminal() }

// NodeNames returns the upgrade's nodes in plan order, then any others sorted.
func (u *Upgrade) NodeNames() []string {
	out := slices.Clone(u.Manager.Plan)
	var extra []string
	for n := range u.Nodes {
		if !slices.Contains(out, n) {
			extra = append(extra, n)
		}
	}
	slices.Sort(extra)
	return append(out, extra...)
}
