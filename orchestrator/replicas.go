package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/switchback-dev/switchback/aggregate"
	"github.com/switchback-dev/switchback/aggregate/manager"
	"github.com/switchback-dev/switchback/aggregate/nodeupgrade"
	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/events"
)

// Temporary replicas (spec.replicaPolicy add-first), the controller's
// part: a worker records that a volume needs one
// (events.TemporaryReplicaRequested), and the controller, whose writes may
// reach any volume, records the spec it will restore and raises the
// volume's numberOfReplicas by one with auto-balance and data locality off
// (events.ReplicaCountRaised); once the upgrade ended, whatever its
// outcome, it lowers the count first, then deletes exactly the temporary
// replica (deleting it first would make Longhorn build another at once),
// then restores the rest (events.ReplicaCountRestored). Every step is
// recorded in the history before or as it is made, so a controller killed
// anywhere does the rest on redelivery. As for hashing, the raise is
// written only for a volume the node's history recorded that has a
// replica on the node.

// raiseReplicas answers a node's request for a temporary replica: the
// first request of the upgrade for the volume raises its count; a later
// node's is answered with the first's record, so that the node knows the
// count the volume asks for without a second raise.
func (o *Orchestrator) raiseReplicas(ctx context.Context, e events.Envelope, st manager.State, ns nodeupgrade.State) error {
	d, ok := e.Data.(events.TemporaryReplicaRequested)
	if !ok || o.replicas == nil || !ns.Exists || ns.Terminal() {
		return nil
	}
	node := e.Aggregate.Node
	log := o.log.With("manager", st.Ref.String(), "node", node, "volume", d.Volume)
	t := ns.Rebuilds[d.Volume].Temporary
	if t == nil || t.Requested == nil {
		return nil
	}
	v, err := o.cfg.Cluster.Volume(ctx, d.Volume)
	if errors.Is(err, dataplane.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("orchestrator: temporary replica of volume %s for %s: %w", d.Volume, node, err)
	}
	if !slices.ContainsFunc(v.Replicas, func(r dataplane.Replica) bool { return r.Node == node }) {
		log.Warn("numberOfReplicas not raised: the volume has no replica on the node")
		return nil
	}
	raised := t.Raised
	if raised == nil {
		rec := events.ReplicaCountRaised{Volume: d.Volume, NumberOfReplicas: d.NumberOfReplicas, ReplicaAutoBalance: d.ReplicaAutoBalance,
			DataLocality: d.DataLocality, Raised: d.NumberOfReplicas + 1}
		first, firstNode, err := o.raisedElsewhere(ctx, st, d.Volume, node)
		if err != nil {
			return err
		}
		if first != nil {
			rec = *first
			rec.FirstNode = firstNode
		}
		if _, err := o.x.Nodes.Execute(ctx, e.Aggregate, nodeupgrade.Command(nodeupgrade.RecordRebuilds{
			Meta: aggregate.Meta{ID: "controller/" + st.Ref.UID + "/replica-count-raised/" + node + "/" + d.Volume}, Events: []events.Event{rec}})); err != nil {
			return err
		}
		raised = &rec
	}
	if raised.FirstNode != "" {
		return nil // raised for the first node, which restores it
	}
	if err := o.replicas.SetReplicaCount(ctx, d.Volume, raisedSpec(*raised)); err != nil && !errors.Is(err, dataplane.ErrNotFound) {
		return fmt.Errorf("orchestrator: raise numberOfReplicas of volume %s for %s: %w", d.Volume, node, err)
	}
	log.Info("numberOfReplicas raised for a temporary replica", "from", raised.NumberOfReplicas, "to", raised.Raised)
	return nil
}

// raisedElsewhere finds the raise of volume another node of the upgrade
// recorded and has not restored: the volume keeps its temporary replica
// from there.
func (o *Orchestrator) raisedElsewhere(ctx context.Context, st manager.State, volume, except string) (*events.ReplicaCountRaised, string, error) {
	for _, node := range st.Plan {
		if node == except {
			continue
		}
		ns, err := o.loadNode(ctx, events.NodeAggregate(st.Ref, node), 0)
		if err != nil {
			return nil, "", err
		}
		if t := ns.Rebuilds[volume].Temporary; t.Owns() && t.Restored == nil {
			return t.Raised, node, nil
		}
	}
	return nil, "", nil
}

// raisedSpec is the volume's spec while its temporary replica is kept:
// auto-balance and data locality are turned off only where they were
// read as on (one not reported is left as it is).
func raisedSpec(r events.ReplicaCountRaised) dataplane.ReplicaSpec {
	spec := dataplane.ReplicaSpec{NumberOfReplicas: r.Raised}
	if r.ReplicaAutoBalance != "" && r.ReplicaAutoBalance != dataplane.AutoBalanceDisabled {
		spec.ReplicaAutoBalance = dataplane.AutoBalanceDisabled
	}
	if r.DataLocality != "" && r.DataLocality != dataplane.DataLocalityDisabled {
		spec.DataLocality = dataplane.DataLocalityDisabled
	}
	return spec
}

