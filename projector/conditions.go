package projector

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/switchback-dev/switchback/aggregate/nodeupgrade"
	"github.com/switchback-dev/switchback/api/v1beta2"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/precheck"
)

// Condition reasons the API package does not define. Reasons are CamelCase
// words; messages carry the names.
const (
	// ReasonInitializing: prechecks and planning are under way.
	ReasonInitializing = "Initializing"
	// ReasonCancelling: the manager was deleted and the node in flight is
	// being brought to a safe point.
	ReasonCancelling = "Cancelling"
	// ReasonPrecheckFailed is the fallback reason of a failed precheck whose
	// recorded reason is not a valid condition reason.
	ReasonPrecheckFailed = "PrecheckFailed"
)

// Condition messages are bounded by the API (32768); ours stay far below,
// but history is input and a bound costs nothing.
const maxConditionMessage = 4096

// managerConditions is the desired set of the manager's conditions (without
// transition times): one per recorded precheck, then the four summaries
// (summary). The manager is Stalled while the node in flight is, and also
// while the upgrade is held between nodes, with why.
func managerConditions(v *view) []metav1.Condition {
	m := v.Manager
	out := make([]metav1.Condition, 0, len(m.Prechecks)+4)
	for _, p := range m.Prechecks {
		c := metav1.Condition{Type: p.Check, Status: metav1.ConditionTrue, Reason: conditionReason(p.Reason, v1beta2.ReasonChecksPassed), Message: p.Message}
		if !p.Passed {
			c.Status = metav1.ConditionFalse
			c.Reason = conditionReason(p.Reason, ReasonPrecheckFailed)
		}
		if h := m.Held; h != nil && p.Check == precheck.NoOtherUpgrader && !m.Terminal() {
			// The requirement, re-checked before each node, no longer holds,
			// or cannot be told.
			switch h.Reason {
			case precheck.ReasonOtherUpgraderActive:
				c.Status, c.Reason, c.Message = metav1.ConditionFalse, h.Reason, h.Message
			case precheck.ReasonOtherUpgraderUnknown:
				c.Status, c.Reason, c.Message = metav1.ConditionUnknown, h.Reason, h.Message
			}
		}
		out = append(out, c)
	}
	s := summary{
		message:    managerMessage(v),
		completed:  m.State == events.ManagerCompleted,
		failed:     m.State == events.ManagerError,
		cancelled:  m.State == events.ManagerCancelled,
		working:    managerWorkingReason(m.CancelRequested, m.State),
		failReason: m.FailReason,
	}
	if n, ok := v.stalledNode(); ok {
		s.stallOn(n)
	} else if h := m.Held; h != nil && !m.State.Terminal() && m.UpgradingNode == "" {
		s.stall(conditionReason(h.Reason, "Held"), fmt.Sprintf("held since %s, no new node starts: %s", h.Since.UTC().Format(time.RFC3339), h.Message))
	}
	return append(out, s.conditions()...)
}

// nodeConditions is the desired set of one node upgrade's conditions, with
// the same meaning as the manager's summaries.
func nodeConditions(v *view, node string) []metav1.Condition {
	state, msg := nodeStateMessage(v, node)
	n := v.Nodes[node]
	s := summary{
		message:    msg,
		completed:  state == v1beta2.NodeUpgradeStateCompleted,
		failed:     state == v1beta2.NodeUpgradeStateError,
		cancelled:  state == v1beta2.NodeUpgradeStateCancelled,
		unstarted:  state == v1beta2.NodeUpgradeStatePending && v.Manager.Terminal(),
		working:    nodeWorkingReason(n.CancelRequested, state),
		failReason: n.FailReason,
	}
	if n.Exists && n.Stalled && !n.Terminal() {
		s.stallOn(n)
	}
	return s.conditions()
}

// summary is what the four summary conditions say of an upgrade, the
// manager's or one node's:
//
//   - Ready: True once completed, so `kubectl wait --for=condition=Ready`
//     returns exactly when the upgrade is done; False with the phase as
//     reason otherwise (Failed and Cancelled are terminal).
//   - Progressing: True until the upgrade ended (or, for a node, will never
//     start), stalled or not (a stall is the upgrade waiting, not giving up).
//   - Stalled: True while stalled, with what blocks in the message: the
//     "stuck" rule.
//   - Degraded: True once the upgrade ended in error.
type summary struct {
	// message is Ready's and Progressing's message, and Degraded's on error.
	message string
	// completed, failed and cancelled say how the upgrade ended, if it did.
	completed, failed, cancelled bool
	// unstarted marks a pending node upgrade whose manager ended: it will
	// never start, so it no longer progresses.
	unstarted bool
	// working is the phase's reason while the upgrade has not ended.
	working string
	// failReason is the recorded reason of a failure.
	failReason string
	// stalled is set while stalled, with the Stalled condition's reason
	// and message.
	stalled                   bool
	stallReason, stallMessage string
}

func (s *summary) stall(reason, message string) {
	s.stalled, s.stallReason, s.stallMessage = true, reason, message
}

// stallOn is the stall of node upgrade n: the node, the step, the volume and
// what blocks.
func (s *summary) stallOn(n nodeupgrade.State) { s.stall(stallReason(n), stallMessage(n)) }

