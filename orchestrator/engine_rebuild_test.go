package orchestrator_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/aggregate/nodeupgrade"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/sim"
	"github.com/switchback-dev/switchback/test/harness/enginetest"
)

// A whole upgrade on the simulated data plane, its volumes holding data
// their workloads keep writing: with hashing, every node's rebuilds copy
// only what was written since the upgrade's snapshot (the snapshots are
// kept until the upgrade completed, so a later node's rebuild of the same
// volume still skips them); with snapshot data integrity disabled, every
// rebuild copies the whole volume. Either way every rebuild is planned,
// seen and finished in the history, and the snapshots are gone at the end.
func TestDeltaRebuilds(t *testing.T) {
	const gib, mib = int64(1) << 30, int64(1) << 20
	for _, tc := range []struct {
		name      string
		disabled  bool
		maxCopied func(full int64) int64
		reason    string
	}{
		{name: "hashed: only what was written since", maxCopied: func(full int64) int64 { return full / 20 }},
		{name: "integrity disabled: whole copies", disabled: true, maxCopied: func(full int64) int64 { return full + 64*mib }, reason: "SnapshotDataIntegrityDisabled"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := sim.New(sim.Config{Profile: inPlace, RebuildBandwidth: 100 * gib, ReplicaReplenishWait: time.Hour})
			for _, n := range []string{"n1", "n2", "n3"} {
				require.NoError(t, s.AddNode(n))
			}
			vols := map[string][]string{"vol-a": {"n1", "n2"}, "vol-b": {"n2", "n3"}, "vol-c": {"n1", "n3"}, "vol-d": {"n1", "n2", "n3"}}
			for name, on := range vols {
				require.NoError(t, s.AddVolumeSpec(sim.VolumeSpec{Name: name, ReplicasOn: on, AttachedTo: on[0],
					Allocated: gib, WriteRate: mib, IntegrityDisabled: tc.disabled}))
			}
			e := enginetest.Start(t, s, enginetest.Options{})
			m := ref("delta")
			e.Request(m)
			st := e.WaitManager(m, time.Minute, "a terminal state", terminal)
			require.Equal(t, events.ManagerCompleted, st.State, st.Message)
			assert.Zero(t, s.IOStats().Failed, "no I/O failed: %+v", s.IOStats().Failures)

			recs := s.RebuildRecords()
			require.Len(t, recs, 9, "one rebuild per replica of an attached volume on each node")
			for _, r := range recs {
				assert.LessOrEqual(t, r.Bytes, tc.maxCopied(r.Full), "%s on %s: copied %d of %d", r.Volume, r.Node, r.Bytes, r.Full)
			}
			planned, finished := 0, 0
			for _, ev := range e.History(m) {
				switch d := ev.Data.(type) {
				case events.RebuildPlanned:
					planned++
					assert.Equal(t, tc.reason == "", d.Hashed, "%+v", d)
					assert.Equal(t, tc.reason, d.Reason)
					assert.LessOrEqual(t, d.ExpectedBytes, d.FullBytes)
				case events.RebuildFinished:
					finished++
				}
			}
			assert.Equal(t, 9, planned, "every rebuild planned before its replica failed")
			assert.Equal(t, 9, finished, "and seen over")
			for _, n := range st.Plan {
				ns := e.WaitNode(m, n, 10*time.Second, "the controller removed its snapshots", func(ns nodeupgrade.State) bool {
					return ns.Snapshots != nil && ns.Snapshots.Removed
				})
				for _, v := range ns.Snapshots.Volumes {
					names, err := s.SnapshotNames(v)
					require.NoError(t, err)
					assert.NotContains(t, names, ns.Snapshots.Name)
				}
			}
		})
	}
}
