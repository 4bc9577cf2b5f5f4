package plan

import (
	"fmt"
	"time"

	"github.com/switchback-dev/switchback/dataplane"
)

// RebuildCost is what rebuilding one replica of a volume copies, by
// longhorn-spdk-engine v1.12.1's rules (sim/RULES.md, "The bytes a rebuild
// copies"), from what the volume reports now.
type RebuildCost struct {
	// Expected is what the rebuild of a reused replica copies: every
	// snapshot without a checksum on both sides whole, the head, and what
	// the purge before it merges (a system snapshot into its child, which
	// loses its checksum). It counts nothing written after now.
	Expected int64
	// Full is a whole copy: the volume's actual size, what a new replica
	// elsewhere copies, and a reused one without fast rebuild.
	Full int64
	// Hash is what hashing the volume's unhashed user snapshots reads, on
	// every replica: the price of the skip.
	Hash int64
}

// EstimateRebuild is the RebuildCost of v with its snapshots snaps (oldest
// first), hashed as they are or, with hashed, once every user snapshot has
// a checksum. A volume whose failed replica Longhorn does not reuse
// (NoReplicaReuse) copies everything.
func EstimateRebuild(v dataplane.Volume, snaps []dataplane.Snapshot, hashed bool) RebuildCost {
	c := RebuildCost{Full: v.ActualSize}
	var inSnaps int64
	merged := int64(0) // system snapshots' bytes purged into the next one
	for _, s := range snaps {
		inSnaps += s.Size
		if s.UserCreated && s.Checksum == "" {
			c.Hash += s.Size
		}
		if !s.UserCreated {
			merged += s.Size
			continue
		}
		skip := merged == 0 && (s.Checksum != "" || hashed)
		if !skip {
			c.Expected += s.Size + merged
		}
		merged = 0
	}
	// The head, and system snapshots above the last user snapshot, which
	// the purge merges into the head.
	c.Expected += max(v.ActualSize-inSnaps, 0) + merged
	if v.NoReplicaReuse || c.Expected > c.Full {
		c.Expected = c.Full
	}
	return c
}

// WaitBudget is how long waiting for Longhorn to read or copy bytes at
// rate bytes per second may take, at least floor: the hashing of
// snapshots (Longhorn reports no progress of it, only its completion),
// or the copy of a temporary replica.
func WaitBudget(bytes, rate int64, floor time.Duration) time.Duration {
	if rate <= 0 {
		return floor
	}
	return floor + time.Duration(float64(bytes)/float64(rate)*float64(time.Second))
}

// Bytes writes n in binary units, to three significant figures: "512 B",
// "1.5 GiB", "100 GiB".
func Bytes(n int64) string {
	const unit = 1024
	if n < unit && n > -unit {
		return fmt.Sprintf("%d B", n)
	}
	f, i := float64(n), 0
	for ; (f >= unit || f <= -unit) && i < len(byteUnits)-1; i++ {
		f /= unit
	}
	switch {
	case f >= 100 || f <= -100:
		return fmt.Sprintf("%.0f %s", f, byteUnits[i])
	case f >= 10 || f <= -10:
		return fmt.Sprintf("%.1f %s", f, byteUnits[i])
	}
	return fmt.Sprintf("%.2f %s", f, byteUnits[i])
}

var byteUnits = []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
