package projector

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	k8sevents "k8s.io/client-go/tools/events"

	"github.com/switchback-dev/switchback/api/v1beta2"
	"github.com/switchback-dev/switchback/events"
)

// ReportingController is the reportingController of every Kubernetes Event
// the projector records (events.k8s.io requires a qualified name).
const ReportingController = "longhorn.io/switchback-projector"

// Event actions: what was being done, a machine-readable verb.
const (
	actionRequest       = "Request"
	actionPlan          = "Plan"
	actionScheduleNode  = "ScheduleNode"
	actionUpgrade       = "Upgrade"
	actionUpgradeNode   = "UpgradeNode"
	actionUpgradeVolume = "UpgradeVolume"
	actionCancel        = "Cancel"
	actionCancelNode    = "CancelNode"
	actionMoveWorkload  = "MoveWorkload"
	actionProject       = "Project"
)

// Reasons of Events that are not transitions of the history.
const (
	// ReasonEventDeadLettered: a message on the stream did not decode and was
	// moved to the dead-letter stream.
	ReasonEventDeadLettered = "EventDeadLettered"
	// ReasonStatusRejected: the apiserver refused a status write as invalid;
	// the next event's write carries the whole status again.
	ReasonStatusRejected = "StatusRejected"
)

// notice is one Kubernetes Event a transition deserves. It is recorded on
// the DataEngineUpgradeManager and, when a node is concerned (and the notice
// is not manager-only bookkeeping), on its NodeDataEngineUpgrade and on the
// core Node as well.
type notice struct {
	seq     uint64
	at      time.Time
	warning bool
	reason  string
	action  string
	note    string
	node    string
	volume  string
	// managerOnly marks the manager's own bookkeeping of a node (its
	// outcome recorded): the node's objects already got the node's event.
	managerOnly bool
}

