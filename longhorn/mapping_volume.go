package longhorn

import (
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/switchback-dev/switchback/dataplane"
)

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
		ef.Spec.EngineName == only.Name && connectedTo(ef, only)
}

// connectedTo reports whether the EngineFrontend's target is the engine's
// address: its storage IP, as Longhorn v1.12.1 sets it, or its pod IP, as
// v1.12.0 does (the two differ only with a storage network, where v1.12.0
// cannot attach a v2 volume at all: longhorn/longhorn#13351).
func connectedTo(ef *EngineFrontend, e *Engine) bool {
	if ef.Status.TargetPort != e.Status.Port {
		return false
	}
	return ef.Status.TargetIP == e.Status.StorageIP || (e.Status.IP != "" && ef.Status.TargetIP == e.Status.IP)
}

// pathsSwitching reports whether the volume's initiator has begun switching
// its paths: Longhorn's switch-over is switching-over and the active
// EngineFrontend reports a phase.
func pathsSwitching(v *Volume, efs []*EngineFrontend) bool {
	if v.Status.SwitchoverState != string(dataplane.SwitchoverSwitchingOver) {
		return false
	}
	ef := activeFrontend(efs, attachedNode(v))
	return ef != nil && ef.Status.SwitchoverPhase != ""
}

// replicaHeld reports whether a running engine of the volume still holds
// the replica in its RAID, as Longhorn's replica controller tells before it
// stops a replica it deletes: the engine's mode map lists it by name, or by
// its address (UNKNOWN-tcp://ip:port) while the engine removes it; an
// engine reporting no mode map at all may hold it.
func replicaHeld(r *Replica, engines []*Engine) bool {
	addr := ""
	if r.Status.StorageIP != "" && r.Status.Port != 0 {
		addr = fmt.Sprintf("%s:%d", r.Status.StorageIP, r.Status.Port)
	}
	for _, e := range engines {
		if e.DeletionTimestamp != nil || e.Status.CurrentState != StateRunning {
			continue
		}
		if e.Status.ReplicaModeMap == nil {
			return true
		}
		if _, ok := e.Status.ReplicaModeMap[r.Name]; ok {
			return true
		}
		for k := range e.Status.ReplicaModeMap {
			if rest, ok := strings.CutPrefix(k, UnknownReplicaPrefix); ok && addr != "" && strings.TrimPrefix(rest, "tcp://") == addr {
				return true
			}
		}
	}
	return false
}

// rebuildProgress is the progress the engine reports of the rebuild of r,
// keyed by r's address (tcp://ip:port); 0 when none is under way.
func rebuildProgress(r *Replica, rebuilds map[string]*RebuildStatus) int {
	if r.Status.StorageIP == "" || r.Status.Port == 0 {
		return 0
	}
	addr := fmt.Sprintf("%s:%d", r.Status.StorageIP, r.Status.Port)
	for k, st := range rebuilds {
		if st != nil && st.IsRebuilding && strings.TrimPrefix(k, "tcp://") == addr {
			return min(max(st.Progress, 0), 100)
		}
	}
	return 0
}

// instanceRunning reports whether a replica's instance runs or starts.
func instanceRunning(r *Replica) bool {
	return r.Status.CurrentState == StateRunning || r.Status.CurrentState == StateStarting
}

