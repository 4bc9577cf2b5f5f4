package longhorn

// This file maps Longhorn's objects (types.go) onto dataplane's types: the
// adapter's only reading of Longhorn's states.

import (
	"fmt"
	"hash/fnv"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/switchback-dev/switchback/dataplane"
)

// SnapshotObjectName is the name of the Snapshot object for a snapshot named
// name of volume. Snapshot objects share one namespace while the upgrade
// names its snapshots per manager and node (the same name for every
// volume), so the volume goes into the object name; a long result is cut
// and made unique with a hash so it stays a valid name (at most 63
// characters, like Longhorn's own snapshot names).
func SnapshotObjectName(volume, name string) string {
	full := name + "-" + volume
	if len(full) <= 63 {
		return full
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(full)) // hash writes never fail
	sum := fmt.Sprintf("%08x", h.Sum32())
	return strings.TrimRight(full[:63-len(sum)-1], "-.") + "-" + sum
}

func conditionTrue(conds []Condition, typ string) bool {
	for _, c := range conds {
		if c.Type == typ {
			return c.Status == "True"
		}
	}
	return false
}

// toNode maps a Longhorn node and its Kubernetes node. Ready needs both to
// say Ready: Longhorn's condition covers its own manager pod, the
// Kubernetes one the kubelet. A missing Kubernetes node is NotReady. The
// node runs the v2 engine when it has a v2 instance manager and is not
// labelled to disable it.
func toNode(ln *LonghornNode, kn *KubeNode, hasV2IM bool) dataplane.Node {
	n := dataplane.Node{
		Name:            ln.Name,
		Ready:           conditionTrue(ln.Status.Conditions, ConditionReady),
		V2:              hasV2IM,
		AllowScheduling: ln.Spec.AllowScheduling,
	}
	if kn == nil {
		n.Ready = false
		return n
	}
	n.Ready = n.Ready && conditionTrue(kn.Status.Conditions, ConditionReady)
	if kn.Labels[DisableV2Label] == "true" {
		n.V2 = false
	}
	for _, img := range kn.Status.Images {
		for _, name := range img.Names {
			n.Images = append(n.Images, imageAliases(name)...)
		}
	}
	slices.Sort(n.Images)
	n.Images = slices.Compact(n.Images)
	return n
}

// imageAliases returns name and the shorter forms the Longhorn setting may
// use for it: the kubelet reports Docker Hub images fully qualified
// ("docker.io/longhornio/x:v1"), the setting usually does not
// ("longhornio/x:v1").
func imageAliases(name string) []string {
	out := []string{name}
	for _, prefix := range []string{"docker.io/", "index.docker.io/"} {
		if rest, ok := strings.CutPrefix(name, prefix); ok {
			out = append(out, rest)
			if short, ok := strings.CutPrefix(rest, "library/"); ok {
				out = append(out, short)
			}
		}
	}
	return out
}

// isV2 reports whether a data-engine field names the v2 engine; empty is v1,
// Longhorn's default.
func isV2(dataEngine string) bool { return dataEngine == dataplane.DataEngineV2 }

// dataEngineOf returns the engine a volume uses, "" read as v1.
func dataEngineOf(v *Volume) string {
	if v.Spec.DataEngine == "" {
		return DataEngineV1
	}
	return v.Spec.DataEngine
}

// imState maps an instance manager's state. An IM being deleted is stopped
// whatever it last reported: the node step must not delete it again, and a
// target must not be moved onto it. "unknown" (Longhorn lost contact),
// "upgrading" (an in-place image update), and an IM with no state yet are
// starting: not running, and not failed either, since only a sustained
// error may fail a node upgrade. A state this adapter does not know is also
// taken as starting, which stalls the step visibly rather than failing it.
func imState(im *InstanceManager) dataplane.IMState {
	if im.DeletionTimestamp != nil {
		return dataplane.IMStopped
	}
	switch im.Status.CurrentState {
	case StateRunning:
		return dataplane.IMRunning
	case StateStopped:
		return dataplane.IMStopped
	case StateError:
		return dataplane.IMError
	default: // starting, unknown, upgrading, "", anything new
		return dataplane.IMStarting
	}
}

