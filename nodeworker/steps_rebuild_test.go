package nodeworker

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/aggregate/nodeupgrade"
	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/events"
)

// The rebuild gate of failing-replicas: no replica is failed until every
// volume's rebuild is planned, hashed when it can be, with the reason when
// it cannot.
func TestPrepareRebuild(t *testing.T) {
	const gib = int64(1) << 30
	now := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	at := dataplane.HashRequestTime(now)
	hashCfg := cfg
	hashCfg.hashRate, hashCfg.hashFloor = 1<<30, time.Minute
	// vol-a: 10 GiB, the upgrade's snapshot of 9 GiB on top of 1 GiB of
	// head; replicas on n1 and n2.
	withData := func(v dataplane.Volume) dataplane.Volume {
		v.ActualSize = 10 * gib
		return v
	}
	snaps := func(checksum string) []dataplane.Snapshot {
		return []dataplane.Snapshot{{Name: cfg.snapshot, UserCreated: true, Size: 9 * gib, Checksum: checksum, Created: now.Add(-time.Minute)}}
	}
	requested := &events.HashingRequested{Volume: "vol-a", Snapshot: cfg.snapshot, At: at, Deadline: at.Add(time.Minute + 9*time.Second), Bytes: 9 * gib}
	tests := []struct {
		name    string
		v       func(dataplane.Volume) dataplane.Volume
		snaps   []dataplane.Snapshot
		noSnap  bool
		hashing *events.HashingRequested
		now     time.Time
		// want: the commands recorded, by kind; fails: the replica failed.
		want   []string
		plan   *events.RebuildPlanned
		reason string
		fails  bool
	}{
		{name: "an unhashed snapshot: hashing requested, nothing failed, until the deadline its size sets",
			snaps: snaps(""), want: []string{"RequestHashing"}, reason: ReasonSnapshotHashing},
		{name: "requested, not complete: still waiting, nothing recorded",
			snaps: snaps(""), hashing: requested, reason: ReasonSnapshotHashing},
		{name: "complete: planned as hashed, only the head expected, and failed",
			v: func(v dataplane.Volume) dataplane.Volume {
				v.Hashing = dataplane.SnapshotHashing{RequestedAt: at.Format(time.RFC3339), CompletedAt: at.Format(time.RFC3339)}
				return v
			},
			snaps: snaps("sum"), hashing: requested, want: []string{"PlanRebuild"}, fails: true,
			plan: &events.RebuildPlanned{Volume: "vol-a", Hashed: true, ExpectedBytes: gib, FullBytes: 10 * gib, HashedBytes: 9 * gib}},
		{name: "a later request's completion covers ours",
			v: func(v dataplane.Volume) dataplane.Volume {
				later := at.Add(time.Hour).Format(time.RFC3339)
				v.Hashing = dataplane.SnapshotHashing{RequestedAt: later, CompletedAt: later}
				return v
			},
			snaps: snaps("sum"), hashing: requested, want: []string{"PlanRebuild"}, fails: true},
		{name: "past the deadline: planned unhashed, a whole copy expected, and failed",
			snaps: snaps(""), hashing: requested, now: at.Add(time.Hour), want: []string{"PlanRebuild"}, fails: true,
			plan: &events.RebuildPlanned{Volume: "vol-a", Reason: HashSkipTimedOut, ExpectedBytes: 10 * gib, FullBytes: 10 * gib}},
		{name: "already hashed (the periodic hashing did it): planned at once",
			snaps: snaps("sum"), want: []string{"PlanRebuild"}, fails: true},
		{name: "one healthy replica: Longhorn would never hash, planned unhashed at once",
			v: func(v dataplane.Volume) dataplane.Volume {
				v.Replicas = []dataplane.Replica{replica("vol-a", "n1", dataplane.ReplicaRunning), replica("vol-a", "n2", dataplane.ReplicaError)}
				return v
			},
			snaps: snaps(""), want: []string{"PlanRebuild"}, reason: "LastHealthyReplica",
			plan: &events.RebuildPlanned{Volume: "vol-a", Reason: HashSkipTooFewReplicas, ExpectedBytes: 10 * gib, FullBytes: 10 * gib}},
		{name: "snapshot data integrity disabled: planned unhashed at once",
			v: func(v dataplane.Volume) dataplane.Volume {
				v.Hashing.Disabled = true
				return v
			},
			snaps: snaps(""), want: []string{"PlanRebuild"}, fails: true},
		{name: "no replica reuse: a whole copy elsewhere whatever the checksums",
			v: func(v dataplane.Volume) dataplane.Volume {
				v.NoReplicaReuse = true
				return v
			},
			snaps: snaps("sum"), want: []string{"PlanRebuild"}, fails: true,
			plan: &events.RebuildPlanned{Volume: "vol-a", Reason: HashSkipNoReuse, ExpectedBytes: 10 * gib, FullBytes: 10 * gib}},
		{name: "attached after the snapshots were taken: planned unhashed",
			snaps: nil, noSnap: true, want: []string{"PlanRebuild"}, fails: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := withData(volume("vol-a", "c1", "", "n1", "n2"))
			if tt.v != nil {
				v = tt.v(v)
			}
			o := schedulingOff(observed(dataplane.ProfileV112, v))
			o.now = now
			if !tt.now.IsZero() {
				o.now = tt.now
			}
			o.snapshots = map[string][]dataplane.Snapshot{"vol-a": tt.snaps}
			st := state(events.NodeFailingReplicas, map[string]nodeupgrade.Volume{"vol-a": {State: events.VolumePending}})
			if !tt.noSnap {
				st.Snapshots = &nodeupgrade.Snapshots{Name: cfg.snapshot, Volumes: []string{"vol-a"}}
			}
			if tt.hashing != nil {
				st.Rebuilds = map[string]nodeupgrade.Rebuild{"vol-a": {Hashing: tt.hashing}}
			}
			p := decideFailReplicas(o, st, hashCfg)
			var kinds []string
			for _, e := range p.rebuilds {
				switch c := e.(type) {
				case events.HashingRequested:
					kinds = append(kinds, "RequestHashing")
					assert.Equal(t, at, c.At, "the request's time: whole seconds, after the snapshot")
					assert.Equal(t, at.Add(time.Minute+9*time.Second), c.Deadline, "the floor, plus 9 GiB at 1 GiB/s")
					assert.Equal(t, 9*gib, c.Bytes)
				case events.RebuildPlanned:
					kinds = append(kinds, "PlanRebuild")
					if tt.plan != nil {
						want := *tt.plan
						if want.Reason != "" {
							assert.NotEmpty(t, c.Message)
							want.Message = c.Message
						}
						assert.Equal(t, want, c)
					}
				}
			}
			assert.Equal(t, tt.want, kinds)
			assert.Equal(t, tt.fails, slices.Contains(actions(p), "FailReplica vol-a vol-a-r-n1"), "%v", actions(p))
			if tt.reason != "" {
				require.NotNil(t, p.block)
				assert.Equal(t, tt.reason, p.block.reason, p.block.message)
			}
			if tt.reason == ReasonSnapshotHashing {
				assert.False(t, p.block.until.IsZero(), "the wait ends at the deadline")
				assert.Empty(t, actions(p), "nothing is failed while the hashing runs")
			}
		})
	}
}