// restoreReplicas restores every volume a node of st raised and has not
// restored. Called once the upgrade ended (or is about to be recorded
// ended), whatever its outcome; redelivered, it finds the restores
// recorded and does nothing.
func (o *Orchestrator) restoreReplicas(ctx context.Context, st manager.State) error {
	if o.replicas == nil || st.ReplicaPolicy != events.ReplicaPolicyAddFirst {
		return nil
	}
	for _, node := range st.Plan {
		agg := events.NodeAggregate(st.Ref, node)
		ns, err := o.loadNode(ctx, agg, 0)
		if err != nil {
			return err
		}
		for _, volume := range slices.Sorted(maps.Keys(ns.Rebuilds)) {
			t := ns.Rebuilds[volume].Temporary
			if !t.Owns() || t.Restored != nil {
				continue
			}
			done, err := o.restoreVolume(ctx, volume, t)
			if err != nil {
				return fmt.Errorf("orchestrator: restore the replicas of volume %s (raised for %s): %w", volume, node, err)
			}
			if _, err := o.x.Nodes.Execute(ctx, agg, nodeupgrade.Command(nodeupgrade.RecordRebuilds{
				Meta: aggregate.Meta{ID: "controller/" + st.Ref.UID + "/replica-count-restored/" + node + "/" + volume}, Events: []events.Event{done}})); err != nil {
				return err
			}
			o.log.Info("numberOfReplicas restored", "manager", st.Ref.String(), "node", node, "volume", volume,
				"numberOfReplicas", done.NumberOfReplicas, "deleted", done.Replica, "why", done.Message)
		}
	}
	return nil
}

// restoreVolume lowers the volume's count back, deletes its temporary
// replica unless the volume would then have fewer healthy replicas on
// other nodes than it asks for (a node cancelled or failed mid-way may
// leave its replicas rebuilding: the replica is kept, and the record says
// so), and restores auto-balance and data locality, in that order.
func (o *Orchestrator) restoreVolume(ctx context.Context, volume string, t *nodeupgrade.Temporary) (events.ReplicaCountRestored, error) {
	r := *t.Raised
	out := events.ReplicaCountRestored{Volume: volume, NumberOfReplicas: r.NumberOfReplicas}
	v, err := o.cfg.Cluster.Volume(ctx, volume)
	if errors.Is(err, dataplane.ErrNotFound) {
		out.Message = "the volume was deleted"
		return out, nil
	}
	if err != nil {
		return out, err
	}
	lowered := raisedSpec(r)
	lowered.NumberOfReplicas = r.NumberOfReplicas
	if err := o.replicas.SetReplicaCount(ctx, volume, lowered); err != nil {
		return out, err
	}
	name := temporaryName(v, t)
	i := slices.IndexFunc(v.Replicas, func(x dataplane.Replica) bool { return x.Name == name })
	switch {
	case name == "":
		out.Message = "no temporary replica was built"
	case i < 0:
		out.Replica = name // deleted already
	default:
		if others := v.HealthyNodesOff("", name); others < r.NumberOfReplicas {
			out.Message = fmt.Sprintf("kept the temporary replica %s on %s: the volume has %d healthy replica(s) on other nodes for numberOfReplicas %d; delete it once the volume is healthy",
				name, v.Replicas[i].Node, others, r.NumberOfReplicas)
			break
		}
		if err := o.replicas.DeleteReplica(ctx, volume, name); err != nil {
			return out, err
		}
		out.Replica = name
	}
	restored := dataplane.ReplicaSpec{NumberOfReplicas: r.NumberOfReplicas}
	if lowered.ReplicaAutoBalance != "" {
		restored.ReplicaAutoBalance = r.ReplicaAutoBalance
	}
	if lowered.DataLocality != "" {
		restored.DataLocality = r.DataLocality
	}
	return out, o.replicas.SetReplicaCount(ctx, volume, restored)
}

// temporaryName is the temporary replica of v: the one the node recorded,
// or else the only replica whose name the request did not see ("" when
// there is none, or more than one: which is Longhorn's own is not known).
func temporaryName(v dataplane.Volume, t *nodeupgrade.Temporary) string {
	if t.Added != nil {
		return t.Added.Replica
	}
	var names []string
	for _, r := range v.Replicas {
		if !slices.Contains(t.Requested.Replicas, r.Name) {
			names = append(names, r.Name)
		}
	}
	if len(names) != 1 {
		return ""
	}
	return names[0]
}