// liveInstances counts the instances of a status map that run or are
// starting: what Longhorn's node controller checks before it removes an
// old-image IM.
func liveInstances(m map[string]InstanceProcess) int {
	n := 0
	for _, p := range m {
		if p.Status.State == StateRunning || p.Status.State == StateStarting {
			n++
		}
	}
	return n
}

func toInstanceManager(im *InstanceManager) dataplane.InstanceManager {
	out := dataplane.InstanceManager{
		Name:       im.Name,
		Node:       im.Spec.NodeID,
		Image:      im.Spec.Image,
		DataEngine: im.Spec.DataEngine,
		State:      imState(im),
	}
	// Longhorn clears the maps of an IM that is not running; one being
	// deleted runs nothing worth counting.
	if im.DeletionTimestamp == nil {
		out.Engines = liveInstances(im.Status.InstanceEngines)
		out.Frontends = liveInstances(im.Status.InstanceEngineFrontends)
		out.Replicas = liveInstances(im.Status.InstanceReplicas)
	}
	return out
}

// replicaState maps a replica. mode is its entry in the active engine's
// replicaModeMap ("" when absent), attached whether its volume is attached.
//
//   - failedAt set: the replica failed or was failed on purpose, and is never
//     healthy: error if its instance is in error, else stopped (it is, or is
//     being, stopped: Longhorn stops it).
//   - an attached volume's running replica is what its engine says: RW
//     running, WO rebuilding, ERR error; not in the engine yet, it is
//     running if it was ever healthy (the engine status lags), else
//     rebuilding.
//   - a detached volume's replicas are stopped by Longhorn; one that held a
//     full copy (healthyAt set, not failed) is a healthy copy at rest and
//     reported running, as dataplane asks (see its package comment).
//   - starting is rebuilding (it is being brought in); stopping is stopped;
//     error, unknown (lost contact) and states this adapter does not know
//     are error: never counted as a healthy copy.
func replicaState(r *Replica, mode string, attached bool) dataplane.ReplicaState {
	if r.Spec.FailedAt != "" {
		if r.Status.CurrentState == StateError {
			return dataplane.ReplicaError
		}
		return dataplane.ReplicaStopped
	}
	healthyBefore := r.Spec.HealthyAt != ""
	switch r.Status.CurrentState {
	case StateRunning:
		if !attached {
			if healthyBefore {
				return dataplane.ReplicaRunning
			}
			return dataplane.ReplicaRebuilding
		}
		switch mode {
		case ModeRW:
			return dataplane.ReplicaRunning
		case ModeWO:
			return dataplane.ReplicaRebuilding
		case ModeERR:
			return dataplane.ReplicaError
		}
		if healthyBefore {
			return dataplane.ReplicaRunning
		}
		return dataplane.ReplicaRebuilding
	case StateStopped, "":
		if !attached && healthyBefore {
			return dataplane.ReplicaRunning
		}
		return dataplane.ReplicaStopped
	case StateStarting:
		return dataplane.ReplicaRebuilding
	case StateStopping:
		return dataplane.ReplicaStopped
	default: // error, unknown, anything new
		return dataplane.ReplicaError
	}
}

// attachedNode is spec.nodeID, which Longhorn's VolumeAttachment controller
// sets from the attachment tickets; status.currentNodeID is taken only when
// spec.nodeID is empty while the volume still reports attached (a detach in
// flight keeps serving I/O until it completes).
func attachedNode(v *Volume) string {
	if v.Spec.NodeID != "" {
		return v.Spec.NodeID
	}
	if v.Status.State == VolumeAttached {
		return v.Status.CurrentNodeID
	}
	return ""
}

// targetNode is where an attached volume's engine runs:
// status.currentEngineNodeID, or, before Longhorn reported it, the node of
// the active engine, else the attached node. A detached volume has none.
func targetNode(v *Volume, active *Engine) string {
	attached := attachedNode(v)
	switch {
	case attached == "":
		return ""
	case v.Status.CurrentEngineNodeID != "":
		return v.Status.CurrentEngineNodeID
	case active != nil && active.Spec.NodeID != "":
		return active.Spec.NodeID
	}
	return attached
}