// phase is the reason of a summary condition that is not in its abnormal
// state: how the upgrade ended, else its working phase as a CamelCase word.
func (s summary) phase() string {
	switch {
	case s.completed:
		return v1beta2.ReasonCompleted
	case s.failed:
		return v1beta2.ReasonFailed
	case s.cancelled:
		return v1beta2.ReasonCancelled
	}
	return s.working
}

func (s summary) conditions() []metav1.Condition {
	phase := s.phase()
	ready := metav1.Condition{Type: v1beta2.ConditionReady, Status: metav1.ConditionFalse, Reason: phase, Message: s.message}
	if s.completed {
		ready.Status = metav1.ConditionTrue
	}
	progressing := metav1.Condition{Type: v1beta2.ConditionProgressing, Status: metav1.ConditionTrue, Reason: phase, Message: s.message}
	if s.completed || s.failed || s.cancelled || s.unstarted {
		progressing.Status = metav1.ConditionFalse
	}
	stalled := metav1.Condition{Type: v1beta2.ConditionStalled, Status: metav1.ConditionFalse, Reason: phase, Message: "not stalled"}
	if s.stalled {
		stalled.Status, stalled.Reason, stalled.Message = metav1.ConditionTrue, s.stallReason, s.stallMessage
	}
	degraded := metav1.Condition{Type: v1beta2.ConditionDegraded, Status: metav1.ConditionFalse, Reason: phase, Message: "no error"}
	if s.failed {
		degraded.Status = metav1.ConditionTrue
		degraded.Reason = conditionReason(s.failReason, v1beta2.ReasonFailed)
		degraded.Message = s.message
	}
	return []metav1.Condition{ready, progressing, stalled, degraded}
}

// stalledNode returns the node in flight when it is stalled.
func (v *view) stalledNode() (nodeupgrade.State, bool) {
	if v.Manager.Terminal() || v.Manager.UpgradingNode == "" {
		return nodeupgrade.State{}, false
	}
	n := v.Nodes[v.Manager.UpgradingNode]
	return n, n.Exists && n.Stalled && !n.Terminal()
}

// stallReason is VolumeBlocked when a volume is what blocks (the API's
// reason for the "stuck volume" rule), else the worker's own reason
// (NodeNotReady, InstanceManagerStarting, ...).
func stallReason(n nodeupgrade.State) string {
	if n.StallVolume != "" {
		return v1beta2.ReasonVolumeBlocked
	}
	return conditionReason(n.StallReason, "Stalled")
}

// stallMessage names the node, the step, the volume and what blocks.
func stallMessage(n nodeupgrade.State) string {
	var b strings.Builder
	fmt.Fprintf(&b, "node %s stalled at %s", n.Node, n.StallStep)
	if n.StallVolume != "" {
		fmt.Fprintf(&b, " on volume %s", n.StallVolume)
	}
	fmt.Fprintf(&b, ": %s (%s)", n.StallMessage, n.StallReason)
	if !n.StalledAt.IsZero() {
		fmt.Fprintf(&b, "; stalled since %s", n.StalledAt.UTC().Format(time.RFC3339))
	}
	return b.String()
}

// managerWorkingReason is the phase of a manager that has not ended.
func managerWorkingReason(cancelRequested bool, state events.ManagerState) string {
	switch {
	case cancelRequested:
		return ReasonCancelling
	case state == events.ManagerInitializing:
		return ReasonInitializing
	case state == events.ManagerUpgrading:
		return v1beta2.ReasonUpgrading
	}
	return v1beta2.ReasonPending
}

// nodeWorkingReason is managerWorkingReason for a node upgrade.
func nodeWorkingReason(cancelRequested bool, state v1beta2.NodeUpgradeState) string {
	switch {
	case state == v1beta2.NodeUpgradeStatePending:
		return v1beta2.ReasonPending
	case cancelRequested:
		return ReasonCancelling
	}
	return v1beta2.ReasonUpgrading
}

// setConditions merges desired into existing with meta.SetStatusCondition,
// so a condition's lastTransitionTime moves only when its status changes.
// The time is the event's (to the second, as the API stores it), not the
// clock's: the conditions are a pure fold of history and a replay
// reproduces them exactly.
func setConditions(existing, desired []metav1.Condition, at time.Time) []metav1.Condition {
	out := make([]metav1.Condition, len(existing))
	copy(out, existing)
	t := metav1.NewTime(at.UTC().Truncate(time.Second))
	for _, c := range desired {
		c.LastTransitionTime = t
		c.Message = truncate(c.Message, maxConditionMessage)
		meta.SetStatusCondition(&out, c)
	}
	return out
}

// withGeneration returns a copy of conds with observedGeneration set: the
// summaries are recomputed for the object as it is now.
func withGeneration(conds []metav1.Condition, gen int64) []metav1.Condition {
	if len(conds) == 0 {
		return nil
	}
	out := make([]metav1.Condition, len(conds))
	copy(out, conds)
	for i := range out {
		out[i].ObservedGeneration = gen
	}
	return out
}

// reasonPattern is the API's validation of a condition reason.
var reasonPattern = regexp.MustCompile(`^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$`)

// conditionReason returns r when the API accepts it as a condition reason,
// else fallback: history is input, and one odd reason must not make every
// status write fail validation.
func conditionReason(r, fallback string) string {
	if len(r) <= 1024 && reasonPattern.MatchString(r) {
		return r
	}
	return fallback
}

// truncate bounds s to n bytes without splitting a UTF-8 sequence.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const ellipsis = "..."
	cut := n - len(ellipsis)
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + ellipsis
}
