package nodeworker

import (
	"fmt"
	"slices"
	"time"

	"github.com/switchback-dev/switchback/aggregate/nodeupgrade"
	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/plan"
)

// Delta rebuilds. A replica the upgrade fails is reused by Longhorn once
// the node's new IM runs (fast-replica-rebuild-enabled), and its rebuild
// skips every snapshot both sides hold with the same non-empty checksum:
// so before a volume's replica on the node is failed, its snapshots (the
// upgrade's own just taken, and any older user snapshot) are hashed on
// every replica through an on-demand request, and the rebuild then copies
// only what was written since. What the rebuild is expected to copy is
// recorded (RebuildPlanned) before the replica is failed; a volume that
// cannot hash is recorded with the reason and failed at once.

// Reasons a volume's snapshots are not hashed before its replica fails.
const (
	// HashSkipNoSnapshot: the volume was attached after the upgrade took
	// its snapshots, so none of the upgrade's is there to hash.
	HashSkipNoSnapshot = "NoUpgradeSnapshot"
	// HashSkipNoReuse: Longhorn does not reuse the failed replica
	// (fast-replica-rebuild-enabled off for v2), so a whole copy is made
	// elsewhere whatever the checksums.
	HashSkipNoReuse = "ReplicaReuseOff"
	// HashSkipDisabled: snapshot data integrity is disabled for the
	// volume, so Longhorn ignores the request.
	HashSkipDisabled = "SnapshotDataIntegrityDisabled"
	// HashSkipTooFewReplicas: Longhorn hashes only with two healthy
	// replicas, and a request would never complete.
	HashSkipTooFewReplicas = "TooFewHealthyReplicas"
	// HashSkipTimedOut: the request did not complete by its deadline.
	HashSkipTimedOut = "HashingTimedOut"
	// ReasonSnapshotHashing is the wait for the hashing to complete.
	ReasonSnapshotHashing = "SnapshotHashing"
)

// needsSnapshots reports whether a round at now deciding v's rebuild plan
// reads its snapshots: not while its hashing is under way, when the round
// only waits.
func needsSnapshots(v dataplane.Volume, st nodeupgrade.State, node string, now time.Time) bool {
	if !needsRebuildPlan(v, st, node) || awaitingTemporary(v, st, node) {
		return false
	}
	h := st.Rebuilds[v.Name].Hashing
	return h == nil || v.Hashing.CompletedSince(h.At) || !now.Before(h.Deadline)
}

// needsRebuildPlan reports whether v's replica on node is about to be
// failed by the upgrade, with no rebuild plan recorded yet.
func needsRebuildPlan(v dataplane.Volume, st nodeupgrade.State, node string) bool {
	if !v.Attached() || v.DataEngine != dataplane.DataEngineV2 || st.Rebuilds[v.Name].Planned != nil {
		return false
	}
	return slices.ContainsFunc(v.Replicas, func(r dataplane.Replica) bool {
		return r.Node == node && !r.Failed && (r.Active() || r.Running)
	})
}

