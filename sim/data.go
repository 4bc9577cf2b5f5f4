package sim

import (
	"fmt"
	"slices"
	"time"

	"github.com/switchback-dev/switchback/dataplane"
)

// The replicas' data, counted in bytes: what a rebuild copies follows
// longhorn-spdk-engine v1.12.1's rules (sim/RULES.md, "The bytes a rebuild
// copies"), and with Config.RebuildBandwidth so does its time. Each
// replica holds a chain of snapshots and a head; the volume's writes
// (VolumeSpec.WriteRate) go to the heads of the replicas its engine writes
// to, a snapshot of the volume closes every such head into a snapshot of
// the same content on each.

// snap is one snapshot lvol of a replica.
type snap struct {
	name string
	// system: taken by Longhorn (a rebuild's), not a user's; the purge
	// before a rebuild removes those.
	system  bool
	created time.Time
	// size is its actual size: the bytes written while it was the head.
	size int64
	// checksum is its content's checksum once hashed ("" until then):
	// equal contents hash alike. ranges: its 1 MiB range checksums exist
	// too.
	checksum string
	ranges   bool
}

// replicaData is a replica's chain, oldest first, and its head's bytes.
type replicaData struct {
	snaps []snap
	head  int64
}

// allocated is every byte the replica holds.
func (d replicaData) allocated() int64 {
	n := d.head
	for _, s := range d.snaps {
		n += s.size
	}
	return n
}

func (d replicaData) snapshot(name string) (snap, bool) {
	i := slices.IndexFunc(d.snaps, func(s snap) bool { return s.name == name })
	if i < 0 {
		return snap{}, false
	}
	return d.snaps[i], true
}

// RebuildRecord is one rebuild as the simulator counted it.
type RebuildRecord struct {
	Volume, Replica, Node string
	// Bytes is what was copied; Full what copying every snapshot whole
	// would have been (the replica's allocated size at the source).
	Bytes, Full int64
	// Start is when the copy began, Duration how long it takes.
	Start    time.Time
	Duration time.Duration
}

// writesTo reports whether the volume's engine writes to r: it is in the
// RAID, serving (RW) or being rebuilt (WO).
func writesTo(r *replica) bool {
	return r.inEngine && r.instance && !r.failed &&
		(r.state == dataplane.ReplicaRunning || (r.state == dataplane.ReplicaRebuilding && r.joined))
}

// accountWrites adds what v was written since it was last counted to the
// heads its engine writes to.
func (s *Sim) accountWrites(v *volume, now time.Time) {
	if v.writeRate > 0 && v.attached != "" && now.After(v.wroteAt) {
		v.write(int64(float64(v.writeRate) * now.Sub(v.wroteAt).Seconds()))
	}
	v.wroteAt = now
}

// write adds n written bytes to the heads of the replicas v's engine
// writes to.
func (v *volume) write(n int64) {
	for _, r := range v.replicas {
		if writesTo(r) {
			r.data.head += n
		}
	}
}

// accountAll counts the writes of every volume with a WriteRate.
func (s *Sim) accountAll(now time.Time) {
	for name := range s.writing {
		if v := s.vols[name]; v != nil {
			s.accountWrites(v, now)
		}
	}
}

// snapshotData closes the head of every replica v's engine writes to into
// a snapshot of that name.
func (s *Sim) snapshotData(v *volume, name string, system bool, now time.Time) {
	s.accountWrites(v, now)
	for _, r := range v.replicas {
		if writesTo(r) {
			r.data.snaps = append(r.data.snaps, snap{name: name, system: system, created: now, size: r.data.head})
			r.data.head = 0
		}
	}
}

// removeSnapshot deletes a snapshot from a chain: its data merges into its
// child, whose checksum is cleared (SPDK@v1.12.1 pkg/spdk/replica.go
// 2018-2033 for a deletion, 2184-2245 for the purge).
func (d *replicaData) removeSnapshot(i int) {
	size := d.snaps[i].size
	d.snaps = slices.Delete(d.snaps, i, i+1)
	if i < len(d.snaps) {
		d.snaps[i].size += size
		d.snaps[i].checksum, d.snaps[i].ranges = "", false
	} else {
		d.head += size
	}
}

// purgeSystem is the snapshot purge Longhorn runs before a rebuild
// (LM@v1.12.1 controller/engine_controller.go 2439-2445; SPDK
// SnapshotPurge): every system snapshot goes into its child.
func (d *replicaData) purgeSystem() {
	for i := 0; i < len(d.snaps); {
		if d.snaps[i].system {
			d.removeSnapshot(i)
			continue
		}
		i++
	}
}

// contentSum is the checksum a snapshot's content hashes to: the same
// snapshot of one volume holds the same bytes on every replica.
func contentSum(v *volume, sn snap) string {
	return fmt.Sprintf("%s/%s/%d/%d", v.name, sn.name, sn.created.UnixNano(), sn.size)
}

