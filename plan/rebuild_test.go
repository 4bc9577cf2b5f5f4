package plan_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/plan"
)

func TestEstimateRebuild(t *testing.T) {
	user := func(name string, size int64, sum string) dataplane.Snapshot {
		return dataplane.Snapshot{Name: name, UserCreated: true, Size: size, Checksum: sum}
	}
	system := func(name string, size int64) dataplane.Snapshot { return dataplane.Snapshot{Name: name, Size: size} }
	tests := []struct {
		name   string
		actual int64
		snaps  []dataplane.Snapshot
		hashed bool
		reuse  bool
		want   plan.RebuildCost
	}{
		{name: "no snapshot: the whole head", actual: 100, reuse: true, want: plan.RebuildCost{Expected: 100, Full: 100}},
		{name: "an unhashed snapshot: copied whole, and what hashing it reads", actual: 100, reuse: true,
			snaps: []dataplane.Snapshot{user("s1", 90, "")}, want: plan.RebuildCost{Expected: 100, Full: 100, Hash: 90}},
		{name: "the same once hashed: only the head", actual: 100, reuse: true, hashed: true,
			snaps: []dataplane.Snapshot{user("s1", 90, "")}, want: plan.RebuildCost{Expected: 10, Full: 100, Hash: 90}},
		{name: "a hashed snapshot: skipped, nothing to hash", actual: 100, reuse: true,
			snaps: []dataplane.Snapshot{user("s1", 90, "sum")}, want: plan.RebuildCost{Expected: 10, Full: 100}},
		{name: "a system snapshot below a hashed one: the purge merges it in and clears its checksum", actual: 100, reuse: true,
			snaps: []dataplane.Snapshot{user("s1", 80, "sum"), system("rebuild-1", 5), user("s2", 10, "sum")},
			want:  plan.RebuildCost{Expected: 5 + 10 + 5, Full: 100}},
		{name: "a system snapshot on top: merged into the head", actual: 100, reuse: true,
			snaps: []dataplane.Snapshot{user("s1", 90, "sum"), system("rebuild-1", 4)},
			want:  plan.RebuildCost{Expected: 4 + 6, Full: 100}},
		{name: "no reuse: a whole copy", actual: 100, reuse: false,
			snaps: []dataplane.Snapshot{user("s1", 90, "sum")}, want: plan.RebuildCost{Expected: 100, Full: 100}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := dataplane.Volume{Name: "v", ActualSize: tt.actual, NoReplicaReuse: !tt.reuse}
			assert.Equal(t, tt.want, plan.EstimateRebuild(v, tt.snaps, tt.hashed))
		})
	}
}

func TestWaitBudget(t *testing.T) {
	assert.Equal(t, 2*time.Minute+100*time.Second, plan.WaitBudget(100<<20*100, 100<<20, 2*time.Minute))
	assert.Equal(t, time.Minute, plan.WaitBudget(1<<40, 0, time.Minute), "no rate: the floor alone")
}

func TestBytes(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 512: "512 B", 1536: "1.50 KiB", 100 << 30: "100 GiB", 10*(1<<30) + (1 << 29): "10.5 GiB", 1 << 40: "1.00 TiB"} {
		assert.Equal(t, want, plan.Bytes(n), "%d", n)
	}
}
