package sim

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/switchback-dev/switchback/dataplane"
)

var _ dataplane.ReplicaCounter = (*Sim)(nil)

// The volume defaults Longhorn's webhook writes: auto-balance follows the
// global setting (disabled by default), data locality disabled.
const (
	defaultAutoBalance  = "ignored"
	defaultDataLocality = "disabled"
)

// SetReplicaCount implements dataplane.ReplicaCounter: the volume's
// spec.numberOfReplicas, spec.replicaAutoBalance and spec.dataLocality.
// A raised count is replenished at the next pass (a new replica on an
// eligible node without one: no failed replica waits to be reused); a
// lowered one deletes an extra healthy replica only as
// RuleExtraReplicaCleanup says.
func (s *Sim) SetReplicaCount(ctx context.Context, volName string, spec dataplane.ReplicaSpec) error {
	arg := fmt.Sprintf("%d autoBalance=%s dataLocality=%s", spec.NumberOfReplicas, spec.ReplicaAutoBalance, spec.DataLocality)
	return s.act(ctx, "SetReplicaCount", volName, arg, func(now time.Time) (bool, error) {
		v, err := s.volume(volName)
		if err != nil {
			return false, fmt.Errorf("set replica count: %w", err)
		}
		if spec.NumberOfReplicas < 1 {
			return false, fmt.Errorf("%w: volume %s: numberOfReplicas %d", dataplane.ErrRefused, volName, spec.NumberOfReplicas)
		}
		before := [3]string{fmt.Sprint(v.numReplicas), v.autoBalance, v.dataLocality}
		v.numReplicas = spec.NumberOfReplicas
		v.autoBalance = cmp.Or(spec.ReplicaAutoBalance, v.autoBalance)
		v.dataLocality = cmp.Or(spec.DataLocality, v.dataLocality)
		if before == [3]string{fmt.Sprint(v.numReplicas), v.autoBalance, v.dataLocality} {
			return false, nil
		}
		s.cleanupExtra(v)
		s.reconcile[v.name] = struct{}{}
		s.markVolume(v.name)
		return true, nil
	})
}

// cleanupExtra deletes one extra healthy replica of v, as Longhorn's
// cleanupExtraHealthyReplicas does (RuleExtraReplicaCleanup): with data
// locality on, the smallest-named one off the engine's node; with
// auto-balance on, the smallest-named one (Longhorn's preference by disk
// and node, simplified: not necessarily the one the caller would pick);
// with both disabled, none.
func (s *Sim) cleanupExtra(v *volume) {
	if !s.on(RuleExtraReplicaCleanup) || v.count(dataplane.ReplicaRunning) <= v.numReplicas {
		return
	}
	locality := v.dataLocality != "" && v.dataLocality != dataplane.DataLocalityDisabled
	balance := v.autoBalance != "" && v.autoBalance != dataplane.AutoBalanceDisabled && v.autoBalance != defaultAutoBalance
	if !locality && !balance {
		return
	}
	var names []string
	for _, r := range v.replicas {
		if r.state == dataplane.ReplicaRunning && !r.failed && (!locality || r.node != v.targetHost()) {
			names = append(names, r.name)
		}
	}
	if len(names) == 0 {
		return
	}
	slices.SortFunc(names, strings.Compare)
	r, _ := v.replicaNamed(names[0])
	s.deleteReplica(v, r, s.now())
}

// DeleteReplica implements dataplane.ReplicaCounter: it deletes a replica
// object, as a user (or Longhorn's API) would: Longhorn takes it out of
// the engine first and stops its instance once the engine no longer holds
// it (at most 60 s later); the simulator does both at once. Deleting it
// again is a no-op.
func (s *Sim) DeleteReplica(ctx context.Context, volName, replicaName string) error {
	return s.act(ctx, "DeleteReplica", volName, replicaName, func(now time.Time) (bool, error) {
		v, r, err := s.replica(volName, replicaName)
		if err != nil || r == nil {
			return false, err
		}
		s.deleteReplica(v, r, now)
		return true, nil
	})
}

func (s *Sim) deleteReplica(v *volume, r *replica, now time.Time) {
	r.inEngine = false
	s.failReplica(v, r, now)
	s.stopReplica(v, r, now)
	s.removeReplica(v, r)
}

// ReplicaSpecOf is the volume's replica spec as SetReplicaCount sets it.
func (s *Sim) ReplicaSpecOf(volName string) (dataplane.ReplicaSpec, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, err := s.volume(volName)
	if err != nil {
		return dataplane.ReplicaSpec{}, err
	}
	return dataplane.ReplicaSpec{NumberOfReplicas: v.numReplicas, ReplicaAutoBalance: v.autoBalance, DataLocality: v.dataLocality}, nil
}
