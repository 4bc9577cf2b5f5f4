package webhook

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/switchback-dev/switchback/api/v1beta2"
	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/plan"
	"github.com/switchback-dev/switchback/precheck"
)

// DefaultAdmitTimeout bounds one admission decision (cluster read and list
// of managers). It is below the configuration's timeoutSeconds (5) so that
// the user gets the webhook's own explanation rather than the apiserver's
// "context deadline exceeded".
const DefaultAdmitTimeout = 4 * time.Second

// admissionCheck is one precheck enforced at admission, with the field of the
// request it blames ("" when the cause is elsewhere in the cluster).
type admissionCheck struct {
	name  string
	field string
	run   func(precheck.Input) precheck.Result
}

// admissionChecks are the prechecks admission enforces, in precheck's order.
// The package documentation says why DefaultImageOnAllNodesReady and
// VolumesHealthy are not among them.
var admissionChecks = []admissionCheck{
	{precheck.DataEngineSupported, "spec.dataEngine", precheck.CheckDataEngineSupported},
	{precheck.NodesKnown, "spec.nodes", precheck.CheckNodesKnown},
	// The nodes an upgrade covers are spec.nodes, or every v2 node when it is
	// empty: too few of them, or a choice leaving nodes behind on an old
	// image, is a problem of that field.
	{precheck.AtLeastTwoNodes, "spec.nodes", precheck.CheckAtLeastTwoNodes},
	{precheck.SingleActiveUpgrade, "", precheck.CheckSingleActiveUpgrade},
	// Longhorn's own upgrader is switched on by an operator: refused at
	// once, with what to turn off.
	{precheck.NoOtherUpgrader, "", precheck.CheckNoOtherUpgrader},
	{precheck.NoVersionDrift, "spec.nodes", precheck.CheckNoVersionDrift},
	// A node's scheduling setting is the operator's to change; the request
	// can also accept it.
	{precheck.ReplicaSchedulingAllowed, "spec.allowNodesWithoutReplicaScheduling", precheck.CheckReplicaSchedulingAllowed},
	// Longhorn's setting is the operator's to change: refused at once,
	// with what to set.
	{precheck.FailedReplicasReusable, "", precheck.CheckFailedReplicasReusable},
	// Room for add-first's temporary replicas is the operator's to make;
	// the request can also choose the rebuild policy.
	{precheck.TemporaryReplicasFit, "spec.replicaPolicy", precheck.CheckTemporaryReplicasFit},
}

// deferredChecks are the prechecks left to the controller at the start of
// the upgrade, because their answer changes by itself (an image finishes
// pulling, a volume finishes rebuilding).
var deferredChecks = []string{precheck.DefaultImageOnAllNodesReady, precheck.VolumesHealthy}

// AdmissionChecks returns the names of the prechecks enforced at admission,
// in the order they are evaluated.
func AdmissionChecks() []string {
	out := make([]string, len(admissionChecks))
	for i, c := range admissionChecks {
		out[i] = c.name
	}
	return out
}

// DeferredChecks returns the names of the prechecks admission leaves to the
// controller.
func DeferredChecks() []string {
	return append([]string(nil), deferredChecks...)
}

// ActiveUpgrades lists the managers that count as the one active upgrade.
type ActiveUpgrades interface {
	// ActiveUpgrades returns, as namespace/name, every DataEngineUpgradeManager
	// of the managed namespace whose state is not completed, error or
	// cancelled, except the one whose UID is except (the object being
	// admitted). Managers elsewhere are never taken in by the controller, so
	// they do not count.
	ActiveUpgrades(ctx context.Context, except types.UID) ([]string, error)
}

// AdmitterConfig is what an Admitter needs.
type AdmitterConfig struct {
	// Namespace is the namespace whose managers the controller takes in
	// (its --namespace); a manager created anywhere else is refused.
	Namespace string
	// Cluster is read (plan.Read) for each admitted manager.
	Cluster dataplane.Reader
	// Active lists the other active managers.
	Active ActiveUpgrades
	// Logger receives one line per decision; nil discards.
	Logger *slog.Logger
	// Timeout bounds one decision; zero means DefaultAdmitTimeout.
	Timeout time.Duration
}

