package projector

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/switchback-dev/switchback/aggregate/nodeupgrade"
	"github.com/switchback-dev/switchback/api/v1beta2"
	"github.com/switchback-dev/switchback/events"
)

// A node's rebuild summary: planned bytes summed, hashed and finished
// counted, the time from the first rebuild seen to the last over, and the
// temporary replicas it added; nothing before any was planned.
func TestRebuildStatus(t *testing.T) {
	at := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	assert.Nil(t, rebuildStatus(nil))
	assert.Nil(t, rebuildStatus(map[string]nodeupgrade.Rebuild{"a": {Hashing: &events.HashingRequested{Volume: "a"}}}), "hashing asked for, nothing planned yet")
	got := rebuildStatus(map[string]nodeupgrade.Rebuild{
		"a": {Planned: &events.RebuildPlanned{Volume: "a", Hashed: true, ExpectedBytes: 1 << 30, FullBytes: 100 << 30},
			Started:   &events.RebuildStarted{Volume: "a", At: at},
			Finished:  &events.RebuildFinished{Volume: "a", At: at.Add(40 * time.Second)},
			Temporary: &nodeupgrade.Temporary{Added: &events.TemporaryReplicaAdded{Volume: "a", Replica: "a-r-3", Node: "n3"}}},
		"b": {Planned: &events.RebuildPlanned{Volume: "b", Reason: "HashingTimedOut", ExpectedBytes: 50 << 30, FullBytes: 50 << 30},
			Started:  &events.RebuildStarted{Volume: "b", At: at.Add(10 * time.Second)},
			Finished: &events.RebuildFinished{Volume: "b", At: at.Add(90 * time.Second)}},
		"c": {Planned: &events.RebuildPlanned{Volume: "c", Hashed: true, ExpectedBytes: 1, FullBytes: 2}},
	})
	assert.Equal(t, &v1beta2.NodeRebuildStatus{Volumes: 3, Hashed: 2, Finished: 2, ExpectedBytes: 51<<30 + 1, FullBytes: 150<<30 + 2,
		Seconds: 90, TemporaryReplicas: 1}, got)
}