// prepareRebuild reports whether v's replica on the node may be failed:
// once its rebuild plan is recorded, or recorded in this round. Until then
// it asks for the hashing of v's snapshots and waits for it. Longhorn
// hashes one snapshot at a time on each node, that of the volume's owner
// (its attached node; LM@v1.12.1 controller/monitor/snapshot_monitor.go:42,
// 131-134, 372-415), so queued counts, by attached node, what the requests
// of this round ask to hash before v's: its deadline allows for them.
func (p *stepPlan) prepareRebuild(o observation, st nodeupgrade.State, v dataplane.Volume, c settings, queued map[string]int64) bool {
	if !needsRebuildPlan(v, st, c.node) {
		return true
	}
	snaps := o.snapshots[v.Name]
	unhashed := plan.EstimateRebuild(v, snaps, false)
	skip := func(reason, format string, args ...any) bool {
		p.planRebuild(events.RebuildPlanned{Volume: v.Name, Reason: reason, Message: fmt.Sprintf(format, args...),
			ExpectedBytes: unhashed.Expected, FullBytes: unhashed.Full})
		return true
	}
	switch {
	case st.Snapshots == nil || !slices.Contains(st.Snapshots.Volumes, v.Name):
		return skip(HashSkipNoSnapshot, "volume %s was attached after the upgrade's snapshots were taken", v.Name)
	case v.NoReplicaReuse:
		return skip(HashSkipNoReuse, "Longhorn does not reuse the volume's failed replica (fast-replica-rebuild-enabled is not true for v2): it copies the whole volume elsewhere")
	case v.Hashing.Disabled:
		return skip(HashSkipDisabled, "snapshot data integrity is disabled for volume %s: Longhorn hashes none of its snapshots", v.Name)
	}
	cost := plan.EstimateRebuild(v, snaps, true)
	rb := st.Rebuilds[v.Name]
	if rb.Hashing == nil {
		if hashedAlready(snaps, st.Snapshots.Name) {
			p.planRebuild(events.RebuildPlanned{Volume: v.Name, Hashed: true, ExpectedBytes: cost.Expected, FullBytes: cost.Full})
			return true
		}
		if v.HealthyReplicas() < 2 {
			return skip(HashSkipTooFewReplicas, "volume %s has %d healthy replica(s): Longhorn hashes snapshots only with two", v.Name, v.HealthyReplicas())
		}
		at := dataplane.HashRequestTime(o.now)
		queued[v.AttachedNode] += unhashed.Hash
		deadline := at.Add(plan.WaitBudget(queued[v.AttachedNode], c.hashRate, c.hashFloor))
		p.rebuilds = append(p.rebuilds, events.HashingRequested{Volume: v.Name, Snapshot: st.Snapshots.Name, At: at, Deadline: deadline.UTC(), Bytes: unhashed.Hash})
		p.wait(&block{volume: v.Name, reason: ReasonSnapshotHashing, until: deadline,
			message: fmt.Sprintf("volume %s: hashing its snapshots before its replica on %s is failed (requested for %s, until %s)",
				v.Name, c.node, at.Format("15:04:05"), deadline.Format("15:04:05"))})
		return false
	}
	h := rb.Hashing
	foreign := v.Hashing.InProgress() && v.Hashing.RequestedAt != h.At.Format(time.RFC3339)
	switch {
	case v.Hashing.CompletedSince(h.At):
		p.planRebuild(events.RebuildPlanned{Volume: v.Name, Hashed: true, ExpectedBytes: cost.Expected, FullBytes: cost.Full, HashedBytes: h.Bytes})
		return true
	case !o.now.Before(h.Deadline):
		other := ""
		if foreign {
			other = fmt.Sprintf("; another request (%s) was in progress", v.Hashing.RequestedAt)
		}
		return skip(HashSkipTimedOut, "the hashing requested for %s did not complete by %s%s",
			h.At.Format("15:04:05"), h.Deadline.Format("15:04:05"), other)
	}
	why := "waiting for Longhorn to hash them"
	if foreign {
		why = fmt.Sprintf("another hashing request (%s) is in progress; ours follows it", v.Hashing.RequestedAt)
	}
	p.wait(&block{volume: v.Name, reason: ReasonSnapshotHashing, until: h.Deadline,
		message: fmt.Sprintf("volume %s: hashing its snapshots before its replica on %s is failed: %s (requested for %s, until %s)",
			v.Name, c.node, why, h.At.Format("15:04:05"), h.Deadline.Format("15:04:05"))})
	return false
}

// hashedAlready reports whether every user snapshot has its checksum,
// the upgrade's named snapshot among them (a snapshot whose status does
// not say yet that it is a user's counts by its checksum alone): nothing
// is left to hash.
func hashedAlready(snaps []dataplane.Snapshot, snapshot string) bool {
	found := false
	for _, s := range snaps {
		if s.UserCreated && s.Checksum == "" {
			return false
		}
		found = found || (s.Name == snapshot && s.Checksum != "")
	}
	return found
}

func (p *stepPlan) planRebuild(plan events.RebuildPlanned) { p.rebuilds = append(p.rebuilds, plan) }

// observeRebuild records v's rebuild as the step sees it: first seen
// under way, then over (healthy, nothing rebuilding).
func (p *stepPlan) observeRebuild(o observation, st nodeupgrade.State, v dataplane.Volume) {
	rb, ok := st.Rebuilds[v.Name]
	if !ok || rb.Planned == nil || rb.Finished != nil {
		return
	}
	if i := slices.IndexFunc(v.Replicas, func(r dataplane.Replica) bool { return r.State == dataplane.ReplicaRebuilding }); i >= 0 {
		if rb.Started == nil {
			r := v.Replicas[i]
			p.rebuilds = append(p.rebuilds, events.RebuildStarted{Volume: v.Name, Replica: r.Name, Node: r.Node, Progress: r.RebuildProgress, At: o.now.UTC()})
		}
		return
	}
	if v.Robustness == dataplane.RobustnessHealthy {
		p.rebuilds = append(p.rebuilds, events.RebuildFinished{Volume: v.Name, At: o.now.UTC()})
	}
}