// noticesFor returns the Events for e, just folded into v: one per event,
// since every event of the catalogue changes something a user sees. Normal
// for progress; Warning for failures, stalls and failed prechecks.
func noticesFor(v *view, e events.Envelope) []notice {
	n := notice{seq: e.Sequence, at: e.Time, node: e.Aggregate.Node}
	node := e.Aggregate.Node
	m := v.Manager
	switch d := e.Data.(type) {
	case events.UpgradeRequested:
		n.reason, n.action = "UpgradeRequested", actionRequest
		scope := "every node running the v2 data engine"
		if len(d.Nodes) > 0 {
			scope = "nodes " + strings.Join(d.Nodes, ", ")
		}
		n.note = fmt.Sprintf("upgrade of the %s data engine requested for %s", d.DataEngine, scope)
	case events.PrecheckPassed:
		n.reason, n.action = "PrecheckPassed", "Check"+d.Check
		n.note = fmt.Sprintf("precheck %s passed: %s", d.Check, d.Message)
	case events.PrecheckFailed:
		n.warning = true
		n.reason, n.action = "PrecheckFailed", "Check"+d.Check
		n.note = fmt.Sprintf("precheck %s failed (%s): %s", d.Check, d.Reason, d.Message)
	case events.UpgradePlanned:
		n.reason, n.action = "UpgradePlanned", actionPlan
		n.note = fmt.Sprintf("planned %d node(s) to %s, in this order: %s", len(d.Nodes), d.InstanceManagerImage, strings.Join(d.Nodes, ", "))
	case events.NodeScheduled:
		n.node = d.Node
		n.reason, n.action = "NodeScheduled", actionScheduleNode
		n.note = fmt.Sprintf("node %s scheduled (%d of %d, attempt %d)", d.Node, len(m.Nodes), len(m.Plan), d.Attempt)
	case events.NodeFinished:
		n.node, n.managerOnly = d.Node, true
		n.warning = d.State == events.NodeError
		n.reason, n.action = "NodeFinished", actionUpgradeNode
		n.note = withMessage(fmt.Sprintf("node %s %s (%d of %d nodes completed)", d.Node, d.State, completed(v), len(m.Plan)), d.Message)
	case events.UpgradeCompleted:
		n.reason, n.action = "UpgradeCompleted", actionUpgrade
		n.note = m.Message
	case events.UpgradeFailed:
		n.node, n.managerOnly = d.Node, true
		n.warning = true
		n.reason, n.action = "UpgradeFailed", actionUpgrade
		n.note = fmt.Sprintf("upgrade failed (%s): %s", d.Reason, d.Message)
	case events.CancelRequested:
		n.reason, n.action = "CancelRequested", actionCancel
		n.note = "cancel requested: no new node starts, the node in flight is brought to a safe point"
		if d.Reason != "" {
			n.note += " (" + d.Reason + ")"
		}
	case events.UpgradeCancelled:
		n.node, n.managerOnly = d.Node, true
		n.reason, n.action = "UpgradeCancelled", actionCancel
		n.note = m.Message
	case events.UpgradeHeld:
		n.warning = true
		n.reason, n.action = "UpgradeHeld", actionScheduleNode
		n.note = fmt.Sprintf("no new node starts until this is fixed (%s): %s", d.Reason, d.Message)
	case events.UpgradeReleased:
		n.reason, n.action = "UpgradeReleased", actionScheduleNode
		n.note = withMessage("the next node may start", d.Message)

	case events.NodeUpgradeStarted:
		n.reason, n.action = "NodeUpgradeStarted", actionUpgradeNode
		n.note = fmt.Sprintf("upgrade of node %s to %s started (attempt %d)", node, d.InstanceManagerImage, d.Attempt)
	case events.NodeStateChanged:
		n.reason, n.action = "Node"+camel(string(d.To)), actionUpgradeNode
		n.note = withMessage(fmt.Sprintf("node %s: %s -> %s", node, d.From, d.To), d.Message)
	case events.VolumeStateChanged:
		n.volume = d.Volume
		n.warning = d.To == events.VolumeError
		n.reason, n.action = "Volume"+camel(string(d.To)), actionUpgradeVolume
		switch d.From {
		case "":
			n.reason = "VolumeRecorded"
		case d.To:
			n.reason = "VolumeRedirected"
		}
		from := string(d.From)
		if from == "" {
			from = "recorded"
		}
		n.note = fmt.Sprintf("volume %s on node %s: %s -> %s", d.Volume, node, from, d.To)
		if d.TargetNode != "" {
			n.note += " (target on " + d.TargetNode + ")"
		}
		n.note = withMessage(n.note, d.Message)
	case events.NodeStalled:
		n.volume = d.Volume
		n.warning = true
		n.reason, n.action = "NodeStalled", actionUpgradeNode
		n.note = stallMessage(v.Nodes[node])
	case events.NodeResumed:
		n.reason, n.action = "NodeResumed", actionUpgradeNode
		n.note = withMessage(fmt.Sprintf("node %s progressing again at %s", node, d.Step), d.Message)
	case events.NodeUpgradeCompleted:
		n.reason, n.action = "NodeUpgradeCompleted", actionUpgradeNode
		n.note = fmt.Sprintf("node %s upgraded: %s", node, v.Nodes[node].Message)
	case events.NodeUpgradeFailed:
		n.warning = true
		n.reason, n.action = "NodeUpgradeFailed", actionUpgradeNode
		n.note = fmt.Sprintf("node %s failed at %s (%s): %s", node, d.Step, d.Reason, d.Message)
	case events.NodeCancelRequested:
		n.reason, n.action = "NodeCancelRequested", actionCancelNode
		n.note = fmt.Sprintf("node %s: cancel requested (%s); bringing it to a safe point", node, d.Reason)
	case events.NodeUpgradeCancelled:
		n.reason, n.action = "NodeUpgradeCancelled", actionCancelNode
		n.note = fmt.Sprintf("node %s: %s", node, v.Nodes[node].Message)
	case events.NodeTainted:
		n.reason, n.action = "NodeTainted", actionMoveWorkload
		n.note = fmt.Sprintf("node %s tainted %s:NoSchedule, so that the pods moved off it are not scheduled back", node, d.Key)
	case events.NodeUntainted:
		n.reason, n.action = "NodeUntainted", actionMoveWorkload
		n.note = fmt.Sprintf("node %s: taint %s taken off", node, d.Key)
	case events.PodMoved:
		n.reason, n.action = "PodEvicted", actionMoveWorkload
		n.note = fmt.Sprintf("pod %s evicted off node %s, which it held the initiators of %s on", d.Pod, node, strings.Join(d.Volumes, ", "))
		if d.Restart {
			n.reason = "ShareManagerRestarted"
			n.note = fmt.Sprintf("share-manager pod %s of %s deleted on node %s: Longhorn starts it elsewhere, and its NFS clients reconnect", d.Pod, strings.Join(d.Volumes, ", "), node)
		}
	default:
		return nil
	}
	return []notice{n}
}

// withMessage is note followed by an event's optional message.
func withMessage(note, message string) string {
	if message == "" {
		return note
	}
	return note + ": " + message
}

// completed counts the plan nodes whose outcome is recorded as completed.
func completed(v *view) int {
	c := 0
	for _, n := range v.Manager.Plan {
		if v.Manager.Nodes[n].State == events.NodeCompleted {
			c++
		}
	}
	return c
}

// camel turns a state ("switching-over") into a CamelCase word ("SwitchingOver").
func camel(s string) string {
	var b strings.Builder
	for part := range strings.SplitSeq(s, "-") {
		if part == "" {
			continue
		}
		b.WriteString(strings.ToUpper(part[:1]))
		b.WriteString(part[1:])
	}
	return b.String()
}

