package projector

import (
	"context"
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/switchback-dev/switchback/aggregate/upgrade"
	"github.com/switchback-dev/switchback/api/v1beta2"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/eventstore"
)

// view is one manager's projection: its two kinds of aggregates folded with
// their own Evolve (the very functions the command side decides with), plus
// what the status needs and the aggregates do not keep: when each condition
// last changed and which event last changed each node upgrade.
//
// A view is a pure fold of the manager's history (every subject under
// sb.evt.<ns>.<name>.<uid>.>) in stream order: folding a prefix and then the
// rest equals folding everything at once, which is what lets the projector
// catch up from the stream after a restart and still write exactly what
// Replay computes offline.
type view struct {
	ref events.ManagerRef
	// Upgrade is the manager and its node upgrades, folded; its
	// LastSequence is the stream sequence of the last event of this
	// manager folded (refused events included: they were looked at).
	upgrade.Upgrade
	// nodeSeq is, per node, the sequence of the last event that changed its
	// NodeDataEngineUpgrade; it becomes that object's streamSequence.
	nodeSeq map[string]uint64
	// conds and nodeConds are folded too, with each event's time as the
	// transition time, so that a replay reproduces them to the second.
	conds     []metav1.Condition
	nodeConds map[string][]metav1.Condition
}

func newView(ref events.ManagerRef) *view {
	return &view{
		ref:       ref,
		Upgrade:   upgrade.New(),
		nodeSeq:   map[string]uint64{},
		nodeConds: map[string][]metav1.Condition{},
	}
}

// step is what folding one event did.
type step struct {
	seq uint64
	// at is the event's time, stamped when it was decided and appended.
	at time.Time
	// nodes are the node upgrades whose status the event changed, sorted.
	nodes []string
	// notices are the Kubernetes Events the transition deserves.
	notices []notice
	// err is set when the fold refused the event (an illegal transition a
	// faulty writer appended); the view is unchanged but for through.
	err error
}

// apply folds one event of this manager's history into v.
func (v *view) apply(e events.Envelope) step {
	st := step{seq: e.Sequence, at: e.Time}
	if e.Aggregate.Manager != v.ref {
		v.LastSequence = e.Sequence
		st.err = fmt.Errorf("event %s belongs to %s (uid %s), not %s", e.ID, e.Aggregate.Manager, e.Aggregate.Manager.UID, v.ref)
		return st
	}
	if st.err = v.Apply(e); st.err != nil {
		return st
	}
	if e.Aggregate.IsNode() {
		st.nodes = []string{e.Aggregate.Node}
	} else {
		st.nodes = v.nodesRenderedFromManager()
	}
	v.conds = setConditions(v.conds, managerConditions(v), e.Time)
	for _, n := range st.nodes {
		v.nodeSeq[n] = e.Sequence
		v.nodeConds[n] = setConditions(v.nodeConds[n], nodeConditions(v, n), e.Time)
	}
	st.notices = noticesFor(v, e)
	return st
}

// nodesRenderedFromManager lists the scheduled nodes whose worker has not
// started them: their NodeDataEngineUpgrade is rendered from the manager's
// view of them, so any manager event may change it. Once a node's own
// history exists, the manager's events no longer touch its object.
func (v *view) nodesRenderedFromManager() []string {
	var out []string
	for n := range v.Manager.Nodes {
		if !v.Nodes[n].Exists {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// nodeUpgrades lists every node that has (or should have) a
// NodeDataEngineUpgrade: scheduled by the manager or with a history of its
// own, sorted.
func (v *view) nodeUpgrades() []string {
	var out []string
	for n := range v.Manager.Nodes {
		out = append(out, n)
	}
	for n, s := range v.Nodes {
		if _, ok := v.Manager.Nodes[n]; !ok && s.Exists {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// Projection is what the projector writes for one manager, as folded from
// its history: the DataEngineUpgradeManager status and one
// NodeDataEngineUpgrade status per node upgrade. ObservedGeneration fields
// (of the statuses and their conditions) are left zero: they come from the
// live objects when written.
type Projection struct {
	// Manager is the DataEngineUpgradeManager's status.
	Manager v1beta2.DataEngineUpgradeManagerStatus
	// NodeUpgrades holds each NodeDataEngineUpgrade's status by node name;
	// the object's name is NodeUpgradeName(manager name, node).
	NodeUpgrades map[string]v1beta2.NodeDataEngineUpgradeStatus
}

// projection renders v.
func (v *view) projection() Projection {
	p := Projection{Manager: renderManager(v, 0), NodeUpgrades: map[string]v1beta2.NodeDataEngineUpgradeStatus{}}
	for _, n := range v.nodeUpgrades() {
		p.NodeUpgrades[n] = renderNode(v, n, 0)
	}
	return p
}

// Replay folds the whole history of the manager ref offline, exactly as the
// projector does live, and returns the statuses it would write. It is the
// projector's reference: after the projector caught up, the objects' statuses
// equal Replay's (but for observedGeneration).
func Replay(ctx context.Context, store *eventstore.Store, ref events.ManagerRef) (Projection, error) {
	v := newView(ref)
	err := v.catchUp(ctx, store, 0, func(step) {})
	if err != nil {
		return Projection{}, err
	}
	return v.projection(), nil
}

// catchUp folds the manager's events with a sequence above v.LastSequence and at
// most until (0 = the stream's end) from the stream, calling fn after each.
// Undecodable messages are skipped here: the live consumer parks them.
func (v *view) catchUp(ctx context.Context, store *eventstore.Store, until uint64, fn func(step)) error {
	opts := eventstore.ScanOptions{
		FromSeq:  v.LastSequence + 1,
		UntilSeq: until,
		Subjects: []string{events.ManagerSubjectPrefix(v.ref) + ".>"},
	}
	err := store.Scan(ctx, opts, func(e events.Envelope) error {
		fn(v.apply(e))
		return nil
	}, nil)
	if err != nil {
		return fmt.Errorf("projector: fold %s (uid %s) from the stream: %w", v.ref, v.ref.UID, err)
	}
	if until > v.LastSequence {
		// Nothing of this manager between the last event folded and until:
		// the view is complete through until.
		v.LastSequence = until
	}
	return nil
}
