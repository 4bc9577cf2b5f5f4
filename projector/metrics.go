package projector

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchback-dev/switchback/api/v1beta2"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/metrics"
)

// Metrics is a snapshot of the projector's counters (totals since New) and
// gauges, for tests, logs and whatever metrics exporter the caller runs.
type Metrics struct {
	// Projected counts events whose effect reached a written status.
	Projected uint64
	// SkippedStale counts events at or below the streamSequence already
	// recorded (redeliveries, restarts, a second projector): not applied
	// twice.
	SkippedStale uint64
	// Ignored counts events of managers without a DataEngineUpgradeManager
	// of the same UID (no Kubernetes, or another incarnation): acked, not
	// written.
	Ignored uint64
	// Poison counts messages that did not decode and were dead-lettered.
	Poison uint64
	// Rejected counts decoded events the fold refused (illegal transitions a
	// faulty writer appended); they are skipped, as aggregate.Fold does.
	Rejected uint64
	// WriteRetries counts failed attempts that were retried: apiserver
	// reads and writes (conflicts, outages, timeouts), dead-letter
	// publishes and reads of the stream.
	WriteRetries uint64
	// WriteFailures counts writes the apiserver refused as invalid; they are
	// not retried (the next event rewrites the whole status) and are
	// reported as a Warning Event.
	WriteFailures uint64
	// EventsRecorded counts Kubernetes Events handed to the recorder.
	EventsRecorded uint64
	// Redelivered counts messages JetStream delivered more than once.
	Redelivered uint64
	// CatchUps counts folds from the stream (a manager first seen since the
	// start, or a gap in the delivery order).
	CatchUps uint64
	// LastSequence is the stream sequence of the last message handled.
	LastSequence uint64
	// Lag is the number of messages on the stream after the last one
	// handled that the consumer had not delivered yet.
	Lag uint64
}

// counters are the live values behind Metrics.
type counters struct {
	projected, skippedStale, ignored, poison, rejected atomic.Uint64
	writeRetries, writeFailures, eventsRecorded        atomic.Uint64
	redelivered, catchUps, lastSequence, lag           atomic.Uint64
}

func (c *counters) snapshot() Metrics {
	return Metrics{
		Projected:      c.projected.Load(),
		SkippedStale:   c.skippedStale.Load(),
		Ignored:        c.ignored.Load(),
		Poison:         c.poison.Load(),
		Rejected:       c.rejected.Load(),
		WriteRetries:   c.writeRetries.Load(),
		WriteFailures:  c.writeFailures.Load(),
		EventsRecorded: c.eventsRecorded.Load(),
		Redelivered:    c.redelivered.Load(),
		CatchUps:       c.catchUps.Load(),
		LastSequence:   c.lastSequence.Load(),
		Lag:            c.lag.Load(),
	}
}

// The projector also records into Switchback's Prometheus series (package
// metrics), which the controller serves on /metrics.

// nodeStates are the node states NodesByState reports, zeros included, so
// that a node leaving a state is seen leaving it.
var nodeStates = append(append([]v1beta2.NodeUpgradeState{}, v1beta2.NodeUpgradeStates...),
	v1beta2.NodeUpgradeStateError, v1beta2.NodeUpgradeStateCancelled)

// observeWrite records what a manager's status write made visible: how
// long each newly reflected event took to get there (ProjectionLag: from
// the event's time to now) and the plan's nodes by state (NodesByState).
func observeWrite(ref events.ManagerRef, st v1beta2.DataEngineUpgradeManagerStatus, steps []step, base uint64, now time.Time) {
	for _, s := range steps {
		if s.seq > base && !s.at.IsZero() {
			metrics.ProjectionLag.Observe(now.Sub(s.at).Seconds())
		}
	}
	counts := make(map[v1beta2.NodeUpgradeState]float64, len(nodeStates))
	for _, ns := range st.UpgradeNodes {
		counts[ns.State]++
	}
	for _, state := range nodeStates {
		metrics.NodesByState.WithLabelValues(ref.String(), string(state)).Set(counts[state])
	}
}

// forgetManager drops the series of a manager that is gone.
func forgetManager(ref events.ManagerRef) {
	metrics.NodesByState.DeletePartialMatch(prometheus.Labels{"manager": ref.String()})
}