// activeEngine picks the engine serving the volume: the active one, else the
// one on the attached node, else the first by name (cache order is random,
// and two reads must agree).
func activeEngine(engines []*Engine, attached string) *Engine {
	var onNode, first *Engine
	for _, e := range engines {
		if e.DeletionTimestamp != nil {
			continue
		}
		if e.Spec.Active {
			return e
		}
		if onNode == nil && attached != "" && e.Spec.NodeID == attached {
			onNode = e
		}
		if first == nil || e.Name < first.Name {
			first = e
		}
	}
	if onNode != nil {
		return onNode
	}
	return first
}

// activeFrontend picks the volume's current EngineFrontend as Longhorn does:
// the one marked active, else the one on the attached node.
func activeFrontend(efs []*EngineFrontend, attached string) *EngineFrontend {
	var onNode *EngineFrontend
	for _, ef := range efs {
		if ef.DeletionTimestamp != nil {
			continue
		}
		if ef.Spec.Active {
			return ef
		}
		if onNode == nil && attached != "" && ef.Spec.NodeID == attached {
			onNode = ef
		}
	}
	return onNode
}

// targetReady holds Longhorn's own conditions for a switch-over that ended
// on target: the volume's only engine runs there and is active, and the
// active EngineFrontend runs connected to it with no path switch under way.
func targetReady(v *Volume, engines []*Engine, efs []*EngineFrontend, target string) bool {
	var only *Engine
	for _, e := range engines {
		if e.DeletionTimestamp != nil {
			continue
		}
		if only != nil {
			return false
		}
		only = e
	}
	if only == nil || !only.Spec.Active || only.Spec.NodeID != target || only.Status.CurrentState != StateRunning {
		return false
	}
	ef := activeFrontend(efs, attachedNode(v))
	return ef != nil && ef.Status.CurrentState == StateRunning && ef.Status.SwitchoverPhase == "" &&
		ef.Spec.EngineName == only.Name && ef.Status.TargetIP == only.Status.StorageIP && ef.Status.TargetPort == only.Status.Port
}

// frontendOf is the volume's frontend, "" when it has none or it is disabled.
func frontendOf(v *Volume) string {
	if v.Spec.DisableFrontend {
		return ""
	}
	return v.Spec.Frontend
}

// switchoverError is the message of the newest FailedSwitchover Warning on
// the volume's EngineFrontends, unless a successful Switchover came after
// it or no switch-over is under way.
func switchoverError(v *Volume, events []*Event) string {
	if v.Status.SwitchoverState == "" {
		return ""
	}
	var failed, succeeded *Event
	for _, e := range events {
		switch e.Reason {
		case ReasonFailedSwitchover:
			if failed == nil || eventTime(e).After(eventTime(failed).Time) {
				failed = e
			}
		case ReasonSwitchover:
			if succeeded == nil || eventTime(e).After(eventTime(succeeded).Time) {
				succeeded = e
			}
		}
	}
	if failed == nil || (succeeded != nil && !eventTime(failed).After(eventTime(succeeded).Time)) {
		return ""
	}
	return failed.Message
}

// eventTime is when an Event last happened.
func eventTime(e *Event) metav1.Time {
	if !e.LastTimestamp.IsZero() {
		return e.LastTimestamp
	}
	return e.FirstTimestamp
}

