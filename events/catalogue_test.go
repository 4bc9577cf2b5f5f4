package events_test

import (
	"time"

	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/events/eventstest"
)

var (
	testMgr  = events.ManagerRef{Namespace: "longhorn-system", Name: "upgrade.v2-1", UID: "0c6f6c1e-8a8e-4c38-9d3a-5e7f1a2b3c4d"}
	testTime = time.Date(2026, 11, 29, 18, 30, 0, 123456789, time.UTC)
)

func samples() map[events.Type]events.Envelope {
	return eventstest.SamplesByType(testMgr, "worker-1.example.com", testTime)
}
