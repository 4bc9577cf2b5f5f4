// Package plan computes, before anything happens, what an upgrade will do:
// which nodes it covers and in which order, which v2 volumes each node
// concerns, which replicas will be failed, and where each attached volume's
// target will live while the node's instance manager is replaced.
//
// Everything here except Read is a pure function of a Cluster snapshot: no
// I/O, no clock, no goroutines. The same snapshot always gives the same plan,
// whatever the order of the slices in it, so that `switchback plan` (the dry
// run), the orchestrator and a replay all agree on the order, and a plan can be
// shown to the user before a single node is touched.
//
// Only v2 volumes are ever concerned: v1 engines and replicas do not live in a
// v2 instance manager, so replacing that process neither stops them nor needs
// them to move.
package plan
