// Package chart_test tests the Helm chart deploy/chart/switchback through
// Helm's Go SDK, reading it as `helm lint` and `helm install` do: the chart
// lints clean; it renders with its defaults and with each option; every
// render applies (server-side dry run, strict field validation) on the real
// kube-apiserver that testenv starts, next to cert-manager's CRDs and
// Longhorn's namespace as deploy/'s tests install them; the default render
// installs what the kustomize base deploy/ installs, object by object; no
// render holds a Namespace. It holds tests only.
package chart_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/switchback-dev/switchback/test/harness/manifesttest"
	"github.com/switchback-dev/switchback/test/harness/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

const (
	// namespace is Longhorn's, which the README installs the chart into.
	namespace   = "longhorn-system"
	releaseName = "switchback"
	// The annotation on a generated webhook Secret saying when it expires
	// (templates/webhook.yaml).
	notAfterAnnotation = "switchback.dev/generated-not-after"
)

// key names an object as `kubectl apply -k` and `helm install` create it.
type key struct{ Kind, Name string }

func (k key) String() string { return k.Kind + " " + k.Name }

// The objects of the bundled NATS cluster (deploy/nats and its two
// NetworkPolicies), which nats.external.url leaves out, and its PDB.
var natsObjects = []key{
	{"ConfigMap", "switchback-nats"},
	{"Issuer", "switchback-nats-selfsigned"},
	{"Certificate", "switchback-nats-ca"},
	{"Issuer", "switchback-nats-ca"},
	{"Certificate", "switchback-nats-server"},
	{"Certificate", "switchback-nats-route"},
	{"Service", "switchback-nats"},
	{"Service", "switchback-nats-headless"},
	{"StatefulSet", "switchback-nats"},
	{"PodDisruptionBudget", "switchback-nats"},
	{"NetworkPolicy", "switchback-nats-clients"},
	{"NetworkPolicy", "switchback-nats-routes"},
}

// webhookCertManagerObjects are deploy/webhook/cert-manager's, which the
// chart renders with webhook.certManager.enabled (its default) and the base
// leaves to a kustomization of the user's.
var webhookCertManagerObjects = []key{
	{"Issuer", "switchback-selfsigned"},
	{"Certificate", "switchback-webhook-ca"},
	{"Issuer", "switchback-webhook-ca"},
	{"Certificate", "switchback-webhook"},
}

// pdbs are the chart's PodDisruptionBudgets, which the base does not have.
var pdbs = []key{
	{"PodDisruptionBudget", "switchback-controller"},
	{"PodDisruptionBudget", "switchback-nats"},
}

// clusterScoped are the kinds of the render that take no namespace.
var clusterScoped = map[string]bool{
	"CustomResourceDefinition":         true,
	"ClusterRole":                      true,
	"ClusterRoleBinding":               true,
	"ValidatingAdmissionPolicy":        true,
	"ValidatingAdmissionPolicyBinding": true,
	"ValidatingWebhookConfiguration":   true,
}

// helmLabels are the labels the chart adds to every object it templates
// (templates/_helpers.tpl), besides the base's.
var helmLabels = []string{"helm.sh/chart", "app.kubernetes.io/managed-by", "app.kubernetes.io/instance"}

func chartPath(t *testing.T) string { return repoPath(t, "deploy", "chart", "switchback") }

func loadChart(t *testing.T) *chart.Chart {
	t.Helper()
	ch, err := loader.Load(chartPath(t))
	require.NoError(t, err)
	return ch
}

// kubeVersion is the test apiserver's: the chart requires 1.30 or newer,
// and Helm's client-only default (1.20) would refuse it.
func kubeVersion(t *testing.T) *chartutil.KubeVersion {
	t.Helper()
	kv, err := chartutil.ParseKubeVersion("v" + testenv.K8sVersion)
	require.NoError(t, err)
	return kv
}

// rendered is a release's manifest (CRDs included) and its objects.
type rendered struct {
	namespace string
	manifest  string
	objects   []*unstructured.Unstructured
}

// renderChart renders the chart as `helm install --dry-run` without a
// cluster does (`helm template --include-crds`), with vals over the
// chart's values.
func renderChart(t *testing.T, ns string, vals map[string]any, skipSchema bool) (rendered, error) {
	t.Helper()
	install := action.NewInstall(&action.Configuration{Log: t.Logf})
	install.DryRun, install.ClientOnly, install.IncludeCRDs = true, true, true
	install.ReleaseName, install.Namespace = releaseName, ns
	install.KubeVersion = kubeVersion(t)
	install.SkipSchemaValidation = skipSchema
	rel, err := install.Run(loadChart(t), vals)
	if err != nil {
		return rendered{}, err
	}
	return rendered{namespace: ns, manifest: rel.Manifest, objects: decodeObjects(t, rel.Manifest)}, nil
}