// maxNote and maxReason are the API's bounds on an Event's note, and on its
// reason and action.
const (
	maxNote   = 1024
	maxReason = 128
)

// recorder records notices as events.k8s.io/v1 Events through client-go's
// broadcaster. Recording is best-effort and never blocks: client-go queues
// each Event and writes it from its own goroutine (dropping it when its
// queue is full), so the apiserver's Event path can never hold projection
// back. Note that client-go folds Events with the same regarding object,
// related object, reason and action into one series (count, last seen):
// the related object (the node upgrade, or the volume) keeps transitions of
// different nodes and volumes apart.
type recorder struct {
	rec    k8sevents.EventRecorder
	log    *slog.Logger
	maxAge time.Duration
	now    func() time.Time
	count  *atomic.Uint64
}

// objects identifies the Kubernetes objects of one manager an Event may
// regard.
type objects struct {
	ref events.ManagerRef
	// nodeObject returns the name and UID of a node's
	// NodeDataEngineUpgrade, if known (an adopted object keeps its former
	// name).
	nodeObject func(node string) (string, types.UID)
}

// emit records n about the objects of one manager. Events older than maxAge
// (replaying old history after a wipe) are not recorded: the apiserver
// would have expired them long ago, and old news would only bury new.
func (r *recorder) emit(o objects, n notice) {
	if r == nil || r.rec == nil {
		return
	}
	if r.maxAge > 0 && !n.at.IsZero() && r.now().Sub(n.at) > r.maxAge {
		return
	}
	typ := corev1.EventTypeNormal
	if n.warning {
		typ = corev1.EventTypeWarning
	}
	note := truncate(n.note, maxNote)
	var volume, nodeUpgrade runtime.Object
	if n.volume != "" {
		volume = volumeRef(o.ref.Namespace, n.volume)
	}
	if n.node != "" {
		name, uid := NodeUpgradeName(o.ref.Name, n.node), types.UID("")
		if o.nodeObject != nil {
			if known, u := o.nodeObject(n.node); known != "" {
				name, uid = known, u
			}
		}
		nodeUpgrade = nodeUpgradeRef(o.ref, name, uid)
	}
	record := func(regarding, related runtime.Object) {
		r.rec.Eventf(regarding, related, typ, truncate(n.reason, maxReason), truncate(n.action, maxReason), "%s", note)
		r.count.Add(1)
	}
	// Warnings are operator news in the logs too (a stall names the volume).
	level := slog.LevelDebug
	if n.warning {
		level = slog.LevelWarn
	}
	r.log.Log(context.Background(), level, n.note, "manager", o.ref.String(), "uid", o.ref.UID, "node", n.node, "volume", n.volume, "reason", n.reason, "seq", n.seq)
	record(managerRef(o.ref), firstOf(volume, nodeUpgrade))
	if n.node == "" || n.managerOnly {
		return
	}
	record(nodeUpgrade, firstOf(volume, nodeRef(n.node)))
	record(nodeRef(n.node), firstOf(volume, nodeUpgrade))
}

// firstOf returns the first non-nil object, or an untyped nil.
func firstOf(objs ...runtime.Object) runtime.Object {
	for _, o := range objs {
		if o != nil {
			return o
		}
	}
	return nil
}

// References are built by hand rather than from the objects: an Event may
// concern an object the projector never read (the core Node, which may not
// even exist, or a Longhorn Volume), and client-go accepts an
// ObjectReference as the regarding object as is.

func managerRef(ref events.ManagerRef) *corev1.ObjectReference {
	return &corev1.ObjectReference{
		APIVersion: v1beta2.SchemeGroupVersion.String(), Kind: "DataEngineUpgradeManager",
		Namespace: ref.Namespace, Name: ref.Name, UID: types.UID(ref.UID),
	}
}

func nodeUpgradeRef(ref events.ManagerRef, name string, uid types.UID) *corev1.ObjectReference {
	return &corev1.ObjectReference{
		APIVersion: v1beta2.SchemeGroupVersion.String(), Kind: "NodeDataEngineUpgrade",
		Namespace: ref.Namespace, Name: name, UID: uid,
	}
}

func nodeRef(node string) *corev1.ObjectReference {
	return &corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: node}
}

// volumeRef names the Longhorn Volume (longhorn.io/v1beta2, in the manager's
// namespace, where Longhorn keeps its objects).
func volumeRef(namespace, volume string) *corev1.ObjectReference {
	return &corev1.ObjectReference{APIVersion: v1beta2.SchemeGroupVersion.String(), Kind: "Volume", Namespace: namespace, Name: volume}
}
