package dataplane

import (
	"fmt"
	"slices"
)

// Disk is one of a node's Longhorn disks as Longhorn's replica scheduler
// weighs it for a new replica: its spec, its status, and the two storage
// settings it applies to every disk (docs/longhorn-evidence.md, "Where a
// new replica lands").
type Disk struct {
	// Name is the disk's key in the node's spec.disks.
	Name string
	// Block is spec.diskType block: the only type a v2 replica lands on.
	Block bool
	// Schedulable is spec.allowScheduling, no spec.evictionRequested, and
	// its Schedulable condition true.
	Schedulable bool
	// Tags are spec.tags, matched against a volume's diskSelector.
	Tags []string
	// StorageMaximum, StorageAvailable and StorageScheduled are
	// status.storageMaximum, storageAvailable and storageScheduled (the
	// spec.size of every replica on it); StorageReserved is
	// spec.storageReserved.
	StorageMaximum, StorageAvailable, StorageReserved, StorageScheduled int64
	// OverProvisioningPercentage and MinimalAvailablePercentage are the
	// settings storage-over-provisioning-percentage (100 by default) and
	// storage-minimal-available-percentage (25).
	OverProvisioningPercentage, MinimalAvailablePercentage int64
}

// Fits says whether Longhorn would schedule on d a replica of a volume of
// spec.size size holding actual bytes, and if not why: the disk must keep
// more than its minimal available share once actual is written, and the
// sizes scheduled on it must stay within its over-provisioning limit.
func (d Disk) Fits(size, actual int64) (bool, string) {
	if d.StorageMaximum <= 0 || d.StorageAvailable <= 0 {
		return false, fmt.Sprintf("disk %s reports no storage", d.Name)
	}
	minimal := int64(float64(d.StorageMaximum) * float64(d.MinimalAvailablePercentage) / 100)
	if d.StorageAvailable-actual <= minimal {
		return false, fmt.Sprintf("disk %s would keep %d bytes available, not more than its %d%% minimum (%d bytes)",
			d.Name, d.StorageAvailable-actual, d.MinimalAvailablePercentage, minimal)
	}
	limit := int64(float64(d.StorageMaximum-d.StorageReserved) * float64(d.OverProvisioningPercentage) / 100)
	if size+d.StorageScheduled > limit {
		return false, fmt.Sprintf("disk %s would have %d bytes scheduled, over its %d%% over-provisioning limit (%d bytes)",
			d.Name, size+d.StorageScheduled, d.OverProvisioningPercentage, limit)
	}
	return true, ""
}

// Usable is what Longhorn's balance counts free on d: available, less
// reserved and scheduled, never below zero.
func (d Disk) Usable() int64 {
	return max(d.StorageAvailable-d.StorageReserved-d.StorageScheduled, 0)
}

// Take returns d as it is once a replica of size and actual bytes is
// scheduled on it.
func (d Disk) Take(size, actual int64) Disk {
	d.StorageScheduled += size
	d.StorageAvailable -= actual
	return d
}

// SelectorMatches reports whether tags hold every tag of selector, as
// Longhorn matches a volume's nodeSelector and diskSelector with its
// allow-empty-node-selector-volume and allow-empty-disk-selector-volume
// settings at their default (true): an empty selector matches anything.
func SelectorMatches(tags, selector []string) bool {
	for _, s := range selector {
		if !slices.Contains(tags, s) {
			return false
		}
	}
	return true
}
