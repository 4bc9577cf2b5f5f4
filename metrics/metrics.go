// Package metrics defines Switchback's Prometheus series. The components
// record into them; `switchback controller` and `switchback worker` serve
// them on /metrics. They live in one package so that every series is
// documented in one place and registered once.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Registry holds every Switchback series plus the Go and process collectors.
var Registry = prometheus.NewRegistry()

// namespace prefixes the names of the series of Registry.
const namespace = "switchback"

// gaugeVec and counterVec declare a series of Registry: its name (without
// the namespace), its help and its labels.
func gaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: name, Help: help}, labels)
}

func counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: name, Help: help}, labels)
}

var (
	// NodesByState is the number of node upgrades in each state, per
	// manager, as projected from the stream. Only the leading controller
	// projects: a projector that stops (its replica lost the lease) drops
	// its managers' series here, UpgradingNode's and StalledNodes'.
	NodesByState = gaugeVec("nodes",
		"Node upgrades by state, per manager (namespace/name).",
		"manager", "state")

	// StalledNodes is 1 for each node upgrade that is stalled (a worker
	// reported events.NodeStalled and no NodeResumed, step change or end
	// followed), labelled with the step it is stalled at and the worker's
	// reason (TargetNotMoved, NodeNotReady, InitiatorsOnNode, ...). The
	// series goes away when the node resumes or ends, and when the
	// projector stops (a replica that lost the lease no longer knows).
	// Stalling is not failing (docs/design.md, R7): the upgrade waits,
	// possibly for an operator, so this is what to alert on when it waits
	// too long. A stall whose cause changes keeps its node but moves to
	// another reason's series: aggregate by (manager, node) to follow it.
	StalledNodes = gaugeVec("stalled_nodes",
		"1 while a node upgrade is stalled, by manager (namespace/name), node, step and the worker's reason.",
		"manager", "node", "step", "reason")

	// UpgradingNode is 1 for the node upgrade in flight of each manager
	// (its status.upgradingNode), labelled with the node's state: a
	// dashboard names the node being upgraded and its step. It goes away
	// when the next node starts, when the upgrade ends and when the
	// projector stops.
	UpgradingNode = gaugeVec("upgrading_node",
		"1 for the node upgrade in flight, by manager (namespace/name), node and its state.",
		"manager", "node", "state")

	// StepDuration is how long each node step took, from its command's
	// delivery to its completion event.
	StepDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: namespace, Name: "step_duration_seconds",
		Help:    "Duration of node upgrade steps, by step.",
		Buckets: prometheus.ExponentialBuckets(0.001, 4, 10), // 1ms .. ~4.4min
	}, []string{"step"})

	// WorkloadMoves counts the calls that move pods off the nodes being
	// upgraded, by outcome: evictions made (evicted), share-manager pods
	// deleted (restarted), and evictions the eviction API refused to keep
	// a PodDisruptionBudget (refused).
	WorkloadMoves = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "workload_moves_total",
		Help: "Calls moving pods off the nodes being upgraded, by outcome (evicted, restarted, refused by a disruption budget).",
	}, []string{"outcome"})

	// RebuildBytes counts the bytes the rebuilds the upgrade causes are
	// expected to copy, as each was planned before its replica was failed
	// (Longhorn reports no byte count): expected, with what the snapshots'
	// checksums let a reused replica skip, and full, a whole copy.
	RebuildBytes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "rebuild_bytes_total",
		Help: "Bytes the rebuilds the upgrade causes are expected to copy (expected) and a whole copy of the same volumes (full), as planned.",
	}, []string{"kind"})

	// ProjectionLag is the time from an event's append to the status write
	// that reflects it.
	ProjectionLag = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: namespace, Name: "projection_lag_seconds",
		Help:    "Time from an event's append to the custom resource status reflecting it.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 14), // 1ms .. ~8s
	})

	// DeadLetters counts messages moved to the dead-letter stream.
	DeadLetters = counterVec("dead_letters_total",
		"Messages moved to the dead-letter stream: commands past MaxDeliver, events that do not decode.",
		"kind")

	// Conflicts counts appends refused by the per-aggregate concurrency check.
	Conflicts = counterVec("concurrency_conflicts_total",
		"Appends refused because the aggregate moved on (the decision is retried on fresh state).",
		"aggregate")

	// DedupCollisions counts messages whose Nats-Msg-Id another message
	// already held in the stream (a bug or a forged publish): each was
	// published again under a fresh id instead of being lost.
	DedupCollisions = counterVec("dedup_collisions_total",
		"Publishes whose message id was already taken by a different message; republished under a fresh id.",
		"stream")

	// NATSCalloutDecisions counts the NATS auth callout's answers (package
	// natsauth/callout) by reason: allowed, or why a connection was refused.
	NATSCalloutDecisions = counterVec("nats_callout_decisions_total",
		"NATS auth callout answers, by reason (allowed, or why a connection was refused).",
		"reason")

	// StreamLostEvents is how many acknowledged events the event stream no
	// longer holds (eventstore.CheckHistory, run by the controller at
	// start-up). The stream denies deletes and purges, so anything above
	// zero is lost history: alert on it.
	StreamLostEvents = gaugeVec("stream_lost_events",
		"Acknowledged events missing from the event stream (sequences lost from its store), as of the last check.",
		"stream")

	// LonghornProfile is 1 for the Longhorn profile and version the data
	// plane detected (dataplane.Platform), so a dashboard shows what the
	// upgrade runs against.
	LonghornProfile = gaugeVec("longhorn_profile",
		"1 for the Longhorn profile (v1.12, in-place) and version the data plane detected.",
		"profile", "version")

	// EventsAppended counts events appended, by CloudEvents type.
	EventsAppended = counterVec("events_appended_total",
		"Events appended to the stream, by type.",
		"type")
)

