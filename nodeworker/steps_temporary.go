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

// Temporary replicas (spec.replicaPolicy add-first). A volume whose
// replica on the node is about to be failed, and that would then keep
// fewer healthy replicas than its numberOfReplicas, first gets one more:
// the worker records the request with the volume's spec as read, the
// controller (whose writes may reach any volume) records the spec to
// restore and raises numberOfReplicas by one with auto-balance and data
// locality off, Longhorn builds the replica on a node that allows
// scheduling (the node's own scheduling is off by then), and only once it
// serves are the node's replicas of the volume failed. The replica stays
// for the whole upgrade, so a later node of the volume finds it there and
// needs none of its own; the controller removes it once the upgrade ended.

// Reasons the wait for a temporary replica blocks.
const (
	// ReasonTemporaryReplica is the wait for the controller's raise and
	// then for Longhorn to build the replica.
	ReasonTemporaryReplica = "TemporaryReplica"
	// ReasonTemporaryReplicaSharesNode: Longhorn placed the temporary
	// replica on a node that holds another replica of the volume (replica
	// soft anti-affinity on), where it adds no protection against that
	// node's loss.
	ReasonTemporaryReplicaSharesNode = "TemporaryReplicaSharesNode"
)

// awaitingTemporary reports whether v's replica on node waits for a
// temporary replica that is not recorded as serving yet: its snapshots
// are not read (nor hashed) before, since Longhorn neither hashes during
// a rebuild nor carries checksums into a rebuilt replica.
func awaitingTemporary(v dataplane.Volume, st nodeupgrade.State, node string) bool {
	if !st.AddsFirst() || v.StrictLocal || v.NumberOfReplicas < 1 || !needsRebuildPlan(v, st, node) {
		return false
	}
	t := st.Rebuilds[v.Name].Temporary
	if t == nil || t.Requested == nil {
		return v.HealthyNodesOff(node, "") < v.NumberOfReplicas
	}
	return t.Raised == nil || v.HealthyNodesOff(node, "") < t.Raised.NumberOfReplicas
}

// prepareRedundancy reports whether failing v's replica on the node
// leaves v with as many healthy replicas, on as many other nodes, as it
// asks for; under add-first, until it does, it asks for a temporary
// replica and waits for it. A strict-local volume has its only replica on
// its node and no other node to hold one.
func (p *stepPlan) prepareRedundancy(o observation, st nodeupgrade.State, v dataplane.Volume, c settings) bool {
	if !st.AddsFirst() || v.StrictLocal || v.NumberOfReplicas < 1 || !needsRebuildPlan(v, st, c.node) {
		return true
	}
	t := st.Rebuilds[v.Name].Temporary
	if t == nil || t.Requested == nil {
		if v.HealthyNodesOff(c.node, "") >= v.NumberOfReplicas {
			return true
		}
		if o.node.AllowScheduling {
			// The replica must not land on the node about to go: the
			// request waits for the scheduling this round turns off.
			p.wait(waiting(v.Name, ReasonTemporaryReplica, "volume %s: asking for its temporary replica once replica scheduling is off on %s", v.Name, c.node))
			return false
		}
		at := o.now.UTC().Truncate(time.Second)
		deadline := at.Add(plan.WaitBudget(v.ActualSize, c.copyRate, c.hashFloor))
		names := make([]string, len(v.Replicas))
		for i, r := range v.Replicas {
			names[i] = r.Name
		}
		p.rebuilds = append(p.rebuilds, events.TemporaryReplicaRequested{Volume: v.Name, NumberOfReplicas: v.NumberOfReplicas,
			ReplicaAutoBalance: v.ReplicaAutoBalance, DataLocality: v.DataLocality, Replicas: names, At: at, Deadline: deadline})
		p.wait(&block{volume: v.Name, reason: ReasonTemporaryReplica, until: deadline,
			message: fmt.Sprintf("volume %s: %d healthy replica(s) off %s for numberOfReplicas %d; asking for a temporary replica before failing its replica on %s",
				v.Name, v.HealthyNodesOff(c.node, ""), c.node, v.NumberOfReplicas, c.node)})
		return false
	}
	if t.Raised == nil {
		p.wait(&block{volume: v.Name, reason: ReasonTemporaryReplica, until: t.Requested.Deadline,
			message: fmt.Sprintf("volume %s: waiting for the controller to raise its numberOfReplicas for a temporary replica", v.Name)})
		return false
	}
	var temp *dataplane.Replica
	if t.Owns() {
		temp = temporaryReplica(v, t)
	}
	if t.Owns() && t.Added == nil && temp != nil {
		p.rebuilds = append(p.rebuilds, events.TemporaryReplicaAdded{Volume: v.Name, Replica: temp.Name, Node: temp.Node})
	}
	if temp != nil && slices.ContainsFunc(v.Replicas, func(r dataplane.Replica) bool { return r.Node == temp.Node && r.Name != temp.Name }) {
		p.wait(waiting(v.Name, ReasonTemporaryReplicaSharesNode,
			"volume %s: Longhorn placed its temporary replica %s on %s, which holds another replica of the volume (replica soft anti-affinity is on): delete replica %s for Longhorn to place it elsewhere, or turn soft anti-affinity off",
			v.Name, temp.Name, temp.Node, temp.Name))
		return false
	}
	want := t.Raised.NumberOfReplicas
	if v.HealthyNodesOff(c.node, "") >= want {
		return true
	}
	what := "Longhorn to place it (on a node that allows scheduling and holds no replica of the volume, with the space)"
	if temp != nil {
		what = fmt.Sprintf("its replica %s on %s to be rebuilt (%d%%)", temp.Name, temp.Node, temp.RebuildProgress)
	}
	p.wait(&block{volume: v.Name, reason: ReasonTemporaryReplica, until: t.Requested.Deadline,
		message: fmt.Sprintf("volume %s: waiting for a temporary replica before failing its replica on %s: %s", v.Name, c.node, what)})
	return false
}

// temporaryReplica is v's temporary replica: the one recorded, or the
// first not failed of a name the request did not see; nil when there is
// none (yet).
func temporaryReplica(v dataplane.Volume, t *nodeupgrade.Temporary) *dataplane.Replica {
	for i, r := range v.Replicas {
		switch {
		case t.Added != nil && r.Name == t.Added.Replica:
			return &v.Replicas[i]
		case t.Added == nil && !r.Failed && !slices.Contains(t.Requested.Replicas, r.Name):
			return &v.Replicas[i]
		}
	}
	return nil
}