// replenishAt is when Longhorn may build a new replica of a degraded
// attached volume elsewhere (dataplane.Volume.ReplenishAt): its
// status.lastDegradedAt, plus wait while a failed replica could be reused.
func replenishAt(v *Volume, out dataplane.Volume, replicas []*Replica, rs rebuildSettings) time.Time {
	if out.AttachedNode == "" || v.Status.LastDegradedAt == "" {
		return time.Time{}
	}
	at, err := time.Parse(time.RFC3339, v.Status.LastDegradedAt)
	if err != nil {
		return time.Time{}
	}
	if out.NoReplicaReuse {
		return at // nothing is waited for
	}
	for _, r := range replicas {
		if r.DeletionTimestamp == nil && r.Spec.FailedAt != "" && r.Spec.NodeID != "" {
			return at.Add(rs.wait)
		}
	}
	return at
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

// rebuildSettings are the settings that decide how Longhorn replenishes a
// volume: replica-replenishment-wait-interval, whether
// fast-replica-rebuild-enabled holds for v2, the v2 value of
// snapshot-data-integrity (whether its snapshots can be hashed, so that a
// reused replica skips them), and where a new replica may land
// (replica-soft-anti-affinity, replica-zone-soft-anti-affinity).
type rebuildSettings struct {
	wait                                   time.Duration
	fastV2                                 bool
	integrityV2                            string
	softAntiAffinity, zoneSoftAntiAffinity bool
}

// toVolume maps a volume with its replicas, engines, engine frontends (any
// order) and the Events of its engine frontends. Replicas being deleted are
// left out: they serve nothing, and Longhorn is removing them. Robustness is Longhorn's for an attached volume; for a detached
// one, for which Longhorn says "unknown", it is computed from the replicas
// as dataplane asks. A detached volume reports no switch-over (Longhorn may
// leave a stale state there).
func toVolume(v *Volume, replicas []*Replica, engines []*Engine, efs []*EngineFrontend, events []*Event, rs rebuildSettings) dataplane.Volume {
	out := dataplane.Volume{
		Name:             v.Name,
		DataEngine:       dataEngineOf(v),
		NumberOfReplicas: v.Spec.NumberOfReplicas,
		AttachedNode:     attachedNode(v),
		EngineNode:       v.Spec.EngineNodeID,
		Frontend:         frontendOf(v),
		Away:             ParseTargetAway(v.Annotations[TargetAwayAnnotation]),
		ShareManager:     v.Spec.AccessMode == AccessModeRWX && !v.Spec.Migratable,
		Migratable:       v.Spec.Migratable,
		StrictLocal:      v.Spec.DataLocality == DataLocalityStrictLocal,

		ReplicaAutoBalance: v.Spec.ReplicaAutoBalance,
		DataLocality:       v.Spec.DataLocality,
	}
	out.NoReplicaReuse = out.DataEngine == dataplane.DataEngineV2 && !rs.fastV2
	out.ActualSize = v.Status.ActualSize
	out.Hashing = hashingOf(v, rs.integrityV2)
	out.Size = volumeSize(v)
	out.NodeSelector, out.DiskSelector = slices.Clone(v.Spec.NodeSelector), slices.Clone(v.Spec.DiskSelector)
	out.SoftAntiAffinity = softAntiAffinity(v.Spec.ReplicaSoftAntiAffinity, rs.softAntiAffinity)
	out.HardZoneAntiAffinity = !softAntiAffinity(v.Spec.ReplicaZoneSoftAntiAffinity, rs.zoneSoftAntiAffinity)
	active := activeEngine(engines, out.AttachedNode)
	out.TargetNode = targetNode(v, active)
	if out.Attached() {
		out.Switchover = dataplane.SwitchoverState(v.Status.SwitchoverState)
		out.PathsSwitching = pathsSwitching(v, efs)
		out.TargetReady = targetReady(v, engines, efs, out.TargetNode)
		out.SwitchoverError = switchoverError(v, events)
	}
	var modes map[string]string
	var rebuilds map[string]*RebuildStatus
	if active != nil {
		modes, rebuilds = active.Status.ReplicaModeMap, active.Status.RebuildStatus
	}
	sorted := slices.Clone(replicas)
	slices.SortFunc(sorted, func(a, b *Replica) int { return strings.Compare(a.Name, b.Name) })
	for _, r := range sorted {
		if r.DeletionTimestamp != nil {
			continue
		}
		out.Replicas = append(out.Replicas, dataplane.Replica{
			Name:            r.Name,
			Node:            r.Spec.NodeID,
			State:           replicaState(r, modes[r.Name], out.AttachedNode != ""),
			Failed:          r.Spec.FailedAt != "",
			InEngine:        replicaHeld(r, engines),
			Running:         instanceRunning(r),
			RebuildProgress: rebuildProgress(r, rebuilds),
		})
	}
	out.ReplenishAt = replenishAt(v, out, replicas, rs)
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

// FormatTargetAway is the value of TargetAwayAnnotation holding a.
func FormatTargetAway(a dataplane.TargetAway) string {
	return a.Node + "," + a.EngineNodeBefore + "," + a.Temporary
}

// ParseTargetAway reads a value of TargetAwayAnnotation; nil for none, or
// for one the admission policy would not take as a record either (not three
// fields, or no node): such a value allows no move.
func ParseTargetAway(s string) *dataplane.TargetAway {
	f := strings.Split(s, ",")
	if len(f) != 3 || f[0] == "" {
		return nil
	}
	return &dataplane.TargetAway{Node: f[0], EngineNodeBefore: f[1], Temporary: f[2]}
}