func mustRender(t *testing.T, ns string, vals map[string]any) rendered {
	t.Helper()
	r, err := renderChart(t, ns, vals, false)
	require.NoError(t, err)
	return r
}

// decodeValue decodes one YAML value the same way, for expectations.
func decodeValue(t *testing.T, text string) any {
	t.Helper()
	var v any
	require.NoError(t, yaml.Unmarshal([]byte(text), &v))
	return v
}

func keyOf(u *unstructured.Unstructured) key { return key{u.GetKind(), u.GetName()} }

func keys(objs []*unstructured.Unstructured) map[key]bool {
	out := map[key]bool{}
	for _, u := range objs {
		out[keyOf(u)] = true
	}
	return out
}

func sortedKeys(m map[key]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k.String())
	}
	slices.Sort(out)
	return out
}

// find returns the object of a kind and name, nil without one.
func (r rendered) find(kind, name string) *unstructured.Unstructured {
	for _, u := range r.objects {
		if u.GetKind() == kind && u.GetName() == name {
			return u
		}
	}
	return nil
}

func (r rendered) object(t *testing.T, kind, name string) *unstructured.Unstructured {
	t.Helper()
	u := r.find(kind, name)
	require.NotNil(t, u, "the render has no %s %s", kind, name)
	return u
}

// pod is the pod spec of a rendered workload.
func (r rendered) pod(t *testing.T, kind, name string) corev1.PodSpec {
	t.Helper()
	spec, found, err := unstructured.NestedMap(r.object(t, kind, name).Object, "spec", "template", "spec")
	require.NoError(t, err)
	require.True(t, found, "%s %s has a pod template", kind, name)
	var out corev1.PodSpec
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(spec, &out))
	return out
}

func (r rendered) controller(t *testing.T) corev1.PodSpec {
	return r.pod(t, "Deployment", "switchback-controller")
}
func (r rendered) worker(t *testing.T) corev1.PodSpec {
	return r.pod(t, "DaemonSet", "switchback-worker")
}

// flags are the values of --name=value in the pod's only container's args.
func flags(t *testing.T, pod corev1.PodSpec, name string) []string {
	t.Helper()
	require.Len(t, pod.Containers, 1)
	var out []string
	for _, a := range pod.Containers[0].Args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			out = append(out, v)
		}
	}
	return out
}

func volume(pod corev1.PodSpec, name string) *corev1.Volume {
	for i := range pod.Volumes {
		if pod.Volumes[i].Name == name {
			return &pod.Volumes[i]
		}
	}
	return nil
}

// withWebhookCertManager writes the kustomization deploy/webhook/kustomization.yaml
// tells users to write for cert-manager's webhook certificate: deploy/ with
// the component deploy/webhook/cert-manager.
func withWebhookCertManager(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	base, err := filepath.Rel(dir, repoPath(t, "deploy"))
	require.NoError(t, err)
	text := fmt.Sprintf("resources: [%s]\ncomponents:\n- %s\n", base, filepath.Join(base, "webhook", "cert-manager"))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(text), 0o600))
	return dir
}

// createNamespace creates a namespace for real, as Longhorn's installer
// would when Longhorn runs elsewhere than longhorn-system.
func createNamespace(t *testing.T, name string) {
	t.Helper()
	kubectl(t, []byte("apiVersion: v1\nkind: Namespace\nmetadata: {name: "+name+"}\n"), "apply", "-f", "-")
}

// option is one way of installing the chart: the values over the defaults
// (built afresh per call, since Helm merges into them), the release's
// namespace, and what the render must then hold.
type option struct {
	name      string
	namespace string
	values    func() map[string]any
	check     func(t *testing.T, r rendered)
}

