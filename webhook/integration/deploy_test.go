package integration_test

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/switchback-dev/switchback/test/harness/testenv"
	"github.com/switchback-dev/switchback/webhook"
)

func deployDir(t *testing.T, elem ...string) string {
	t.Helper()
	root, err := testenv.RepoRoot()
	require.NoError(t, err)
	return filepath.Join(append([]string{root, "deploy"}, elem...)...)
}

// TestDeployManifestsDryRun: the kustomizations are accepted by the
// apiserver as they are shipped. The webhook configuration has no caBundle
// (see deploy/webhook/kustomization.yaml): the field is optional, so the
// server-side dry run validates it anyway.
func TestDeployManifestsDryRun(t *testing.T) {
	env, ctx, _ := apiserver(t, testTimeout)

	tests := []struct {
		dir  string
		want []string
	}{
		{"rbac", []string{
			"serviceaccount/switchback-controller created (server dry run)",
			"serviceaccount/switchback-worker created (server dry run)",
			"clusterrole.rbac.authorization.k8s.io/switchback-controller created (server dry run)",
			"clusterrolebinding.rbac.authorization.k8s.io/switchback-controller created (server dry run)",
			"role.rbac.authorization.k8s.io/switchback-controller created (server dry run)",
			"rolebinding.rbac.authorization.k8s.io/switchback-controller created (server dry run)",
			"role.rbac.authorization.k8s.io/switchback-worker created (server dry run)",
			"rolebinding.rbac.authorization.k8s.io/switchback-worker created (server dry run)",
		}},
		{"webhook", []string{
			"service/switchback-webhook created (server dry run)",
			"validatingwebhookconfiguration.admissionregistration.k8s.io/switchback created (server dry run)",
			"validatingwebhookconfiguration.admissionregistration.k8s.io/switchback-guard created (server dry run)",
			"validatingwebhookconfiguration.admissionregistration.k8s.io/switchback-worker-evictions created (server dry run)",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.dir, func(t *testing.T) {
			stdout, stderr, err := env.Kubectl(ctx, nil, "apply", "--dry-run=server", "-k", deployDir(t, tt.dir))
			require.NoError(t, err, stderr)
			for _, line := range tt.want {
				assert.Contains(t, stdout, line)
			}
		})
	}

	// The cert-manager component needs cert-manager's CRDs to apply; its
	// rendering, used as its documentation says, is checked here.
	overlay := t.TempDir()
	base, err := filepath.Rel(overlay, deployDir(t, "webhook"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(overlay, "kustomization.yaml"),
		[]byte("resources:\n- "+base+"\ncomponents:\n- "+base+"/cert-manager\n"), 0o600))
	stdout, stderr, err := env.Kubectl(ctx, nil, "kustomize", overlay)
	require.NoError(t, err, stderr)
	assert.Equal(t, 3, strings.Count(stdout, "cert-manager.io/inject-ca-from: longhorn-system/switchback-webhook"), "every configuration gets the CA")
	assert.Contains(t, stdout, "secretName: "+webhook.SecretName+"\n")
	assert.Contains(t, stdout, "- switchback-webhook.longhorn-system.svc\n")
	assert.Contains(t, stdout, "kind: ValidatingWebhookConfiguration")
	assert.Contains(t, stdout, "kind: Service\n")
}

// TestWebhookServiceTargetsTheServerPort: the Service forwards to the port
// the server listens on by default.
func TestWebhookServiceTargetsTheServerPort(t *testing.T) {
	data, err := os.ReadFile(deployDir(t, "webhook", "service.yaml"))
	require.NoError(t, err)
	var svc corev1.Service
	require.NoError(t, utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096).Decode(&svc))
	assert.Equal(t, webhook.ServiceName, svc.Name)
	require.Len(t, svc.Spec.Ports, 1)
	assert.Equal(t, int32(443), svc.Spec.Ports[0].Port)
	assert.Equal(t, intstr.FromInt32(webhook.DefaultPort), svc.Spec.Ports[0].TargetPort)
}

