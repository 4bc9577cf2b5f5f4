package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/switchback-dev/switchback/natsauth/callout"
)

// The node scope of a worker's evictions. A worker of node N moving its
// workloads evicts the pods bound to N (nodeworker, with
// spec.initiatorPolicy move-workloads). RBAC grants pods/eviction on every
// pod, and the admission policy of the workers
// (deploy/rbac/worker-admission-policy.yaml) cannot tie an eviction to a
// node: the request's object is the Eviction, which names the pod only, and
// CEL reads no other object. So this webhook reads the pod and admits a
// worker's eviction only of a pod bound to the node its token names, with
// that pod's uid as the eviction's precondition: the eviction API spends a
// disruption of the pod's budget before the delete checks the uid, so an
// eviction of a name whose pod has another uid is refused too, or a worker
// could spend any workload's budget. Its configuration
// (deploy/webhook/worker-evictions.yaml) sends only the workers' evictions
// and refuses them when the webhook cannot answer (failurePolicy Fail):
// a worker that cannot evict stalls, nothing else does.

// EvictionScopePath is where the apiserver posts reviews of the workers'
// pod evictions (deploy/webhook/worker-evictions.yaml).
const EvictionScopePath = "/scope-worker-evictions"

// Names of the eviction scope's configuration and its webhook.
const (
	EvictionScopeConfigurationName = "switchback-worker-evictions"
	EvictionScopeWebhookName       = "scope-worker-evictions.switchback.longhorn.io"
)

// DefaultEvictionScopeTimeout bounds one decision (one pod read): below the
// configuration's timeoutSeconds (5).
const DefaultEvictionScopeTimeout = 4 * time.Second

// EvictionScopeConfig is what an EvictionScope needs.
type EvictionScopeConfig struct {
	// Pods reads the pod an eviction names, fresh (its uid and node).
	Pods typedcorev1.PodsGetter
	// Logger receives one line per denial; nil discards.
	Logger *slog.Logger
	// Timeout bounds one decision; zero means DefaultEvictionScopeTimeout.
	Timeout time.Duration
}

// EvictionScope decides admission requests for the workers' pod evictions.
type EvictionScope struct {
	cfg EvictionScopeConfig
	log *slog.Logger
}

// NewEvictionScope returns an EvictionScope for cfg; Pods is required.
func NewEvictionScope(cfg EvictionScopeConfig) (*EvictionScope, error) {
	if cfg.Pods == nil {
		return nil, fmt.Errorf("webhook: new eviction scope: no pod reader")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultEvictionScopeTimeout
	}
	return &EvictionScope{cfg: cfg, log: cfg.Logger}, nil
}

// evictionRequest is what the decision reads of a review.
type evictionRequest struct {
	// node is the node the worker's token names ("" when none).
	node string
	// pod is the evicted pod as namespace/name.
	pod string
	// uid is the eviction's uid precondition ("" when it has none).
	uid string
}

// evictionVerdict is the decision: allowed, or the reason it is not.
type evictionVerdict struct {
	allowed bool
	message string
}

// decideEviction admits a worker's eviction only of a pod bound to its own
// node, named with its uid. pod is the pod as read (nil: there is none, and
// the eviction API answers 404 by itself).
func decideEviction(r evictionRequest, pod *corev1.Pod) evictionVerdict {
	refused := func(format string, a ...any) evictionVerdict {
		return evictionVerdict{message: fmt.Sprintf("switchback-worker of node %q: evict pod %s refused: ", r.node, r.pod) + fmt.Sprintf(format, a...)}
	}
	switch {
	case r.node == "":
		return evictionVerdict{message: fmt.Sprintf("switchback-worker: evict pod %s refused: the token is bound to no pod on a node (no %s); a worker evicts only with its pod's projected service-account token", r.pod, callout.NodeNameExtra)}
	case r.uid == "":
		return refused("the eviction names no uid (deleteOptions.preconditions.uid); a worker evicts a pod only by its uid")
	case pod == nil:
		return evictionVerdict{allowed: true}
	case string(pod.UID) != r.uid:
		return refused("the pod of that name has uid %s, not %s; a worker evicts only the pod it read on its node", pod.UID, r.uid)
	case pod.Spec.NodeName != r.node:
		return refused("it is bound to node %q (spec.nodeName); a worker evicts only the pods of its own node", pod.Spec.NodeName)
	}
	return evictionVerdict{allowed: true}
}

// Admit decides one AdmissionRequest. What it cannot decide is refused:
// its configuration's failurePolicy is Fail too.
func (s *EvictionScope) Admit(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	if req.Resource.Group != "" || req.Resource.Resource != "pods" || req.SubResource != "eviction" || req.Operation != admissionv1.Create {
		return denyBadRequest(fmt.Sprintf("the eviction scope decides pod evictions only, not %s %s/%s", req.Operation, req.Resource.Resource, req.SubResource))
	}
	r := evictionRequest{pod: req.Namespace + "/" + req.Name}
	if v := req.UserInfo.Extra[callout.NodeNameExtra]; len(v) == 1 {
		r.node = v[0]
	}
	var ev struct {
		DeleteOptions *struct {
			Preconditions *struct {
				UID *string `json:"uid"`
			} `json:"preconditions"`
		} `json:"deleteOptions"`
	}
	if err := json.Unmarshal(req.Object.Raw, &ev); err != nil {
		return denyBadRequest(fmt.Sprintf("decode the Eviction of pod %s: %v", r.pod, err))
	}
	if d := ev.DeleteOptions; d != nil && d.Preconditions != nil && d.Preconditions.UID != nil {
		r.uid = *d.Preconditions.UID
	}
	var pod *corev1.Pod
	if r.node != "" && r.uid != "" {
		ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
		defer cancel()
		p, err := s.cfg.Pods.Pods(req.Namespace).Get(ctx, req.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			s.log.Warn("eviction scope: read the pod", "pod", r.pod, "node", r.node, "error", err)
			return deny(http.StatusInternalServerError, metav1.StatusReasonInternalError, fmt.Sprintf("read pod %s: %v", r.pod, err))
		default:
			pod = p
		}
	}
	v := decideEviction(r, pod)
	if v.allowed {
		return allow()
	}
	s.log.Info("eviction refused", "pod", r.pod, "node", r.node, "user", req.UserInfo.Username, "reason", v.message)
	return deny(http.StatusForbidden, metav1.StatusReasonForbidden, v.message)
}
