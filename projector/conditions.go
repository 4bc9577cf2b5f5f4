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
// transition times): one per recorded precheck, then the four summaries.
//
//   - Ready: True once completed, so `kubectl wait --for=condition=Ready`
//     returns exactly when the upgrade is done; False with the phase as
//     reason otherwise (Failed and Cancelled are terminal).
//   - Progressing: True while pending, initializing or upgrading, stalled
//     or not (a stall is the upgrade waiting, not giving up).
//   - Stalled: True while the node in flight is stalled, with the node, the
//     step, the volume and what blocks in the message: the "stuck" rule;
//     also while the upgrade is held between nodes, with why.
//   - Degraded: True once the upgrade ended in error.
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
	msg := managerMessage(v)
	phase := managerPhaseReason(v)
	done := m.State.Terminal()

	ready := metav1.Condition{Type: v1beta2.ConditionReady, Status: metav1.ConditionFalse, Reason: phase, Message: msg}
	if m.State == events.ManagerCompleted {
		ready.Status = metav1.ConditionTrue
	}
	progressing := metav1.Condition{Type: v1beta2.ConditionProgressing, Status: metav1.ConditionTrue, Reason: phase, Message: msg}
	if done {
		progressing.Status = metav1.ConditionFalse
	}
	stalled := metav1.Condition{Type: v1beta2.ConditionStalled, Status: metav1.ConditionFalse, Reason: phase, Message: "not stalled"}
	if n, ok := v.stalledNode(); ok {
		stalled.Status = metav1.ConditionTrue
		stalled.Reason = stallReason(n)
		stalled.Message = stallMessage(n)
	} else if h := m.Held; h != nil && !done && m.UpgradingNode == "" {
		stalled.Status = metav1.ConditionTrue
		stalled.Reason = conditionReason(h.Reason, "Held")
		stalled.Message = fmt.Sprintf("held since %s, no new node starts: %s", h.Since.UTC().Format(time.RFC3339), h.Message)
	}
	degraded := metav1.Condition{Type: v1beta2.ConditionDegraded, Status: metav1.ConditionFalse, Reason: phase, Message: "no error"}
	if m.State == events.ManagerError {
		degraded.Status = metav1.ConditionTrue
		degraded.Reason = conditionReason(m.FailReason, v1beta2.ReasonFailed)
		degraded.Message = msg
	}
	return append(out, ready, progressing, stalled, degraded)
}

// nodeConditions is the desired set of one node upgrade's conditions, with
// the same meaning as the manager's summaries.
func nodeConditions(v *view, node string) []metav1.Condition {
	state, msg := nodeStateMessage(v, node)
	n := v.Nodes[node]
	phase := nodePhaseReason(v, node, state)
	ready := metav1.Condition{Type: v1beta2.ConditionReady, Status: metav1.ConditionFalse, Reason: phase, Message: msg}
	if state == v1beta2.NodeUpgradeStateCompleted {
		ready.Status = metav1.ConditionTrue
	}
	progressing := metav1.Condition{Type: v1beta2.ConditionProgressing, Status: metav1.ConditionTrue, Reason: phase, Message: msg}
	if state.IsTerminal() || (state == v1beta2.NodeUpgradeStatePending && v.Manager.Terminal()) {
		progressing.Status = metav1.ConditionFalse
	}
	stalled := metav1.Condition{Type: v1beta2.ConditionStalled, Status: metav1.ConditionFalse, Reason: phase, Message: "not stalled"}
	if n.Exists && n.Stalled && !n.Terminal() {
		stalled.Status = metav1.ConditionTrue
		stalled.Reason = stallReason(n)
		stalled.Message = stallMessage(n)
	}
	degraded := metav1.Condition{Type: v1beta2.ConditionDegraded, Status: metav1.ConditionFalse, Reason: phase, Message: "no error"}
	if state == v1beta2.NodeUpgradeStateError {
		degraded.Status = metav1.ConditionTrue
		degraded.Reason = conditionReason(n.FailReason, v1beta2.ReasonFailed)
		degraded.Message = msg
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

// managerPhaseReason is the reason of a summary condition that is not in its
// abnormal state: the manager's phase as a CamelCase word.
func managerPhaseReason(v *view) string {
	m := v.Manager
	switch m.State {
	case events.ManagerCompleted:
		return v1beta2.ReasonCompleted
	case events.ManagerError:
		return v1beta2.ReasonFailed
	case events.ManagerCancelled:
		return v1beta2.ReasonCancelled
	}
	switch {
	case m.CancelRequested:
		return ReasonCancelling
	case m.State == events.ManagerInitializing:
		return ReasonInitializing
	case m.State == events.ManagerUpgrading:
		return v1beta2.ReasonUpgrading
	}
	return v1beta2.ReasonPending
}

// nodePhaseReason is managerPhaseReason for one node upgrade.
func nodePhaseReason(v *view, node string, state v1beta2.NodeUpgradeState) string {
	switch state {
	case v1beta2.NodeUpgradeStateCompleted:
		return v1beta2.ReasonCompleted
	case v1beta2.NodeUpgradeStateError:
		return v1beta2.ReasonFailed
	case v1beta2.NodeUpgradeStateCancelled:
		return v1beta2.ReasonCancelled
	case v1beta2.NodeUpgradeStatePending:
		return v1beta2.ReasonPending
	}
	if v.Nodes[node].CancelRequested {
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
