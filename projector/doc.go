// Package projector folds Switchback's event history into what users see in
// Kubernetes: the status of each DataEngineUpgradeManager (lhum), one
// NodeDataEngineUpgrade (lhnu) per scheduled node, their conditions, and a
// Kubernetes Event for every transition.
//
// # How
//
// A Projector reads the whole SWITCHBACK_EVENTS stream through one durable
// consumer (topology.ProjectorConsumer, explicit acks) and folds each manager's history
// with manager.Evolve and nodeupgrade.Evolve, the very functions the command
// side decides with, so the status cannot disagree with the decisions. The
// fold is kept in memory per manager; whenever the delivery order cannot
// prove it complete (a start, a restart, a redelivery), it catches up from
// the stream, which is the truth. Replay runs the same fold offline.
//
// Every status records streamSequence, the stream sequence of the last event
// folded into it. Events at or below it are skipped, so redelivery, restarts
// and a replay from sequence 1 never apply an event twice nor move a status
// backwards, and writes are conditioned on the resourceVersion (a conflict
// is retried on a fresh read). Condition transition times are the events'
// own times, so a replay reproduces a status exactly. A batch of messages
// is folded together and each manager's objects written once per batch;
// messages are acked only after that write, and kept alive with InProgress
// while apiserver writes are retried through conflicts and outages.
//
// Only managers whose DataEngineUpgradeManager exists with the UID of the
// history are projected. Events of another incarnation (same name, new UID)
// or of a manager that never was in Kubernetes (the demo) are acked and
// counted (Metrics.Ignored), not written.
//
// # DataEngineUpgradeManager status
//
//   - state, instanceManagerImage, upgradingNode: from the manager aggregate.
//   - message: the manager's message; while the node in flight is stalled,
//     what blocks it (node, step, volume, reason); while a node works, its step.
//   - upgradeNodes: every node of the plan. A scheduled node shows its own
//     upgrade's state and message (the step it is at). A node not scheduled
//     yet is "pending" with its place in the plan as message; once the
//     upgrade ended without it, "cancelled" (after a cancel) or "pending"
//     with "not started: the upgrade failed" (after an error).
//   - completedNodes/totalNodes: plan nodes completed / in the plan.
//   - observedGeneration: the object's metadata.generation when written.
//
// # NodeDataEngineUpgrade
//
// Named NodeUpgradeName(manager, node) ("<manager>-<node>-<hash>"; an object
// under the former "<manager>-<node>" of the same manager is adopted), in the
// manager's namespace, labelled
// with both names, controlled by the manager (blockOwnerDeletion). Spec from
// the node's history (or the plan before its worker started). Status: state
// and message, volumes (state, message; "target on <node>" while a target is
// away), volumeCount, conditions, observedGeneration, streamSequence (the
// last event that changed it).
//
// # Conditions
//
// On the manager, one per recorded precheck (type = check, True/False, its
// reason and message), then on both kinds the kstatus-style summaries:
// Ready (True once completed: `kubectl wait --for=condition=Ready` works),
// Progressing (True while pending, initializing or upgrading, stalled or
// not), Stalled (True while the node in flight is stalled: reason
// VolumeBlocked when a volume blocks, else the worker's reason, and a
// message naming node, step, volume and cause) and Degraded (True on error,
// with the failure's reason). When not in their abnormal state, summaries
// carry the phase as reason: Pending, Initializing, Upgrading, Cancelling,
// Completed, Failed or Cancelled.
//
// # Kubernetes Events
//
// One events.k8s.io Event per stream event (every event of the catalogue
// changes something a user sees), through client-go's broadcaster, recorded
// once the manager's status includes the event. Normal for progress;
// Warning for failed prechecks, stalls, failures and volumes in error.
// Reasons are the transition (UpgradeRequested, PrecheckPassed,
// PrecheckFailed, UpgradePlanned, NodeScheduled, NodeUpgradeStarted,
// Node<Step> such as NodeSwitchingOver, VolumeRecorded, Volume<State> such
// as VolumeSwitchedOver, NodeStalled, NodeResumed, NodeUpgradeCompleted,
// NodeUpgradeFailed, NodeFinished, UpgradeCompleted, UpgradeFailed,
// CancelRequested, NodeCancelRequested, NodeUpgradeCancelled,
// UpgradeCancelled). Each is recorded on the manager, and when a node is
// concerned also on its NodeDataEngineUpgrade and on the core Node (which
// need not exist). The related object (node upgrade or Longhorn Volume)
// keeps transitions of different nodes and volumes from being folded into
// one series by client-go. Recording never blocks projection; transitions
// older than Config.EventMaxAge are not announced again on a replay.
//
// # Poison messages
//
// A message events.Decode rejects is copied to the dead-letter stream
// (topology.DeadLetterStream) under topology.DeadEventSubject(subject), with
// headers saying why (topology.HeaderDeadReason, topology.HeaderDeadKind) and from
// where (stream, sequence, subject, consumer) and Nats-Msg-Id
// "dead-evt-<seq>"; it is logged, counted (Metrics.Poison), reported as a
// Warning Event (EventDeadLettered) on its manager when the subject names
// one that exists, and acked: the projector never stops on it.
// # Metrics
//
// Projector.Metrics returns the projector's counters (projected, skipped
// stale, ignored, poison, rejected, write retries and failures, Events
// recorded, redeliveries, catch-ups, last sequence, lag). The projector also
// records Switchback's Prometheus series: metrics.ProjectionLag (event time
// to status write), metrics.NodesByState (per manager) and
// metrics.DeadLetters{kind="event"}.
package projector
