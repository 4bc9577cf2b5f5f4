package sim

import "github.com/switchback-dev/switchback/dataplane"

// Longhorn's storage settings at their defaults, which the simulated
// disks apply (storage-over-provisioning-percentage and
// storage-minimal-available-percentage).
const (
	overProvisioningPercentage = 100
	minimalAvailablePercentage = 25
)

// disk is n's one disk as Longhorn reports it: every replica entry on the
// node, failed ones too, is scheduled on it with its volume's spec.size,
// and what the replicas hold is no longer available.
func (s *Sim) disk(n *node) dataplane.Disk {
	d := dataplane.Disk{Name: DiskName, Block: true, Schedulable: true, StorageMaximum: n.storage, StorageAvailable: n.storage,
		OverProvisioningPercentage: overProvisioningPercentage, MinimalAvailablePercentage: minimalAvailablePercentage}
	for name := range s.replicasOn[n.name] {
		v := s.vols[name]
		if v == nil {
			continue
		}
		for _, r := range v.replicas {
			if r.node == n.name {
				d.StorageScheduled += v.size
				d.StorageAvailable -= r.data.allocated()
			}
		}
	}
	return d
}

// roomFor reports whether a new replica of v fits on n's disk
// (RuleReplicaSpace).
func (s *Sim) roomFor(v *volume, n *node) bool {
	if !s.on(RuleReplicaSpace) {
		return true
	}
	ok, _ := s.disk(n).Fits(v.size, v.actualSize())
	return ok
}
