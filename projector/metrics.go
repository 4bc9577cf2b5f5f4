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
	// faulty writer appended); they are skipped, as aggregate.FoldSkipping does.
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

// series are the label values of one manager's per-node series this
// projector set, so that the next write removes exactly those no longer
// true. Deleting all of them and setting the true ones again would leave a
// moment without them, and a scrape then would end the series (a
// Prometheus staleness marker) and restart an alert's `for`.
type series struct {
	stalled   map[stalledSeries]bool
	upgrading map[upgradingSeries]bool
}

// stalledSeries are the labels of one StalledNodes series but the manager.
type stalledSeries struct{ node, step, reason string }

// upgradingSeries are the labels of one UpgradingNode series but the
// manager.
type upgradingSeries struct{ node, state string }

// observeWrite records what a manager's status write made visible: how
// long each newly reflected event took to get there (ProjectionLag: from
// the event's time to now), the plan's nodes by state (NodesByState), the
// node in flight (UpgradingNode) and the node upgrades stalled in the fold
// (StalledNodes, by the same test as their Stalled condition).
func (p *Projector) observeWrite(v *view, st v1beta2.DataEngineUpgradeManagerStatus, steps []step, base uint64, now time.Time) {
	for _, s := range steps {
		if s.seq > base && !s.at.IsZero() {
			metrics.ProjectionLag.Observe(now.Sub(s.at).Seconds())
		}
	}
	manager := v.ref.String()
	counts := make(map[v1beta2.NodeUpgradeState]float64, len(nodeStates))
	for _, ns := range st.UpgradeNodes {
		counts[ns.State]++
	}
	for _, state := range nodeStates {
		metrics.NodesByState.WithLabelValues(manager, string(state)).Set(counts[state])
	}

	next := series{stalled: map[stalledSeries]bool{}, upgrading: map[upgradingSeries]bool{}}
	for node, n := range v.Nodes {
		if n.Exists && n.Stalled && !n.Terminal() {
			next.stalled[stalledSeries{node, string(n.StallStep), n.StallReason}] = true
		}
	}
	if node := st.UpgradingNode; node != "" {
		next.upgrading[upgradingSeries{node, string(st.UpgradeNodes[node].State)}] = true
	}
	prev := p.series[manager]
	for s := range prev.stalled {
		if !next.stalled[s] {
			metrics.StalledNodes.DeleteLabelValues(manager, s.node, s.step, s.reason)
		}
	}
	for s := range prev.upgrading {
		if !next.upgrading[s] {
			metrics.UpgradingNode.DeleteLabelValues(manager, s.node, s.state)
		}
	}
	for s := range next.stalled {
		metrics.StalledNodes.WithLabelValues(manager, s.node, s.step, s.reason).Set(1)
	}
	for s := range next.upgrading {
		metrics.UpgradingNode.WithLabelValues(manager, s.node, s.state).Set(1)
	}
	p.series[manager] = next
}

// forgetManager drops the series of a manager that is gone, or that this
// projector no longer projects.
func (p *Projector) forgetManager(ref events.ManagerRef) {
	p.forgetSeries(ref.String())
}

func (p *Projector) forgetSeries(manager string) {
	labels := prometheus.Labels{"manager": manager}
	metrics.NodesByState.DeletePartialMatch(labels)
	metrics.StalledNodes.DeletePartialMatch(labels)
	metrics.UpgradingNode.DeletePartialMatch(labels)
	delete(p.series, manager)
}

// forgetAll drops every series this projector set, when it stops: no one
// keeps them true any more (a replica that lost the lease would otherwise
// report its last view next to the new leader's, a stall long healed
// included).
func (p *Projector) forgetAll() {
	for manager := range p.series {
		p.forgetSeries(manager)
	}
}
