// Package longhorn is the data plane over Longhorn's own custom resources
// (longhorn.io/v1beta2): a dataplane.DataPlane that node workers, prechecks
// and the planner use to read a real Longhorn cluster and act on it.
//
// At start it finds out which Longhorn it talks to from the API itself
// (detect.go: served resources, schema fields, the current-longhorn-version
// setting) and refuses one it cannot drive; the profile decides what the
// node steps may do live.
//
// Reads come from informer caches of Longhorn nodes, volumes, engines,
// engine frontends, replicas, instance managers, settings and the Events on
// engine frontends, plus the core Kubernetes Nodes, indexed by node and by
// volume so that VolumesOn costs what the node holds; the objects of
// Longhorn's own instance-manager upgrader, read only for the
// NoOtherUpgrader precheck, are listed live instead. Actions read the
// object fresh, patch only the fields they own (merge patches, with a
// resourceVersion precondition where a decision depends on the object as
// read), treat an object already gone as success on delete, and wait for
// the cache to show their write.
//
// The wire types are in types.go, every mapping of Longhorn's states onto
// dataplane's in mapping.go, every patch body in patches.go; README.md
// explains them, with the version matrix.
//
// longhornsim is a simulated Longhorn manager for tests: it acts on these
// objects on a real apiserver like Longhorn would, with sim.Sim as the
// model, so both data planes share one behaviour and one I/O checker.
package longhorn