// hashSnapshots computes the checksums (and range checksums) of every user
// snapshot of v's serving replicas, as an on-demand hashing request does
// (LM@v1.12.1 k8s/pkg/apis/longhorn/v1beta2/volume.go 421-427, 488-491):
// only with two serving replicas and no rebuild under way, else nothing
// (silently, as Longhorn skips it). It reports whether it hashed, and the
// bytes it read.
func (s *Sim) hashSnapshots(v *volume) (bool, int64) {
	if v.count(dataplane.ReplicaRunning) < 2 || v.count(dataplane.ReplicaRebuilding) > 0 {
		return false, 0
	}
	var read int64
	for _, r := range v.replicas {
		if r.state != dataplane.ReplicaRunning || r.failed {
			continue
		}
		for i, sn := range r.data.snaps {
			if sn.system {
				continue
			}
			r.data.snaps[i].checksum, r.data.snaps[i].ranges = contentSum(v, sn), true
			read += sn.size
		}
	}
	return true, read
}

// rebuildCopy is what rebuilding dst from src copies, and dst's data after
// it (SPDK@v1.12.1 pkg/spdk/engine.go 996-1010: a rebuild snapshot on every
// replica first; pkg/spdk/replica.go 3831-3906: the destination's head is
// cloned anew, its snapshots the source lacks deleted; 4277-4281: a
// snapshot both hold with the same timestamp, actual size and a non-empty
// equal checksum is skipped when fastSync; 4416-4470: one both hold with
// range checksums copies only the clusters that differ; any other is
// copied whole and arrives without a checksum). The source's chain must
// already hold the rebuild snapshot.
func rebuildCopy(src, dst replicaData, fastSync bool) (copied int64, out replicaData) {
	out = replicaData{}
	for _, sn := range src.snaps {
		have, ok := dst.snapshot(sn.name)
		switch {
		case ok && fastSync && have.created.Equal(sn.created) && have.size == sn.size && sn.checksum != "" && have.checksum == sn.checksum:
			out.snaps = append(out.snaps, have)
		case ok && have.ranges && sn.ranges:
			if have.checksum != sn.checksum {
				copied += sn.size // a changed snapshot: its differing clusters, at most all of it
			}
			out.snaps = append(out.snaps, snap{name: sn.name, system: sn.system, created: sn.created, size: sn.size})
		default:
			copied += sn.size
			out.snaps = append(out.snaps, snap{name: sn.name, system: sn.system, created: sn.created, size: sn.size})
		}
	}
	return copied, out
}

// copyForRebuild is the data side of dst joining its engine to be rebuilt:
// the purge, the rebuild snapshot on the serving replicas, and the copy
// from the first of them (rebuildCopy), counted as a RebuildRecord. A
// salvage, with no serving replica left, copies nothing.
func (s *Sim) copyForRebuild(v *volume, dst *replica, now time.Time) RebuildRecord {
	s.accountWrites(v, now)
	rec := RebuildRecord{Volume: v.name, Replica: dst.name, Node: dst.node, Start: now}
	var src *replica
	for _, q := range v.replicas {
		if q != dst && writesTo(q) && q.state == dataplane.ReplicaRunning {
			if src == nil {
				src = q
			}
			q.data.purgeSystem()
		}
	}
	if src == nil {
		return rec
	}
	s.snapshotData(v, fmt.Sprintf("rebuild-%d", len(s.rebuilds)+1), true, now)
	rec.Full = src.data.allocated()
	rec.Bytes, dst.data = rebuildCopy(src.data, dst.data, !s.cfg.NoFastReplicaRebuild)
	if bw := s.cfg.RebuildBandwidth; bw > 0 {
		rec.Duration = time.Duration(float64(rec.Bytes) / float64(bw) * float64(time.Second))
	}
	s.rebuilds = append(s.rebuilds, rec)
	return rec
}

// RebuildRecords returns every rebuild the simulator counted, oldest
// first.
func (s *Sim) RebuildRecords() []RebuildRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.rebuilds)
}

// Allocated returns, per replica of volName, the bytes it holds.
func (s *Sim) Allocated(volName string) (map[string]int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, err := s.volume(volName)
	if err != nil {
		return nil, err
	}
	s.accountWrites(v, s.now())
	out := map[string]int64{}
	for _, r := range v.replicas {
		out[r.name] = r.data.allocated()
	}
	return out, nil
}

// Write plays volName's workload writing n bytes now, on top of its
// WriteRate: they reach the heads of the replicas its engine writes to.
func (s *Sim) Write(volName string, n int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, err := s.volume(volName)
	if err != nil {
		return fmt.Errorf("write: %w", err)
	}
	s.accountWrites(v, s.now())
	v.write(n)
	return nil
}
