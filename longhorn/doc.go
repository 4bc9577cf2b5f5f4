// Package longhorn is the data plane over Longhorn's own custom resources
// (longhorn.io/v1beta2): a dataplane.DataPlane that node workers, prechecks
// and the planner use to read a real Longhorn cluster and act on it.
//
// Reads come from informer caches of Longhorn nodes, volumes, engines,
// replicas, instance managers and settings, plus the core Kubernetes Nodes,
// indexed by node and by volume so that VolumesOn costs what the node holds.
// Actions read the object fresh, patch only the fields they own (merge
// patches, with a resourceVersion precondition where a decision depends on
// the object as read), treat an object already gone as success on delete,
// and wait for the cache to show their write.
//
// Every Longhorn field name, every mapping of Longhorn's states onto
// dataplane's, and every difference between released Longhorn and the
// reviewed design lives in fields.go; README.md explains them.
//
// longhornsim is a simulated Longhorn manager for tests: it acts on these
// objects on a real apiserver like Longhorn would, with sim.Sim as the
// model, so both data planes share one behaviour and one I/O checker.
package longhorn
