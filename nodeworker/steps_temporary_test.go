package nodeworker

import (
	"cmp"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/aggregate/nodeupgrade"
	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/events"
)

// The temporary replica gate of failing-replicas under add-first: a
// volume that would keep fewer healthy replicas off the node than it asks
// for gets one first, and none of its replicas fails until it serves on a
// node of its own.
func TestPrepareRedundancy(t *testing.T) {
	const gib = int64(1) << 30
	now := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	c := cfg
	c.copyRate, c.hashFloor = gib, time.Minute
	requested := &events.TemporaryReplicaRequested{Volume: "vol-a", NumberOfReplicas: 2, ReplicaAutoBalance: "ignored", DataLocality: "disabled",
		Replicas: []string{"vol-a-r-n1", "vol-a-r-n2"}, At: now, Deadline: now.Add(time.Minute + 10*time.Second)}
	raised := &events.ReplicaCountRaised{Volume: "vol-a", NumberOfReplicas: 2, ReplicaAutoBalance: "ignored", DataLocality: "disabled", Raised: 3}
	elsewhere := *raised
	elsewhere.FirstNode = "n0"
	added := &events.TemporaryReplicaAdded{Volume: "vol-a", Replica: "vol-a-r-n3", Node: "n3"}
	withTemp := func(state dataplane.ReplicaState, node string) func(dataplane.Volume) dataplane.Volume {
		return func(v dataplane.Volume) dataplane.Volume {
			v.NumberOfReplicas = 3
			r := replica("vol-a", "n3", state)
			r.Node = node
			v.Replicas = append(v.Replicas, r)
			return v
		}
	}
	tests := []struct {
		name       string
		policy     string
		v          func(dataplane.Volume) dataplane.Volume
		scheduling bool
		temp       *nodeupgrade.Temporary
		// want: the temporary replica's events recorded, by type.
		want   []string
		reason string
		fails  bool
	}{
		{name: "rebuild: failed at once", policy: events.ReplicaPolicyRebuild, fails: true},
		{name: "add-first: asked for, nothing failed, until its copy's deadline", want: []string{"TemporaryReplicaRequested"}, reason: ReasonTemporaryReplica},
		{name: "add-first, scheduling still on: not asked for yet", scheduling: true, reason: ReasonTemporaryReplica},
		{name: "add-first, a replica to spare already: failed at once",
			v: func(v dataplane.Volume) dataplane.Volume {
				v.NumberOfReplicas = 2
				v.Replicas = append(v.Replicas, replica("vol-a", "n3", dataplane.ReplicaRunning))
				return v
			}, fails: true},
		{name: "asked for, not raised yet: waiting for the controller", temp: &nodeupgrade.Temporary{Requested: requested}, reason: ReasonTemporaryReplica},
		{name: "raised, the replica not there yet: waiting", temp: &nodeupgrade.Temporary{Requested: requested, Raised: raised}, reason: ReasonTemporaryReplica},
		{name: "raised, the replica rebuilding: recorded, waiting", v: withTemp(dataplane.ReplicaRebuilding, "n3"),
			temp: &nodeupgrade.Temporary{Requested: requested, Raised: raised}, want: []string{"TemporaryReplicaAdded"}, reason: ReasonTemporaryReplica},
		{name: "recorded and serving: failed", v: withTemp(dataplane.ReplicaRunning, "n3"),
			temp: &nodeupgrade.Temporary{Requested: requested, Raised: raised, Added: added}, fails: true},
		{name: "serving on a node holding another replica: held, with what to do", v: withTemp(dataplane.ReplicaRunning, "n2"),
			temp: &nodeupgrade.Temporary{Requested: requested, Raised: raised}, want: []string{"TemporaryReplicaAdded"}, reason: ReasonTemporaryReplicaSharesNode},
		{name: "raised for an earlier node, its replica serving: failed, nothing recorded", v: withTemp(dataplane.ReplicaRunning, "n3"),
			temp: &nodeupgrade.Temporary{Requested: requested, Raised: &elsewhere}, fails: true},
		{name: "strict-local: nothing to add", v: func(v dataplane.Volume) dataplane.Volume {
			v.StrictLocal = true
			return v
		}, fails: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := volume("vol-a", "c1", "", "n1", "n2")
			v.ActualSize, v.ReplicaAutoBalance, v.DataLocality = 10*gib, "ignored", "disabled"
			if tt.v != nil {
				v = tt.v(v)
			}
			o := observed(dataplane.ProfileV112, v)
			if !tt.scheduling {
				o = schedulingOff(o)
			}
			o.now = now
			// The upgrade's snapshot is hashed already: the hashing gate
			// passes at once once the replica may go.
			o.snapshots = map[string][]dataplane.Snapshot{"vol-a": {{Name: c.snapshot, UserCreated: true, Size: 1, Checksum: "sum"}}}
			st := state(events.NodeFailingReplicas, map[string]nodeupgrade.Volume{"vol-a": {State: events.VolumePending}})
			st.ReplicaPolicy = cmp.Or(tt.policy, events.ReplicaPolicyAddFirst)
			st.Snapshots = &nodeupgrade.Snapshots{Name: c.snapshot, Volumes: []string{"vol-a"}}
			if tt.temp != nil {
				st.Rebuilds = map[string]nodeupgrade.Rebuild{"vol-a": {Temporary: tt.temp}}
			}
			p := decideFailReplicas(o, st, c)
			var kinds []string
			for _, e := range p.rebuilds {
				switch d := e.(type) {
				case events.TemporaryReplicaRequested:
					kinds = append(kinds, "TemporaryReplicaRequested")
					assert.Equal(t, *requested, d, "the spec as read, the replicas then, a deadline for 10 GiB at 1 GiB/s after the floor")
				case events.TemporaryReplicaAdded:
					kinds = append(kinds, "TemporaryReplicaAdded")
					assert.Equal(t, "vol-a-r-n3", d.Replica)
				}
			}
			assert.Equal(t, tt.want, kinds)
			assert.Equal(t, tt.fails, slices.Contains(actions(p), "FailReplica vol-a vol-a-r-n1"), "%v", actions(p))
			if tt.reason != "" {
				require.NotNil(t, p.block)
				assert.Equal(t, tt.reason, p.block.reason, p.block.message)
				assert.Contains(t, p.block.message, "vol-a")
			}
		})
	}
}
