package webhooktest

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/webhook"
)

// ServeEvictionScope serves a webhook.EvictionScope reading pods with cfg
// on loopback, registers deploy/webhook/worker-evictions.yaml at it for the
// worker service account of namespace ns alone (so that other tests'
// workers are not under it), and returns once the apiserver calls it: a
// dry-run eviction with worker, a worker's config whose token names a
// node, is refused by it. Everything is removed when the test ends.
func ServeEvictionScope(t testing.TB, cfg, worker *rest.Config, ns string, cluster dataplane.Reader) {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	must(t, err, "clientset")
	scope, err := webhook.NewEvictionScope(webhook.EvictionScopeConfig{Pods: cs.CoreV1()})
	must(t, err, "new eviction scope")
	user := "request.userInfo.username == 'system:serviceaccount:" + ns + ":switchback-worker'"
	ctx := register(t, cfg, ns, webhook.ServerConfig{EvictionScope: scope}, cluster, "worker-evictions.yaml", webhook.EvictionScopePath,
		func(w *admissionregistrationv1.ValidatingWebhook) {
			for i, c := range w.MatchConditions {
				if strings.Contains(c.Expression, "switchback-worker") {
					w.MatchConditions[i].Expression = user
				}
			}
		})
	as, err := kubernetes.NewForConfig(worker)
	must(t, err, "worker clientset")
	probe := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "switchback-registration-probe", Namespace: ns},
		DeleteOptions: &metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}}
	noUID := regexp.MustCompile(`names no uid`)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		err := as.PolicyV1().Evictions(ns).Evict(ctx, probe)
		if err != nil && noUID.MatchString(err.Error()) {
			return
		}
		select {
		case <-ctx.Done():
			must(t, fmt.Errorf("last answer to the probe: %v: %w", err, ctx.Err()), "the apiserver never called the eviction scope")
		case <-time.After(50 * time.Millisecond):
		}
	}
}
