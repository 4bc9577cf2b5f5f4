// Package v1beta2 holds the Kubernetes API types of Switchback: the
// DataEngineUpgradeManager a user creates to ask for a live upgrade of the
// Longhorn V2 data engine, and the NodeDataEngineUpgrade objects the
// controller creates, one per node being upgraded.
//
// The group is longhorn.io because the reviewed Longhorn design used it for
// these two kinds; Longhorn releases do not ship them, so there is no clash
// with an installed Longhorn.
//
// Status is a projection of the upgrade's JetStream history: the controller
// writes it through the /status subresource only, and records in
// status.streamSequence the sequence of the last event folded into it, so a
// reader can tell how fresh a status is and a projector can skip stale writes.
//
// +kubebuilder:object:generate=true
// +groupName=longhorn.io
package v1beta2