// TestRBACIsLeastPrivilege applies deploy/rbac and asks the apiserver's RBAC
// authorizer what each service account may do: everything its component
// needs, and a sample of what it must not do.
func TestRBACIsLeastPrivilege(t *testing.T) {
	env, ctx, cs := apiserver(t, testTimeout)
	_, stderr, err := env.Kubectl(ctx, nil, "apply", "-k", deployDir(t, "rbac"))
	require.NoError(t, err, stderr)

	const (
		controller = "switchback-controller"
		worker     = "switchback-worker"
		lh         = "longhorn.io"
		anyNS      = ""
	)
	type access struct {
		sa, verb, group, resource, sub, ns, name string
		allowed                                  bool
	}
	// rule is what sa may (allowed) or may not do in group and ns: each of
	// what is "verb resource" or "verb resource/subresource".
	rule := func(allowed bool, sa, group, ns string, what ...string) []access {
		var out []access
		for _, w := range what {
			verb, res, ok := strings.Cut(w, " ")
			require.True(t, ok, "%q is not \"verb resource\"", w)
			res, sub, _ := strings.Cut(res, "/")
			out = append(out, access{sa: sa, verb: verb, group: group, resource: res, sub: sub, ns: ns, allowed: allowed})
		}
		return out
	}
	can := func(sa, group, ns string, what ...string) []access { return rule(true, sa, group, ns, what...) }
	cannot := func(sa, group, ns string, what ...string) []access { return rule(false, sa, group, ns, what...) }
	named := func(name string, as []access) []access {
		for i := range as {
			as[i].name = name
		}
		return as
	}
	tests := slices.Concat(
		// The controller: the Switchback resources in any namespace...
		can(controller, lh, anyNS, "list dataengineupgrademanagers"),
		can(controller, lh, "team-b", "watch dataengineupgrademanagers"),
		can(controller, lh, installNS, "patch dataengineupgrademanagers", "update dataengineupgrademanagers/finalizers",
			"patch dataengineupgrademanagers/status",
			"create nodedataengineupgrades", "delete nodedataengineupgrades", "update nodedataengineupgrades/status"),
		can(controller, "events.k8s.io", "default", "create events"),
		can(controller, "events.k8s.io", installNS, "patch events"),
		can(controller, "", anyNS, "watch nodes"),
		// ... Longhorn read-only in its namespace, and its lease.
		can(controller, lh, installNS, "list volumes", "watch settings", "list instancemanagers", "get settings", "watch enginefrontends"),
		can(controller, "", installNS, "list events"),
		// The record of a target away, an annotation on the Volume.
		can(controller, lh, installNS, "patch volumes"),
		cannot(controller, lh, "team-b", "patch volumes"),
		// Longhorn's own upgrader, listed live by the NoOtherUpgrader
		// precheck: list only, in Longhorn's namespace.
		can(controller, lh, installNS, "list instancemanagerupgrades", "list instancemanagerupgradecontrols"),
		can(controller, "coordination.k8s.io", installNS, "create leases"),
		named("switchback-controller", can(controller, "coordination.k8s.io", installNS, "update leases")),
		// Not for the controller: users create and delete managers; Longhorn
		// changes are the workers' (but the record above); no Secrets.
		cannot(controller, lh, installNS, "create dataengineupgrademanagers", "delete dataengineupgrademanagers"),
		cannot(controller, "", installNS, "get secrets"),
		cannot(controller, lh, installNS, "delete instancemanagers"),
		cannot(controller, lh, "team-b", "list volumes"),
		cannot(controller, "", anyNS, "patch nodes"),
		// Longhorn's own upgrader is listed, never watched nor changed.
		cannot(controller, lh, installNS, "watch instancemanagerupgrades", "patch instancemanagerupgrades",
			"delete instancemanagerupgradecontrols", "update instancemanagerupgradecontrols/status"),
		cannot(controller, lh, "team-b", "list instancemanagerupgrades"),
		named("someone-else", cannot(controller, "coordination.k8s.io", installNS, "update leases")),
		// The worker: the node steps' changes in Longhorn...
		can(worker, lh, installNS, "patch nodes", "get nodes", "patch volumes", "watch volumes", "patch replicas",
			"delete instancemanagers", "patch instancemanagers", "list instancemanagers",
			"create snapshots", "delete snapshots", "watch enginefrontends"),
		can(worker, "", installNS, "list events"),
		// ... and nothing else.
		cannot(worker, lh, installNS, "list dataengineupgrademanagers", "get nodedataengineupgrades",
			"patch dataengineupgrademanagers/status", "delete volumes", "create replicas", "delete replicas",
			"patch engines", "patch enginefrontends", "patch settings"),
		cannot(worker, lh, "team-b", "delete snapshots", "patch volumes"),
		cannot(worker, lh, installNS, "list instancemanagerupgrades", "list instancemanagerupgradecontrols"),
		cannot(worker, "", installNS, "get secrets"),
		cannot(worker, "events.k8s.io", installNS, "create events"),
	)
	for _, tt := range tests {
		name := tt.sa + " " + tt.verb + " " + tt.resource
		if tt.sub != "" {
			name += "/" + tt.sub
		}
		if tt.ns != "" {
			name += " in " + tt.ns
		}
		t.Run(name, func(t *testing.T) {
			sar, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
				Spec: authorizationv1.SubjectAccessReviewSpec{
					User:   "system:serviceaccount:" + installNS + ":" + tt.sa,
					Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + installNS, "system:authenticated"},
					ResourceAttributes: &authorizationv1.ResourceAttributes{
						Namespace: tt.ns, Verb: tt.verb, Group: tt.group, Resource: tt.resource,
						Subresource: tt.sub, Name: tt.name,
					},
				},
			}, metav1.CreateOptions{})
			require.NoError(t, err)
			assert.Equal(t, tt.allowed, sar.Status.Allowed, "reason: %q", sar.Status.Reason)
		})
	}
}
