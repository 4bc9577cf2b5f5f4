package perf_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/switchback-dev/switchback/aggregate/nodeupgrade"
	"github.com/switchback-dev/switchback/api/v1beta2"
	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/sim"
	"github.com/switchback-dev/switchback/test/harness/enginetest"
)

// The rebuild benchmark's cluster and the figures it derives: one node,
// node-0, holds a replica of each of rebuildVolumes attached v2 volumes of
// rebuildAllocated (their other replica, initiator and target on the three
// other nodes), and rebuildWritten of each is written while node-0 is
// upgraded. The rebuild time is what the bytes take at rebuildBandwidth a
// rebuild, rebuildConcurrent at once on the node (Longhorn's
// concurrent-replica-rebuild-per-node-limit, default 5); the hashing's, what
// it reads at the worker's default --hash-rate (64 MiB/s a replica).
const (
	rebuildVolumes    = 20
	rebuildAllocated  = 100 << 30
	rebuildWritten    = rebuildAllocated / 100
	rebuildBandwidth  = 200 << 20
	rebuildConcurrent = 5
	hashRate          = 64 << 20
)

// upgradeOneNode upgrades node-0 of the benchmark's cluster, hashing its
// volumes' snapshots or (integrity disabled) not, and returns the bytes
// its rebuilds copied, a whole copy's, and what the hashing read.
func upgradeOneNode(b *testing.B, disabled bool) (copied, full, hashed int64) {
	b.Helper()
	s := sim.New(sim.Config{Profile: dataplane.ProfileInPlace, IMStartLatency: 300 * time.Millisecond,
		RebuildBandwidth: 1 << 50, ReplicaReplenishWait: -1})
	for i := range 4 {
		if err := s.AddNode(fmt.Sprintf("node-%d", i)); err != nil {
			b.Fatal(err)
		}
	}
	for k := range rebuildVolumes {
		other := fmt.Sprintf("node-%d", 1+k%3)
		if err := s.AddVolumeSpec(sim.VolumeSpec{Name: fmt.Sprintf("pvc-%02d", k), AttachedTo: other, ReplicasOn: []string{"node-0", other},
			Allocated: rebuildAllocated, IntegrityDisabled: disabled}); err != nil {
			b.Fatal(err)
		}
	}
	e := enginetest.Start(b, s, enginetest.Options{Defaults: true})
	defer func() {
		e.Stop()
		e.Server.Shutdown()
	}()
	m := events.ManagerRef{Namespace: "bench", Name: "rebuild", UID: fmt.Sprintf("rebuild-%t", disabled)}
	e.Request(m, "node-0")
	// While the node's instance manager is replaced, its replicas failed,
	// the workloads write.
	e.WaitNode(m, "node-0", 5*time.Minute, "its instance manager being replaced", func(st nodeupgrade.State) bool {
		return st.State == events.NodeUpgradingInstanceManager
	})
	for k := range rebuildVolumes {
		if err := s.Write(fmt.Sprintf("pvc-%02d", k), rebuildWritten); err != nil {
			b.Fatal(err)
		}
	}
	e.Completes(m)
	for _, r := range s.RebuildRecords() {
		copied, full = copied+r.Bytes, full+r.Full
	}
	return copied, full, s.HashedBytes()
}

// rebuildTime is how long rebuilding bytes over volumes replicas takes at
// rebuildBandwidth each, rebuildConcurrent at once.
func rebuildTime(bytes int64, volumes int) time.Duration {
	rounds := (volumes + rebuildConcurrent - 1) / rebuildConcurrent
	per := float64(bytes) / float64(volumes) / rebuildBandwidth
	return time.Duration(float64(rounds) * per * float64(time.Second))
}

// hashTime is how long Longhorn takes to hash what the benchmark's
// volumes read, hashed bytes over their two replicas: one volume at a
// time on each owner (attached) node, the most loaded of the three other
// nodes owning ceil(20/3) of them, each volume's replicas read at once at
// hashRate.
func hashTime(hashed int64) time.Duration {
	perVolume := float64(hashed) / rebuildVolumes / 2
	mostOwned := (rebuildVolumes + 2) / 3
	return time.Duration(float64(mostOwned) * perVolume / hashRate * float64(time.Second))
}