func init() {
	// Series with known labels exist from the start, at zero: a dashboard
	// or alert can tell "no conflict yet" from "not reporting".
	for _, kind := range []string{"command", "event"} {
		DeadLetters.WithLabelValues(kind)
	}
	for _, agg := range []string{"manager", "node"} {
		Conflicts.WithLabelValues(agg)
	}
	for _, kind := range []string{"expected", "full"} {
		RebuildBytes.WithLabelValues(kind)
	}
	Registry.MustRegister(NodesByState, UpgradingNode, StalledNodes, StepDuration, WorkloadMoves, RebuildBytes, ProjectionLag, DeadLetters, Conflicts, DedupCollisions, NATSCalloutDecisions, EventsAppended, StreamLostEvents, LonghornProfile,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
}

// Per-process series. Leader and readiness describe the process serving
// /metrics, not the upgrades: each health server registers its own
// collector next to Registry (cmd/switchback), so that several controllers
// or workers in one process (the end-to-end tests) each report their own
// value, and a worker never reports a leadership it cannot have.

// Names of the per-process series.
const (
	// LeaderName is the series NewLeader reports.
	LeaderName = "switchback_leader"
	// ReadyName is the series NewReady reports.
	ReadyName = "switchback_ready"
)

// NewLeader returns the gauge switchback_leader of one controller: 1 while
// leading() reports that it holds the leader-election Lease (and runs the
// intake, orchestrator and projector), 0 otherwise. Summed over the
// controllers it is 1; 0 means no replica leads and no upgrade progresses.
func NewLeader(leading func() bool) prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: LeaderName,
		Help: "1 while this controller holds the leader-election Lease and runs intake, orchestrator and projector.",
	}, func() float64 { return boolValue(leading()) })
}

// NewReady returns the gauge switchback_ready of one process: 1 while
// ready() returns nil, the very check /readyz answers with, evaluated at
// each scrape. A worker is not ready while it waits for the controller or
// has lost NATS: its node cannot be upgraded then.
func NewReady(ready func() error) prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: ReadyName,
		Help: "1 while this process is ready (its /readyz answers ok).",
	}, func() float64 { return boolValue(ready() == nil) })
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
