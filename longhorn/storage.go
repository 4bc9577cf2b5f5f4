package longhorn

import (
	"slices"
	"strconv"
	"strings"

	"github.com/switchback-dev/switchback/dataplane"
)

// What Longhorn's replica scheduler reads of a node's disks and of the
// storage and anti-affinity settings, mapped for the add-first policy's
// room check (docs/longhorn-evidence.md, "Where a new replica lands").

// toDisks maps ln's disks, sorted by name, with the storage settings
// Longhorn applies to each (GetDiskSchedulingInfo, LM@v1.12.1
// scheduler/replica_scheduler.go:1426-1446). A disk whose status Longhorn
// has not written yet reports no storage, which Longhorn schedules
// nothing on either.
func toDisks(ln *LonghornNode, overProvisioning, minimalAvailable int64) []dataplane.Disk {
	names := make([]string, 0, len(ln.Spec.Disks))
	for name := range ln.Spec.Disks {
		names = append(names, name)
	}
	slices.Sort(names)
	out := make([]dataplane.Disk, 0, len(names))
	for _, name := range names {
		spec := ln.Spec.Disks[name]
		d := dataplane.Disk{Name: name, Block: spec.Type == DiskTypeBlock, Tags: slices.Clone(spec.Tags), StorageReserved: spec.StorageReserved,
			OverProvisioningPercentage: overProvisioning, MinimalAvailablePercentage: minimalAvailable}
		if st := ln.Status.DiskStatus[name]; st != nil {
			d.StorageMaximum, d.StorageAvailable, d.StorageScheduled = st.StorageMaximum, st.StorageAvailable, st.StorageScheduled
			d.Schedulable = spec.AllowScheduling && !spec.EvictionRequested && conditionTrue(st.Conditions, ConditionSchedulable)
		}
		out = append(out, d)
	}
	return out
}

// intSetting is an integer setting as Longhorn reads it, def when it is
// absent or unreadable.
func (p *Plane) intSetting(name string, def int64) int64 {
	s, ok := get[Setting](p.settings, key(p.ns, name))
	if !ok {
		return def
	}
	n, err := strconv.ParseInt(strings.TrimSpace(s.Value), 10, 64)
	if err != nil {
		return def
	}
	return n
}

// boolSetting is a boolean setting as Longhorn reads it, def when it is
// absent or unreadable.
func (p *Plane) boolSetting(name string, def bool) bool {
	s, ok := get[Setting](p.settings, key(p.ns, name))
	if !ok {
		return def
	}
	b, err := strconv.ParseBool(strings.TrimSpace(s.Value))
	if err != nil {
		return def
	}
	return b
}

// softAntiAffinity is a volume's spec.replicaSoftAntiAffinity or
// spec.replicaZoneSoftAntiAffinity over the global setting's value:
// enabled or disabled win, anything else follows the setting
// (LM@v1.12.1 scheduler/replica_scheduler.go:342-363).
func softAntiAffinity(spec string, setting bool) bool {
	switch spec {
	case "enabled":
		return true
	case "disabled":
		return false
	}
	return setting
}

// volumeSize is spec.size, 0 when it is not a number.
func volumeSize(v *Volume) int64 {
	n, err := strconv.ParseInt(v.Spec.Size, 10, 64)
	if err != nil {
		return 0
	}
	return n
}
