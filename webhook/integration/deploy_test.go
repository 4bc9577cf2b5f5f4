package integration_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"

	"github.com/switchback-dev/switchback/testenv"
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
	env := testenv.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	cs, err := kubernetes.NewForConfig(env.Config)
	require.NoError(t, err)
	ensureNamespaces(ctx, t, cs, installNS)

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
	assert.Equal(t, 2, strings.Count(stdout, "cert-manager.io/inject-ca-from: longhorn-system/switchback-webhook"), "both configurations get the CA")
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
	env := testenv.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	cs, err := kubernetes.NewForConfig(env.Config)
	require.NoError(t, err)
	ensureNamespaces(ctx, t, cs, installNS)
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
	can := func(sa, verb, group, resource, ns string) access {
		return access{sa: sa, verb: verb, group: group, resource: resource, ns: ns, allowed: true}
	}
	cannot := func(sa, verb, group, resource, ns string) access {
		return access{sa: sa, verb: verb, group: group, resource: resource, ns: ns}
	}
	sub := func(a access, sub string) access { a.sub = sub; return a }
	named := func(a access, name string) access { a.name = name; return a }
	tests := []access{
		// The controller: the Switchback resources in any namespace...
		can(controller, "list", lh, "dataengineupgrademanagers", anyNS),
		can(controller, "watch", lh, "dataengineupgrademanagers", "team-b"),
		can(controller, "patch", lh, "dataengineupgrademanagers", installNS),
		sub(can(controller, "update", lh, "dataengineupgrademanagers", installNS), "finalizers"),
		sub(can(controller, "patch", lh, "dataengineupgrademanagers", installNS), "status"),
		can(controller, "create", lh, "nodedataengineupgrades", installNS),
		can(controller, "delete", lh, "nodedataengineupgrades", installNS),
		sub(can(controller, "update", lh, "nodedataengineupgrades", installNS), "status"),
		can(controller, "create", "events.k8s.io", "events", "default"),
		can(controller, "patch", "events.k8s.io", "events", installNS),
		can(controller, "watch", "", "nodes", anyNS),
		// ... Longhorn read-only in its namespace, and its lease.
		can(controller, "list", lh, "volumes", installNS),
		can(controller, "watch", lh, "settings", installNS),
		can(controller, "list", lh, "instancemanagers", installNS),
		can(controller, "get", lh, "settings", installNS),
		can(controller, "watch", lh, "enginefrontends", installNS),
		can(controller, "list", "", "events", installNS),
		// Longhorn's own upgrader, listed live by the NoOtherUpgrader
		// precheck: list only, in Longhorn's namespace.
		can(controller, "list", lh, "instancemanagerupgrades", installNS),
		can(controller, "list", lh, "instancemanagerupgradecontrols", installNS),
		can(controller, "create", "coordination.k8s.io", "leases", installNS),
		named(can(controller, "update", "coordination.k8s.io", "leases", installNS), "switchback-controller"),
		// Not for the controller: users create and delete managers; Longhorn
		// changes are the workers'; no Secrets.
		cannot(controller, "create", lh, "dataengineupgrademanagers", installNS),
		cannot(controller, "delete", lh, "dataengineupgrademanagers", installNS),
		cannot(controller, "get", "", "secrets", installNS),
		cannot(controller, "patch", lh, "volumes", installNS),
		cannot(controller, "delete", lh, "instancemanagers", installNS),
		cannot(controller, "list", lh, "volumes", "team-b"),
		cannot(controller, "patch", "", "nodes", anyNS),
		// Longhorn's own upgrader is listed, never watched nor changed.
		cannot(controller, "watch", lh, "instancemanagerupgrades", installNS),
		cannot(controller, "patch", lh, "instancemanagerupgrades", installNS),
		cannot(controller, "delete", lh, "instancemanagerupgradecontrols", installNS),
		sub(cannot(controller, "update", lh, "instancemanagerupgradecontrols", installNS), "status"),
		cannot(controller, "list", lh, "instancemanagerupgrades", "team-b"),
		named(cannot(controller, "update", "coordination.k8s.io", "leases", installNS), "someone-else"),
		// The worker: the node steps' changes in Longhorn...
		can(worker, "patch", lh, "nodes", installNS),
		can(worker, "get", lh, "nodes", installNS),
		can(worker, "patch", lh, "volumes", installNS),
		can(worker, "watch", lh, "volumes", installNS),
		can(worker, "patch", lh, "replicas", installNS),
		can(worker, "delete", lh, "instancemanagers", installNS),
		can(worker, "patch", lh, "instancemanagers", installNS),
		can(worker, "list", lh, "instancemanagers", installNS),
		can(worker, "create", lh, "snapshots", installNS),
		can(worker, "delete", lh, "snapshots", installNS),
		can(worker, "watch", lh, "enginefrontends", installNS),
		can(worker, "list", "", "events", installNS),
		// ... and nothing else.
		cannot(worker, "list", lh, "dataengineupgrademanagers", installNS),
		cannot(worker, "get", lh, "nodedataengineupgrades", installNS),
		sub(cannot(worker, "patch", lh, "dataengineupgrademanagers", installNS), "status"),
		cannot(worker, "delete", lh, "volumes", installNS),
		cannot(worker, "create", lh, "replicas", installNS),
		cannot(worker, "delete", lh, "replicas", installNS),
		cannot(worker, "patch", lh, "engines", installNS),
		cannot(worker, "patch", lh, "enginefrontends", installNS),
		cannot(worker, "patch", lh, "settings", installNS),
		cannot(worker, "delete", lh, "snapshots", "team-b"),
		cannot(worker, "patch", lh, "volumes", "team-b"),
		cannot(worker, "list", lh, "instancemanagerupgrades", installNS),
		cannot(worker, "list", lh, "instancemanagerupgradecontrols", installNS),
		cannot(worker, "get", "", "secrets", installNS),
		cannot(worker, "create", "events.k8s.io", "events", installNS),
	}
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