func options() []option {
	custom := func() map[string]any {
		return map[string]any{
			"controller": map[string]any{"resources": map[string]any{"requests": map[string]any{"cpu": "200m", "memory": "128Mi"}, "limits": map[string]any{"cpu": "1", "memory": "1Gi"}}},
			"worker":     map[string]any{"resources": map[string]any{"requests": map[string]any{"cpu": "20m", "memory": "48Mi"}, "limits": map[string]any{"memory": "384Mi"}}},
			"nats":       map[string]any{"resources": map[string]any{"requests": map[string]any{"cpu": "500m", "memory": "1Gi"}, "limits": map[string]any{"memory": "4Gi"}}},
		}
	}
	tolerations := []any{
		map[string]any{"key": "node-role.kubernetes.io/storage", "operator": "Exists", "effect": "NoSchedule"},
		map[string]any{"key": "longhorn.io/v2", "operator": "Equal", "value": "only", "effect": "NoExecute"},
	}
	return []option{
		{name: "default", values: func() map[string]any { return nil }, check: checkDefault},
		{name: "webhook certificate generated", values: func() map[string]any {
			return map[string]any{"webhook": map[string]any{"certManager": map[string]any{"enabled": false}}}
		}, check: checkGeneratedWebhookCertificate},
		{name: "external NATS with a CA", values: func() map[string]any {
			return map[string]any{"nats": map[string]any{"external": map[string]any{"url": "tls://nats.nats-system.svc:4222", "caSecret": "nats-ca"}}}
		}, check: checkExternalNATS("tls://nats.nats-system.svc:4222", "nats-ca")},
		{name: "external NATS without a CA", values: func() map[string]any {
			return map[string]any{"nats": map[string]any{"external": map[string]any{"url": "nats://a.example:4222,nats://b.example:4222"}, "streamReplicas": 1}}
		}, check: checkExternalNATS("nats://a.example:4222,nats://b.example:4222", "")},
		{name: "custom tolerations", values: func() map[string]any {
			return map[string]any{"worker": map[string]any{"tolerations": tolerations}}
		}, check: func(t *testing.T, r rendered) {
			var want []corev1.Toleration
			for _, m := range tolerations {
				var tol corev1.Toleration
				require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(m.(map[string]any), &tol))
				want = append(want, tol)
			}
			assert.Equal(t, want, r.worker(t).Tolerations)
		}},
		{name: "no tolerations", values: func() map[string]any {
			return map[string]any{"worker": map[string]any{"tolerations": []any{}}}
		}, check: func(t *testing.T, r rendered) {
			assert.Empty(t, r.worker(t).Tolerations)
		}},
		{name: "custom resources", values: custom, check: func(t *testing.T, r rendered) {
			want := custom()
			for _, w := range []struct{ kind, name, value string }{
				{"Deployment", "switchback-controller", "controller"},
				{"DaemonSet", "switchback-worker", "worker"},
				{"StatefulSet", "switchback-nats", "nats"},
			} {
				containers, _, err := unstructured.NestedSlice(r.object(t, w.kind, w.name).Object, "spec", "template", "spec", "containers")
				require.NoError(t, err)
				require.NotEmpty(t, containers)
				assert.Equal(t, want[w.value].(map[string]any)["resources"], containers[0].(map[string]any)["resources"], w.name)
			}
		}},
		{name: "one shared NATS account", values: func() map[string]any {
			return map[string]any{"nats": map[string]any{"nodeAccounts": false}}
		}, check: func(t *testing.T, r rendered) {
			assert.Empty(t, flags(t, r.worker(t), "nats-api-prefix"), "JetStream's own prefix, in the streams' account")
		}},
		{name: "log level", values: func() map[string]any { return map[string]any{"logLevel": "debug"} }, check: func(t *testing.T, r rendered) {
			assert.Equal(t, []string{"debug"}, flags(t, r.controller(t), "log-level"))
			assert.Equal(t, []string{"debug"}, flags(t, r.worker(t), "log-level"))
		}},
		{name: "another namespace", namespace: "longhorn", values: func() map[string]any { return nil }, check: checkNamespace},
		{name: "hard anti-affinity and pinned images", values: func() map[string]any {
			return map[string]any{
				"image":            map[string]any{"repository": "registry.example/switchback", "tag": "v9", "digest": "sha256:" + strings.Repeat("ab", 32)},
				"imagePullSecrets": []any{"registry-example"},
				"controller":       map[string]any{"podAntiAffinity": "hard"},
				"nats":             map[string]any{"podAntiAffinity": "hard", "storage": map[string]any{"className": "local-path"}},
				"networkPolicy":    map[string]any{"apiserverCIDRs": []any{"10.0.0.10/32", "10.0.0.11/32"}, "monitoringNamespace": "observability"},
			}
		}, check: checkHardAndPinned},
	}
}

func (o option) ns() string {
	if o.namespace == "" {
		return namespace
	}
	return o.namespace
}

// The install's shared test helpers (package manifesttest).
var (
	repoPath         = manifesttest.RepoPath
	kubectl          = manifesttest.Kubectl
	kustomize        = manifesttest.Kustomize
	decodeObjects    = manifesttest.Decode
	prepareAPIServer = manifesttest.PrepareAPIServer
)