// No replica fails while another volume's hashing runs: the replicas go
// together, in name order, once every rebuild is planned.
func TestReplicasFailTogetherOnceEveryRebuildIsPlanned(t *testing.T) {
	now := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	a, b := volume("vol-a", "c1", "", "n1", "n2"), volume("vol-b", "c1", "", "n1", "n2")
	o := schedulingOff(observed(dataplane.ProfileV112, a, b))
	o.now = now
	o.snapshots = map[string][]dataplane.Snapshot{
		"vol-a": {{Name: cfg.snapshot, UserCreated: true, Size: 1, Checksum: "sum"}},
		"vol-b": {{Name: cfg.snapshot, UserCreated: true, Size: 1}},
	}
	st := state(events.NodeFailingReplicas, map[string]nodeupgrade.Volume{"vol-a": {State: events.VolumePending}, "vol-b": {State: events.VolumePending}})
	st.Snapshots = &nodeupgrade.Snapshots{Name: cfg.snapshot, Volumes: []string{"vol-a", "vol-b"}}
	p := decideFailReplicas(o, st, cfg)
	assert.Empty(t, actions(p), "vol-a is planned, vol-b still hashes")
	assert.Len(t, p.rebuilds, 2, "vol-a's plan and vol-b's request")
	assert.Equal(t, ReasonSnapshotHashing, reason(p))
}

// Longhorn hashes one volume at a time on each owner node: the deadline of
// a request queued behind others on the same node allows for them.
func TestHashDeadlinesQueueByOwner(t *testing.T) {
	now := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	c := cfg
	c.hashRate, c.hashFloor = 1<<30, time.Minute
	vols := []dataplane.Volume{volume("vol-a", "c1", "", "n1", "n2"), volume("vol-b", "c1", "", "n1", "n2"), volume("vol-c", "c2", "", "n1", "n2")}
	o := schedulingOff(observed(dataplane.ProfileV112, vols...))
	o.now = now
	o.snapshots = map[string][]dataplane.Snapshot{}
	recorded := map[string]nodeupgrade.Volume{}
	for _, v := range vols {
		o.snapshots[v.Name] = []dataplane.Snapshot{{Name: cfg.snapshot, UserCreated: true, Size: 10 << 30}}
		recorded[v.Name] = nodeupgrade.Volume{State: events.VolumePending}
	}
	st := state(events.NodeFailingReplicas, recorded)
	st.Snapshots = &nodeupgrade.Snapshots{Name: cfg.snapshot, Volumes: []string{"vol-a", "vol-b", "vol-c"}}
	p := decideFailReplicas(o, st, c)
	deadlines := map[string]time.Duration{}
	for _, e := range p.rebuilds {
		h := e.(events.HashingRequested)
		deadlines[h.Volume] = h.Deadline.Sub(h.At)
	}
	assert.Equal(t, map[string]time.Duration{
		"vol-a": time.Minute + 10*time.Second,
		"vol-b": time.Minute + 20*time.Second, // behind vol-a on c1
		"vol-c": time.Minute + 10*time.Second, // c2 hashes it at once
	}, deadlines)
}