// toVolume maps a volume with its replicas, engines, engine frontends (any
// order) and the Events of its engine frontends. Replicas being deleted are
// left out: they serve nothing, and Longhorn is removing them. Robustness is Longhorn's for an attached volume; for a detached
// one, for which Longhorn says "unknown", it is computed from the replicas
// as dataplane asks. A detached volume reports no switch-over (Longhorn may
// leave a stale state there).
func toVolume(v *Volume, replicas []*Replica, engines []*Engine, efs []*EngineFrontend, events []*Event) dataplane.Volume {
	out := dataplane.Volume{
		Name:             v.Name,
		DataEngine:       dataEngineOf(v),
		NumberOfReplicas: v.Spec.NumberOfReplicas,
		AttachedNode:     attachedNode(v),
		EngineNode:       v.Spec.EngineNodeID,
		Frontend:         frontendOf(v),
	}
	active := activeEngine(engines, out.AttachedNode)
	out.TargetNode = targetNode(v, active)
	if out.Attached() {
		out.Switchover = dataplane.SwitchoverState(v.Status.SwitchoverState)
		out.TargetReady = targetReady(v, engines, efs, out.TargetNode)
		out.SwitchoverError = switchoverError(v, events)
	}
	var modes map[string]string
	if active != nil {
		modes = active.Status.ReplicaModeMap
	}
	sorted := slices.Clone(replicas)
	slices.SortFunc(sorted, func(a, b *Replica) int { return strings.Compare(a.Name, b.Name) })
	for _, r := range sorted {
		if r.DeletionTimestamp != nil {
			continue
		}
		out.Replicas = append(out.Replicas, dataplane.Replica{
			Name:  r.Name,
			Node:  r.Spec.NodeID,
			State: replicaState(r, modes[r.Name], out.AttachedNode != ""),
		})
	}
	if out.AttachedNode != "" {
		out.Robustness = robustness(v.Status.Robustness)
	} else {
		out.Robustness = computedRobustness(out)
	}
	return out
}

func robustness(s string) dataplane.Robustness {
	switch r := dataplane.Robustness(s); r {
	case dataplane.RobustnessHealthy, dataplane.RobustnessDegraded, dataplane.RobustnessFaulted:
		return r
	default:
		return dataplane.RobustnessUnknown
	}
}

// computedRobustness is Longhorn's rule applied to replica states: healthy
// with every desired replica running, faulted with none.
func computedRobustness(v dataplane.Volume) dataplane.Robustness {
	return dataplane.RobustnessOf(v.HealthyReplicas(), v.NumberOfReplicas)
}

// toIMUpgrade maps one of Longhorn's per-node instance-manager upgrades:
// its node and its phase as written. One being deleted keeps its phase:
// its controller may still be moving engines back, and the rule that reads
// it (precheck.OtherUpgrader) fails closed on anything not over.
func toIMUpgrade(u *InstanceManagerUpgrade) dataplane.IMUpgrade {
	return dataplane.IMUpgrade{Name: u.Name, Node: u.Spec.NodeID, State: u.Status.State}
}

// toUpgradeControl maps Longhorn's upgrade control: the node its cycle is
// on and the state of each node (nil when it lists none).
func toUpgradeControl(c *InstanceManagerUpgradeControl) dataplane.UpgradeControl {
	out := dataplane.UpgradeControl{Name: c.Name, CurrentNode: c.Status.CurrentNode}
	if len(c.Status.Nodes) > 0 {
		out.Nodes = make(map[string]string, len(c.Status.Nodes))
		for node, st := range c.Status.Nodes {
			out.Nodes[node] = st.State
		}
	}
	return out
}

// toUpgrader maps what Longhorn's own upgrader shows: the automatic-upgrade
// settings found (raw values, by name), its upgrade controls and its
// per-node upgrades, each sorted by name so that two reads of the same
// objects agree (caches and lists come in no particular order). Nothing
// found is the zero value, as on a Longhorn without that upgrader.
func toUpgrader(settings []*Setting, controls []*InstanceManagerUpgradeControl, upgrades []*InstanceManagerUpgrade) dataplane.LonghornUpgrader {
	var out dataplane.LonghornUpgrader
	for _, s := range settings {
		if out.Settings == nil {
			out.Settings = make(map[string]string, len(settings))
		}
		out.Settings[s.Name] = s.Value
	}
	controls = slices.Clone(controls)
	slices.SortFunc(controls, func(a, b *InstanceManagerUpgradeControl) int { return strings.Compare(a.Name, b.Name) })
	for _, c := range controls {
		out.Controls = append(out.Controls, toUpgradeControl(c))
	}
	upgrades = slices.Clone(upgrades)
	slices.SortFunc(upgrades, func(a, b *InstanceManagerUpgrade) int { return strings.Compare(a.Name, b.Name) })
	for _, u := range upgrades {
		out.Upgrades = append(out.Upgrades, toIMUpgrade(u))
	}
	return out
}