// BenchmarkRebuildBytes: the bytes one node's upgrade makes Longhorn copy,
// on the simulator playing longhorn-spdk-engine v1.12.1's rebuild rules:
// 20 attached volumes of 100 GiB with a replica on the node, 1% of each
// written while the node is upgraded. With delta rebuilds (the product's
// default: the upgrade's snapshot hashed before the replica fails) against
// today's whole copies (the same cluster with snapshot data integrity
// disabled, so nothing is hashed). delta/full: goal ≤ 0.05. The rebuild
// minutes are the bytes at 200 MiB/s a rebuild, 5 at once on the node; the
// hashing's (hashTime), what it read at 64 MiB/s, one volume at a time on
// each node owning some, while every copy serves: paid on a volume's first
// node only, the nodes after it hashing what was written since.
func BenchmarkRebuildBytes(b *testing.B) {
	const gib = float64(1 << 30)
	for b.Loop() {
		delta, _, hashed := upgradeOneNode(b, false)
		whole, _, _ := upgradeOneNode(b, true)
		b.ReportMetric(float64(delta)/gib, "delta-GiB/node")
		b.ReportMetric(float64(whole)/gib, "full-GiB/node")
		b.ReportMetric(float64(delta)/float64(whole), "delta/full")
		b.ReportMetric(rebuildTime(delta, rebuildVolumes).Minutes(), "rebuild-min-delta")
		b.ReportMetric(rebuildTime(whole, rebuildVolumes).Minutes(), "rebuild-min-full")
		b.ReportMetric(float64(hashed)/gib, "hashed-GiB")
		b.ReportMetric(hashTime(hashed).Minutes(), "hash-min")
	}
}

// upgradeAddFirst upgrades every node of the benchmark's cluster under
// spec.replicaPolicy add-first and returns, per volume, the bytes the
// temporary replicas copied (the replicas of a name the volume did not
// have before), the most any volume paid.
func upgradeAddFirst(b *testing.B) (total, most int64) {
	b.Helper()
	s := sim.New(sim.Config{Profile: dataplane.ProfileInPlace, IMStartLatency: 300 * time.Millisecond,
		RebuildBandwidth: 1 << 50, ReplicaReplenishWait: -1})
	nodes := make([]string, 4)
	for i := range nodes {
		nodes[i] = fmt.Sprintf("node-%d", i)
		if err := s.AddNode(nodes[i]); err != nil {
			b.Fatal(err)
		}
	}
	own := map[string][]string{}
	for k := range rebuildVolumes {
		name, other := fmt.Sprintf("pvc-%02d", k), fmt.Sprintf("node-%d", 1+k%3)
		if err := s.AddVolumeSpec(sim.VolumeSpec{Name: name, AttachedTo: other, ReplicasOn: []string{"node-0", other}, Allocated: rebuildAllocated}); err != nil {
			b.Fatal(err)
		}
		own[name] = []string{name + "-r-1", name + "-r-2"}
	}
	e := enginetest.Start(b, s, enginetest.Options{Defaults: true})
	defer func() {
		e.Stop()
		e.Server.Shutdown()
	}()
	m := events.ManagerRef{Namespace: "bench", Name: "add-first", UID: "add-first"}
	e.RequestSpec(m, v1beta2.DataEngineUpgradeManagerSpec{DataEngine: v1beta2.DataEngineTypeV2, Nodes: nodes, ReplicaPolicy: v1beta2.ReplicaPolicyAddFirst})
	e.Completes(m)
	extra := map[string]int64{}
	for _, r := range s.RebuildRecords() {
		if !slices.Contains(own[r.Volume], r.Replica) {
			extra[r.Volume] += r.Bytes
		}
	}
	for _, n := range extra {
		total, most = total+n, max(most, n)
	}
	return total, most
}

// BenchmarkAddFirstExtraBytes: what spec.replicaPolicy add-first costs a
// whole upgrade of the rebuild benchmark's cluster (every node, 20
// attached 2-replica volumes of 100 GiB): the temporary replicas' copies,
// per volume, against the volume's allocated size. extra/allocated: goal
// ≤ 1, one whole copy per volume and upgrade, not one per node.
func BenchmarkAddFirstExtraBytes(b *testing.B) {
	const gib = float64(1 << 30)
	for b.Loop() {
		total, most := upgradeAddFirst(b)
		b.ReportMetric(float64(total)/gib, "extra-GiB/upgrade")
		b.ReportMetric(float64(most)/rebuildAllocated, "extra/allocated")
	}
}
