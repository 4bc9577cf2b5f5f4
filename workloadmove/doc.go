// Package workloadmove decides how to empty a node of the initiators of
// attached v2 volumes by moving the workloads that hold them, the way a
// careful operator would, and what keeps a node from being emptied.
//
// On a Longhorn whose initiators run in the instance manager of the node a
// volume is attached to (v1.12), that instance manager cannot be replaced
// while it serves an attached volume: the initiator follows the volume's
// attachment, and the attachment follows the workload. Moving the workload
// moves the initiator. Only what holds an initiator on the node is
// touched: the pods bound there that use a v2 volume attached there
// (evicted, so PodDisruptionBudgets hold), and the share-manager pods of RWX
// v2 volumes attached there (deleted: Longhorn recreates them, and the
// volume follows the pod). Anything that cannot move without a person, or
// would come straight back, pins the node, and then nothing is moved at
// all: a node that cannot be emptied is not disturbed for nothing.
//
// Everything here is a pure function of a dataplane.Workloads snapshot,
// gathered by the caller: no I/O, no clock. docs/design.md ("Moving the
// workloads off a node") gives the Longhorn and Kubernetes rules each
// decision follows.
package workloadmove
