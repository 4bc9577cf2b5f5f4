// Package webhook is the validating admission webhook of Switchback: an HTTPS
// server answering admission.k8s.io/v1 AdmissionReview requests for the
// CREATE of a DataEngineUpgradeManager, so that a request the controller
// would refuse anyway is refused at `kubectl apply`, with the reason, instead
// of being accepted and then failing in status.
//
// # What is checked, and why only that
//
// The webhook runs the precheck functions themselves (package precheck), on a
// snapshot of the cluster read through a dataplane.Reader (plan.Read) and on
// the list of other active managers, so that admission and the controller can
// never disagree on what a rule means. First, a manager outside the
// namespace Switchback manages (the controller's --namespace) is refused: the
// controller would never take it in, and it would sit there without a state.
// Then it enforces the checks whose answer depends on the request and on
// facts that only an operator's action changes:
//
//   - DataEngineSupported (spec.dataEngine must be v2; the CRD's enum refuses
//     other values first, this covers a CRD served without it);
//   - NodesKnown (every name in spec.nodes exists and runs the v2 engine; the
//     message names the unknown ones);
//   - AtLeastTwoNodes (a target needs another node to move to);
//   - SingleActiveUpgrade (no other manager of the managed namespace that is
//     not completed, error or cancelled; one created elsewhere while the
//     webhook was off is never taken in, so it does not count);
//   - NoOtherUpgrader (Longhorn's own instance-manager upgrader is off and
//     idle; the message says which setting or object to wait for or turn
//     off);
//   - NoVersionDrift (no node left behind on an older instance-manager image
//     by an earlier subset upgrade).
//
// DefaultImageOnAllNodesReady and VolumesHealthy are deliberately left to the
// controller: an image is being pulled and a volume is rebuilding all the
// time, so refusing a manager for a state that heals by itself minutes later
// would make users retry by hand what the controller checks at the right
// moment anyway (when the upgrade starts, with conditions and events saying
// what holds it back). Immutability of the spec is not checked here either:
// CEL rules in the CRD enforce it on every update, with or without the
// webhook. Operations other than CREATE are allowed without checks.
//
// # Fail closed, and why the controller checks again
//
// The shipped ValidatingWebhookConfiguration (deploy/webhook) uses
// failurePolicy: Fail: while the webhook is down no manager can be created,
// which is the safe way to fail for a request that starts replacing instance
// managers. Failing closed is also what the server does itself: a cluster it
// cannot read, or a list of managers it cannot get, denies the request with
// the error. The webhook is still only a first line: it can be bypassed (an
// administrator deleting the configuration, two creates racing through it
// before either is stored), so the controller runs the same prechecks again,
// from the event stream, when the upgrade starts; this webhook only makes
// refusals early and visible.
//
// # The guard, which fails open
//
// The same server answers, on GuardPath, the reviews of Longhorn's
// VolumeAttachments and Volumes that deploy/webhook/guard.yaml sends (Guard):
// while a node's v2 data engine is upgraded, a new attachment ticket for it
// and a change of a v2 volume's spec.engineNodeID to it are refused, naming
// the upgrade (guard.go says why those two writes). Unlike the manager's
// webhook it fails open, in its configuration (failurePolicy: Ignore) and in
// the server (what it cannot decide is allowed): attachments are on the path
// of every pod start, and the node steps re-check live state before an
// instance manager may go.
//
// # The eviction scope, which fails closed
//
// On EvictionScopePath it answers the reviews of the workers' pod evictions
// that deploy/webhook/worker-evictions.yaml sends (EvictionScope): a worker
// evicts only a pod bound to the node its token names, by that pod's uid
// (evictions.go says why the workers' admission policy cannot). It fails
// closed (failurePolicy: Fail, and what it cannot decide is refused): only
// a worker's eviction waits on it, and that node's move then waits too.
//
// # Certificates
//
// The serving certificate is read from files (a mounted kubernetes.io/tls
// Secret) and re-read when they change, so a rotated certificate is served
// without a restart (CertReloader). Certificates come from cert-manager or
// the install (deploy/webhook); tests make theirs with test/harness/testpki.
package webhook