// Admitter decides admission requests for DataEngineUpgradeManager.
type Admitter struct {
	namespace string
	cluster   dataplane.Reader
	active    ActiveUpgrades
	log       *slog.Logger
	timeout   time.Duration
}

// NewAdmitter returns an Admitter for cfg; Cluster and Active are required.
func NewAdmitter(cfg AdmitterConfig) (*Admitter, error) {
	if cfg.Namespace == "" || cfg.Cluster == nil || cfg.Active == nil {
		return nil, errors.New("webhook: new admitter: Namespace, Cluster and Active are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultAdmitTimeout
	}
	return &Admitter{namespace: cfg.Namespace, cluster: cfg.Cluster, active: cfg.Active, log: cfg.Logger, timeout: cfg.Timeout}, nil
}

// managerKind is what the webhook admits.
var managerKind = metav1.GroupVersionKind{Group: v1beta2.GroupName, Version: v1beta2.Version, Kind: "DataEngineUpgradeManager"}

// Admit answers one admission request. It never fails: a request it cannot
// evaluate is denied with the reason (fail closed, like the configuration's
// failurePolicy), and operations other than CREATE are allowed unchecked.
func (a *Admitter) Admit(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	start := time.Now()
	log := a.log.With(slog.String("uid", string(req.UID)), slog.String("namespace", req.Namespace),
		slog.String("name", req.Name), slog.String("operation", string(req.Operation)))
	if req.Kind != managerKind {
		log.Warn("admission request for a kind this webhook does not validate: check the webhook configuration's rules",
			slog.String("kind", gvkString(req.Kind)))
		return denyBadRequest(fmt.Sprintf("this webhook validates %s only, got %s: the ValidatingWebhookConfiguration's rules are wrong",
			gvkString(managerKind), gvkString(req.Kind)))
	}
	if req.Operation != admissionv1.Create {
		// Only creation starts an upgrade; the spec is immutable (CEL) and
		// the status is the controller's.
		log.Debug("admission allowed: not a CREATE")
		return allow()
	}
	if len(req.Object.Raw) == 0 {
		log.Warn("admission denied: request without object")
		return denyBadRequest("the admission request carries no object")
	}
	var m v1beta2.DataEngineUpgradeManager
	if err := json.Unmarshal(req.Object.Raw, &m); err != nil {
		log.Warn("admission denied: undecodable object", slog.Any("error", err))
		return denyBadRequest(fmt.Sprintf("cannot decode the DataEngineUpgradeManager: %v", err))
	}
	if ns := cmp.Or(req.Namespace, m.Namespace); ns != a.namespace {
		log.Info("admission denied: not the managed namespace", slog.String("managed", a.namespace))
		msg := fmt.Sprintf("Switchback manages upgrades in namespace %q only (its controller takes in no other): create it there", a.namespace)
		return deny(http.StatusForbidden, metav1.StatusReasonForbidden,
			fmt.Sprintf("DataEngineUpgradeManager %s refused: metadata.namespace: %s", objectName(req, &m), msg),
			metav1.StatusCause{Type: metav1.CauseTypeFieldValueNotSupported, Field: "metadata.namespace", Message: msg})
	}

	results, err := a.Evaluate(ctx, &m)
	if err != nil {
		log.Error("admission denied: checks could not run", slog.Any("error", err), slog.Duration("took", time.Since(start)))
		return deny(http.StatusInternalServerError, metav1.StatusReasonInternalError,
			fmt.Sprintf("DataEngineUpgradeManager %s refused: the admission checks could not run (%v); the webhook fails closed, retry once the cluster can be read",
				objectName(req, &m), err))
	}
	var failed []failure
	for i, r := range results {
		if !r.Passed {
			failed = append(failed, failure{field: admissionChecks[i].field, result: r})
		}
	}
	if len(failed) == 0 {
		log.Info("admission allowed", slog.Bool("dryRun", isDryRun(req)), slog.Duration("took", time.Since(start)))
		return allow()
	}
	names := make([]string, len(failed))
	causes := make([]metav1.StatusCause, len(failed))
	for i, f := range failed {
		names[i] = f.result.Check
		causes[i] = metav1.StatusCause{Type: metav1.CauseType(f.result.Reason), Field: f.field, Message: f.String()}
	}
	log.Info("admission denied", slog.Bool("dryRun", isDryRun(req)), slog.Any("failed", names),
		slog.Duration("took", time.Since(start)))
	// 403: the request is well formed, the upgrade rules refuse it.
	return deny(http.StatusForbidden, metav1.StatusReasonForbidden, denialMessage(objectName(req, &m), failed), causes...)
}

// Evaluate runs the admission checks for m against a fresh snapshot of the
// cluster and the other active managers, and returns their results in
// AdmissionChecks order. An error means the checks could not run.
func (a *Admitter) Evaluate(ctx context.Context, m *v1beta2.DataEngineUpgradeManager) ([]precheck.Result, error) {
	ctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	cluster, err := plan.Read(ctx, a.cluster)
	if err != nil {
		return nil, fmt.Errorf("read the cluster: %w", err)
	}
	active, err := a.active.ActiveUpgrades(ctx, m.UID)
	if err != nil {
		return nil, fmt.Errorf("list active upgrades: %w", err)
	}
	// The same input the controller builds when the upgrade starts: the
	// target is the default instance-manager image it will capture.
	in := precheck.Input{
		Cluster:        cluster,
		DataEngine:     string(m.Spec.DataEngine),
		RequestedNodes: m.Spec.Nodes,
		TargetImage:    cluster.DefaultImage,
		ActiveUpgrades: active,

		AllowNodesWithoutReplicaScheduling: m.Spec.AllowNodesWithoutReplicaScheduling,
		ReplicaPolicy:                      string(m.Spec.ReplicaPolicy),
	}
	out := make([]precheck.Result, len(admissionChecks))
	for i, c := range admissionChecks {
		out[i] = c.run(in)
	}
	return out, nil
}

// failure is a failed check and the field it blames.
type failure struct {
	field  string
	result precheck.Result
}

// String renders "spec.nodes: NodesKnown (UnknownNodes): <message>", the
// field first since that is what the user edits.
func (f failure) String() string {
	s := fmt.Sprintf("%s (%s): %s", f.result.Check, f.result.Reason, f.result.Message)
	if f.field != "" {
		s = f.field + ": " + s
	}
	return s
}

// denialMessage is one line for one failure, and a line per failure
// otherwise, since each check's message may hold several clauses.
func denialMessage(name string, failed []failure) string {
	if len(failed) == 1 {
		return fmt.Sprintf("DataEngineUpgradeManager %s refused: %s", name, failed[0])
	}
	var b strings.Builder
	fmt.Fprintf(&b, "DataEngineUpgradeManager %s refused, %d admission checks failed:", name, len(failed))
	for _, f := range failed {
		b.WriteString("\n- ")
		b.WriteString(f.String())
	}
	return b.String()
}

// objectName is namespace/name, or the generateName prefix when the name is
// not chosen yet.
func objectName(req *admissionv1.AdmissionRequest, m *v1beta2.DataEngineUpgradeManager) string {
	ns, name := req.Namespace, req.Name
	if ns == "" {
		ns = m.Namespace
	}
	if name == "" {
		name = m.Name
	}
	if name == "" && m.GenerateName != "" {
		name = m.GenerateName + "*"
	}
	return fmt.Sprintf("%q", ns+"/"+name)
}

func isDryRun(req *admissionv1.AdmissionRequest) bool {
	return req.DryRun != nil && *req.DryRun
}

func gvkString(k metav1.GroupVersionKind) string {
	gv := k.Version
	if k.Group != "" {
		gv = k.Group + "/" + k.Version
	}
	return gv + " " + k.Kind
}
