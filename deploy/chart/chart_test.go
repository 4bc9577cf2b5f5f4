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
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/lint/support"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/switchback-dev/switchback/internal/manifesttest"
	"github.com/switchback-dev/switchback/testenv"
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
				require.Len(t, containers, 1)
				assert.Equal(t, want[w.value].(map[string]any)["resources"], containers[0].(map[string]any)["resources"], w.name)
			}
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

// TestChartCRDsAreDeployCRDs: the chart's crds/ are deploy/crds' generated
// files, byte for byte (`make generate` writes deploy/crds; copy them over
// after it), so that the two installs never drift.
func TestChartCRDsAreDeployCRDs(t *testing.T) {
	read := func(dir string) map[string][]byte {
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		out := map[string][]byte{}
		for _, e := range entries {
			if e.IsDir() || e.Name() == "kustomization.yaml" {
				continue
			}
			data, err := os.ReadFile(filepath.Join(dir, e.Name()))
			require.NoError(t, err)
			out[e.Name()] = data
		}
		return out
	}
	deploy, chartCRDs := read(repoPath(t, "deploy", "crds")), read(filepath.Join(chartPath(t), "crds"))
	require.Len(t, deploy, 2, "deploy/crds holds the two CRDs")
	require.Equal(t, slices.Sorted(maps.Keys(deploy)), slices.Sorted(maps.Keys(chartCRDs)), "the chart's crds/ holds the same files as deploy/crds")
	for name, data := range deploy {
		assert.True(t, bytes.Equal(data, chartCRDs[name]), "crds/%s differs from deploy/crds/%s: cp deploy/crds/longhorn.io_*.yaml deploy/chart/switchback/crds/", name, name)
	}
}

// TestLint: `helm lint` finds no error and no warning with any option of
// the render tests. (Its one INFO, that Chart.yaml names no icon, is
// logged: the project has none.)
func TestLint(t *testing.T) {
	for _, o := range options() {
		t.Run(o.name, func(t *testing.T) {
			lint := action.NewLint()
			lint.Namespace, lint.KubeVersion = o.ns(), kubeVersion(t)
			res := lint.Run([]string{chartPath(t)}, o.values())
			assert.Equal(t, 1, res.TotalChartsLinted)
			assert.Empty(t, res.Errors)
			for _, m := range res.Messages {
				if m.Severity >= support.WarningSev {
					t.Errorf("lint: %s", m)
				} else {
					t.Logf("lint: %s", m)
				}
			}
		})
	}
}

// TestRendersApplyOnTheAPIServer: the chart renders with its defaults and
// with each option, each render holds what the option says and no
// Namespace, and the apiserver accepts every object of it (server-side dry
// run with strict field validation: the CRDs, RBAC, the admission policy,
// the webhook configurations, cert-manager's objects against its schema,
// the workloads and their PDBs).
func TestRendersApplyOnTheAPIServer(t *testing.T) {
	prepareAPIServer(t)
	for _, o := range options() {
		t.Run(o.name, func(t *testing.T) {
			r := mustRender(t, o.ns(), o.values())
			checkEveryRender(t, r)
			o.check(t, r)

			if o.ns() != namespace {
				createNamespace(t, o.ns())
			}
			out := kubectl(t, []byte(r.manifest), "apply", "--dry-run=server", "-o", "name", "-f", "-")
			var want []string
			for _, u := range r.objects {
				name := strings.ToLower(u.GetKind())
				if g := u.GroupVersionKind().Group; g != "" {
					name += "." + g
				}
				want = append(want, name+"/"+u.GetName())
			}
			got := strings.Fields(out)
			slices.Sort(want)
			slices.Sort(got)
			assert.Equal(t, want, got, "every rendered object is applied")
		})
	}
}

// checkEveryRender: no Namespace (the release's belongs to Longhorn, and
// `helm uninstall` must never delete it, nor Longhorn with it, as
// deploy.TestInstallOwnsNothingOfLonghorns requires of deploy/), nothing of
// Longhorn's API group, every object named for Switchback, namespaced
// objects in the release's namespace and cluster-scoped ones in none.
func checkEveryRender(t *testing.T, r rendered) {
	t.Helper()
	require.NotEmpty(t, r.objects)
	seen := map[key]bool{}
	for _, u := range r.objects {
		k := keyOf(u)
		assert.NotEqual(t, "Namespace", u.GetKind(), "%s: a Namespace", u.GetName())
		assert.False(t, seen[k], "%s rendered twice", k)
		seen[k] = true
		assert.False(t, strings.HasPrefix(u.GetAPIVersion(), "longhorn.io/"), "%s: an object of Longhorn's API group", k)
		if u.GetKind() == "CustomResourceDefinition" {
			assert.Contains(t, []string{"dataengineupgrademanagers.longhorn.io", "nodedataengineupgrades.longhorn.io"}, u.GetName())
		} else {
			assert.True(t, strings.HasPrefix(u.GetName(), "switchback"), "%s is named for Switchback", k)
		}
		if clusterScoped[u.GetKind()] {
			assert.Empty(t, u.GetNamespace(), "%s is cluster-scoped", k)
		} else {
			assert.Equal(t, r.namespace, u.GetNamespace(), "%s is in the release's namespace", k)
		}
	}
}

// checkDefault: what the defaults add to the base: the workers tolerate
// every taint, the controllers and the NATS servers prefer different nodes
// and have PDBs selecting exactly their pods, the webhook's certificate
// comes from cert-manager.
func checkDefault(t *testing.T, r rendered) {
	assert.Equal(t, []corev1.Toleration{{Operator: corev1.TolerationOpExists}}, r.worker(t).Tolerations, "a worker on every node, tainted or not")
	for _, w := range []struct{ kind, name string }{{"Deployment", "switchback-controller"}, {"StatefulSet", "switchback-nats"}} {
		pod := r.pod(t, w.kind, w.name)
		require.NotNil(t, pod.Affinity)
		require.NotNil(t, pod.Affinity.PodAntiAffinity)
		terms := pod.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution
		require.Len(t, terms, 1, w.name)
		assert.Equal(t, "kubernetes.io/hostname", terms[0].PodAffinityTerm.TopologyKey)
		assert.Equal(t, map[string]string{"app.kubernetes.io/name": w.name}, terms[0].PodAffinityTerm.LabelSelector.MatchLabels)
		assert.Empty(t, pod.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution, "soft by default: a small cluster still schedules them")

		selector, _, err := unstructured.NestedStringMap(r.object(t, w.kind, w.name).Object, "spec", "selector", "matchLabels")
		require.NoError(t, err)
		pdb, _, err := unstructured.NestedStringMap(r.object(t, "PodDisruptionBudget", w.name).Object, "spec", "selector", "matchLabels")
		require.NoError(t, err)
		assert.Equal(t, selector, pdb, "the PDB of %s selects its pods", w.name)
	}
	pdb := r.object(t, "PodDisruptionBudget", "switchback-controller").Object["spec"].(map[string]any)
	assert.EqualValues(t, 1, pdb["minAvailable"], "one controller always serves the webhook and the callout")
	pdb = r.object(t, "PodDisruptionBudget", "switchback-nats").Object["spec"].(map[string]any)
	assert.EqualValues(t, 1, pdb["maxUnavailable"], "two NATS servers of three keep the quorum")
	for _, k := range webhookCertManagerObjects {
		r.object(t, k.Kind, k.Name)
	}
	assert.Nil(t, r.find("Secret", "switchback-webhook-tls"), "cert-manager writes the Secret")
}

// checkGeneratedWebhookCertificate: without cert-manager the chart writes
// the webhook's Secret itself: a certificate for the Service's names that
// the CA of both configurations' caBundle verifies, with its key; nothing of
// the webhook's cert-manager objects is left (NATS still uses cert-manager).
func checkGeneratedWebhookCertificate(t *testing.T, r rendered) {
	for _, k := range natsObjects {
		r.object(t, k.Kind, k.Name)
	}
	checkWebhookFile(t, r)
}

// checkWebhookFile checks the objects of templates/webhook.yaml rendered
// without cert-manager.
func checkWebhookFile(t *testing.T, r rendered) {
	t.Helper()
	for _, k := range webhookCertManagerObjects {
		assert.Nil(t, r.find(k.Kind, k.Name), "%s rendered without cert-manager", k)
	}
	secret := r.object(t, "Secret", "switchback-webhook-tls")
	caPEM := checkWebhookSecret(t, secret, r.namespace)
	for _, name := range []string{"switchback", "switchback-guard"} {
		vwc := r.object(t, "ValidatingWebhookConfiguration", name)
		assert.NotContains(t, vwc.GetAnnotations(), "cert-manager.io/inject-ca-from", name)
		hooks, _, err := unstructured.NestedSlice(vwc.Object, "webhooks")
		require.NoError(t, err)
		require.NotEmpty(t, hooks)
		for _, h := range hooks {
			bundle, _, err := unstructured.NestedString(h.(map[string]any), "clientConfig", "caBundle")
			require.NoError(t, err)
			assert.Equal(t, base64.StdEncoding.EncodeToString(caPEM), bundle, "%s: the caBundle is the generated CA", name)
		}
	}
}

// checkWebhookSecret checks a generated webhook Secret and returns its CA.
func checkWebhookSecret(t *testing.T, secret *unstructured.Unstructured, ns string) []byte {
	t.Helper()
	assert.Equal(t, string(corev1.SecretTypeTLS), secret.Object["type"])
	data := map[string][]byte{}
	raw, _, err := unstructured.NestedStringMap(secret.Object, "data")
	require.NoError(t, err)
	for k, v := range raw {
		b, err := base64.StdEncoding.DecodeString(v)
		require.NoError(t, err, k)
		data[k] = b
	}
	pair, err := tls.X509KeyPair(data["tls.crt"], data["tls.key"])
	require.NoError(t, err, "tls.key is the key of tls.crt")
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	require.NoError(t, err)
	block, _ := pem.Decode(data["ca.crt"])
	require.NotNil(t, block, "ca.crt is PEM")
	ca, err := x509.ParseCertificate(block.Bytes)
	require.NoError(t, err)
	assert.True(t, ca.IsCA)
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	for _, dns := range []string{"switchback-webhook." + ns + ".svc", "switchback-webhook." + ns + ".svc.cluster.local"} {
		_, err := leaf.Verify(x509.VerifyOptions{DNSName: dns, Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
		assert.NoError(t, err, "the apiserver dials %s", dns)
	}
	notAfter, err := strconv.ParseInt(secret.GetAnnotations()[notAfterAnnotation], 10, 64)
	require.NoError(t, err, "the Secret says when it expires")
	assert.InDelta(t, leaf.NotAfter.Unix(), notAfter, 3600, "the annotation is the certificate's expiry")
	return data["ca.crt"]
}

// checkExternalNATS: with nats.external.url nothing of the bundled NATS is
// rendered, everything else is, and the clients dial that URL (verified
// with caSecret's ca.crt when given), still with their nats-auth
// credentials.
func checkExternalNATS(url, caSecret string) func(t *testing.T, r rendered) {
	return func(t *testing.T, r rendered) {
		def := keys(mustRender(t, r.namespace, nil).objects)
		for _, k := range natsObjects {
			require.True(t, def[k], "the default render has %s", k)
			delete(def, k)
		}
		assert.Equal(t, sortedKeys(def), sortedKeys(keys(r.objects)), "every object but NATS's")
		for _, pod := range []corev1.PodSpec{r.controller(t), r.worker(t)} {
			assert.Equal(t, []string{url}, flags(t, pod, "nats-url"))
			v := volume(pod, "nats-ca")
			if caSecret == "" {
				assert.Empty(t, flags(t, pod, "nats-ca"))
				assert.Nil(t, v)
			} else {
				assert.Equal(t, []string{"/etc/switchback/nats-ca/ca.crt"}, flags(t, pod, "nats-ca"))
				require.NotNil(t, v)
				require.NotNil(t, v.Secret)
				assert.Equal(t, caSecret, v.Secret.SecretName)
			}
			for _, v := range pod.Volumes {
				if v.Secret != nil {
					assert.NotEqual(t, "switchback-nats-server-tls", v.Secret.SecretName, "no Secret of the bundled NATS")
				}
			}
		}
		assert.Equal(t, []string{"/etc/switchback/nats/controller.nk"}, flags(t, r.controller(t), "nats-nkey"))
		assert.Equal(t, []string{"/etc/switchback/nats-callout"}, flags(t, r.controller(t), "nats-callout"))
		assert.Equal(t, []string{"/var/run/secrets/switchback/nats/token"}, flags(t, r.worker(t), "nats-token-file"))
		values, _, err := unstructured.NestedSlice(r.object(t, "NetworkPolicy", "switchback-default-deny").Object, "spec", "podSelector", "matchExpressions")
		require.NoError(t, err)
		require.Len(t, values, 1)
		assert.Equal(t, []any{"switchback-controller", "switchback-worker"}, values[0].(map[string]any)["values"])
	}
}

// checkNamespace: installed elsewhere (Longhorn in another namespace),
// everything follows the release's namespace, the places kustomize's
// namespace transformer cannot reach included (the admission policy's CEL,
// the webhooks' Service references and certificate names, the guard's
// namespace selector, the binding subjects, the Longhorn namespace flag).
func checkNamespace(t *testing.T, r rendered) {
	assert.NotContains(t, r.manifest, namespace)
	vap := r.object(t, "ValidatingAdmissionPolicy", "switchback-worker-node-scope")
	conds, _, err := unstructured.NestedSlice(vap.Object, "spec", "matchConditions")
	require.NoError(t, err)
	require.Len(t, conds, 1)
	assert.Equal(t, "request.userInfo.username == 'system:serviceaccount:"+r.namespace+":switchback-worker'", conds[0].(map[string]any)["expression"])
	for _, pod := range []corev1.PodSpec{r.controller(t), r.worker(t)} {
		assert.Equal(t, []string{r.namespace}, flags(t, pod, "longhorn-namespace"))
	}
	dns, _, err := unstructured.NestedStringSlice(r.object(t, "Certificate", "switchback-webhook").Object, "spec", "dnsNames")
	require.NoError(t, err)
	assert.Contains(t, dns, "switchback-webhook."+r.namespace+".svc")
}

// checkHardAndPinned: the hard anti-affinity, a pinned switchback image,
// pull Secrets on every pod, the NATS StorageClass and the NetworkPolicy
// values reach the objects.
func checkHardAndPinned(t *testing.T, r rendered) {
	for _, w := range []struct{ kind, name string }{{"Deployment", "switchback-controller"}, {"StatefulSet", "switchback-nats"}} {
		pod := r.pod(t, w.kind, w.name)
		require.NotNil(t, pod.Affinity)
		require.NotNil(t, pod.Affinity.PodAntiAffinity)
		terms := pod.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution
		require.Len(t, terms, 1, w.name)
		assert.Equal(t, map[string]string{"app.kubernetes.io/name": w.name}, terms[0].LabelSelector.MatchLabels)
		assert.Empty(t, pod.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution)
	}
	image := "registry.example/switchback:v9@sha256:" + strings.Repeat("ab", 32)
	for _, pod := range []corev1.PodSpec{r.controller(t), r.worker(t), r.pod(t, "StatefulSet", "switchback-nats")} {
		assert.Equal(t, []corev1.LocalObjectReference{{Name: "registry-example"}}, pod.ImagePullSecrets)
	}
	assert.Equal(t, image, r.controller(t).Containers[0].Image)
	assert.Equal(t, image, r.worker(t).Containers[0].Image)
	claims, _, err := unstructured.NestedSlice(r.object(t, "StatefulSet", "switchback-nats").Object, "spec", "volumeClaimTemplates")
	require.NoError(t, err)
	require.Len(t, claims, 1)
	assert.Equal(t, "local-path", claims[0].(map[string]any)["spec"].(map[string]any)["storageClassName"])
	from, _, err := unstructured.NestedSlice(r.object(t, "NetworkPolicy", "switchback-webhook-from-apiserver").Object, "spec", "ingress")
	require.NoError(t, err)
	require.Len(t, from, 1)
	assert.Equal(t, decodeValue(t, "[{ipBlock: {cidr: 10.0.0.10/32}}, {ipBlock: {cidr: 10.0.0.11/32}}]"), from[0].(map[string]any)["from"])
	metrics := r.object(t, "NetworkPolicy", "switchback-metrics")
	ns, _, err := unstructured.NestedSlice(metrics.Object, "spec", "ingress")
	require.NoError(t, err)
	assert.Equal(t, decodeValue(t, "[{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: observability}}}]"), ns[0].(map[string]any)["from"])
}

// TestDefaultRenderIsTheKustomizeBase: `helm install` with the defaults
// installs what `kubectl apply -k deploy/` does. The same (kind, name) set,
// plus exactly what the chart adds: the webhook's cert-manager objects
// (the base leaves the webhook certificate to a component of the user's;
// the chart, which needs cert-manager for NATS anyway, issues it by
// default) and the two PDBs. Then object by object, against deploy/ with
// that component: equal but for the chart's labels and its stated
// defaults (the published image, --longhorn-namespace, --log-level, pod
// anti-affinity, the workers' tolerations), so that RBAC, the admission
// policy, the webhooks, NATS and the NetworkPolicies cannot drift from the
// base.
func TestDefaultRenderIsTheKustomizeBase(t *testing.T) {
	ch := loadChart(t)
	r := mustRender(t, namespace, nil)
	// An install is deploy/crds, then deploy/ (which leaves the CRDs out so
	// that an uninstall keeps them); the chart installs both.
	crds := kustomize(t, repoPath(t, "deploy", "crds"))
	base := append(kustomize(t, repoPath(t, "deploy")), crds...)
	withCM := append(kustomize(t, withWebhookCertManager(t)), crds...)
	version, err := os.ReadFile(repoPath(t, "VERSION"))
	require.NoError(t, err)
	assert.Equal(t, strings.TrimSpace(string(version)), ch.Metadata.AppVersion, "the chart's appVersion is the release in VERSION")

	// The sets.
	baseKeys, chartKeys := keys(base), keys(r.objects)
	for _, k := range slices.Concat(webhookCertManagerObjects, pdbs) {
		assert.False(t, baseKeys[k], "the base renders %s: drop it from the chart's additions", k)
		baseKeys[k] = true
	}
	assert.Equal(t, sortedKeys(baseKeys), sortedKeys(chartKeys), "the chart renders the base's objects and its additions")
	added := keys(withCM)
	for k := range keys(base) {
		delete(added, k)
	}
	assert.Equal(t, sortedKeys(keySet(webhookCertManagerObjects)), sortedKeys(added), "the webhook's cert-manager objects are deploy/webhook/cert-manager's")

	// The objects.
	image := "ghcr.io/switchback-dev/switchback:" + ch.Metadata.AppVersion
	expect := map[key]func(obj map[string]any){
		{"Deployment", "switchback-controller"}: func(obj map[string]any) {
			setContainer(t, obj, image, "switchback-controller")
			setPodField(t, obj, "affinity", softAntiAffinity(t, "switchback-controller"))
		},
		{"DaemonSet", "switchback-worker"}: func(obj map[string]any) {
			setContainer(t, obj, image, "switchback-worker")
			setPodField(t, obj, "tolerations", decodeValue(t, "[{operator: Exists}]"))
		},
		{"StatefulSet", "switchback-nats"}: func(obj map[string]any) {
			setPodField(t, obj, "affinity", softAntiAffinity(t, "switchback-nats"))
		},
	}
	for _, want := range withCM {
		k := keyOf(want)
		got := r.find(k.Kind, k.Name)
		if !assert.NotNil(t, got, "the chart renders %s", k) {
			continue
		}
		w := installed(want)
		if f := expect[k]; f != nil {
			f(w)
		}
		assert.Equal(t, toYAML(t, w), toYAML(t, installed(got)), "%s: the chart's differs from deploy/'s", k)
	}
}

func keySet(ks []key) map[key]bool {
	out := map[key]bool{}
	for _, k := range ks {
		out[k] = true
	}
	return out
}

// installed is an object as it installs: without the labels Helm adds,
// without the namespace kustomize sets on cluster-scoped kinds it does not
// know (the admission policy and its binding), which the apiserver ignores,
// and with the whitespace of multi-line strings collapsed. kustomize's YAML
// writer re-folds the folded CEL expressions of deploy/ and adds an empty
// line before each more-indented line (a newline more in the value); CEL
// and nats.conf do not tell whitespace apart.
func installed(u *unstructured.Unstructured) map[string]any {
	c := &unstructured.Unstructured{Object: collapseWhitespace(u.Object).(map[string]any)}
	labels := c.GetLabels()
	for _, l := range helmLabels {
		delete(labels, l)
	}
	if len(labels) == 0 {
		unstructured.RemoveNestedField(c.Object, "metadata", "labels")
	} else {
		c.SetLabels(labels)
	}
	if clusterScoped[c.GetKind()] {
		c.SetNamespace("")
	}
	return c.Object
}

func collapseWhitespace(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = collapseWhitespace(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = collapseWhitespace(e)
		}
		return out
	case string:
		if strings.Contains(v, "\n") {
			return strings.Join(strings.Fields(v), " ")
		}
		return v
	default:
		return v
	}
}

func toYAML(t *testing.T, obj map[string]any) string {
	t.Helper()
	b, err := yaml.Marshal(obj)
	require.NoError(t, err)
	return string(b)
}

// setContainer applies the chart's defaults to a base workload's container:
// the published image, and --longhorn-namespace (after --data-plane) and
// --log-level (after --log-format) in its args.
func setContainer(t *testing.T, obj map[string]any, image, name string) {
	t.Helper()
	containers, _, err := unstructured.NestedSlice(obj, "spec", "template", "spec", "containers")
	require.NoError(t, err)
	require.Len(t, containers, 1, name)
	c := containers[0].(map[string]any)
	c["image"] = image
	var args []any
	for _, a := range c["args"].([]any) {
		args = append(args, a)
		switch a {
		case "--data-plane=longhorn":
			args = append(args, "--longhorn-namespace="+namespace)
		case "--log-format=json":
			args = append(args, "--log-level=info")
		}
	}
	require.Len(t, args, len(c["args"].([]any))+2, "%s: the base's args have --data-plane and --log-format", name)
	c["args"] = args
	require.NoError(t, unstructured.SetNestedSlice(obj, containers, "spec", "template", "spec", "containers"))
}

func setPodField(t *testing.T, obj map[string]any, field string, value any) {
	t.Helper()
	require.NoError(t, unstructured.SetNestedField(obj, value, "spec", "template", "spec", field))
}

// softAntiAffinity is the chart's default pod anti-affinity for the pods of a name.
func softAntiAffinity(t *testing.T, name string) any {
	return decodeValue(t, `
podAntiAffinity:
  preferredDuringSchedulingIgnoredDuringExecution:
  - weight: 100
    podAffinityTerm:
      topologyKey: kubernetes.io/hostname
      labelSelector:
        matchLabels: {app.kubernetes.io/name: `+name+`}
`)
}

// TestInvalidValuesAreRefused: values.schema.json refuses what would render
// a broken or open install, and the template refuses an empty apiserver
// list even without the schema (an empty `from` would admit every source
// to the webhook port).
func TestInvalidValuesAreRefused(t *testing.T) {
	for _, tc := range []struct {
		name       string
		values     map[string]any
		skipSchema bool
		want       string
	}{
		{"log level", map[string]any{"logLevel": "verbose"}, false, "logLevel"},
		{"data plane", map[string]any{"dataPlane": "v2"}, false, "dataPlane"},
		{"misspelt value", map[string]any{"controler": map[string]any{}}, false, "controler"},
		{"anti-affinity", map[string]any{"nats": map[string]any{"podAntiAffinity": "always"}}, false, "podAntiAffinity"},
		{"external URL", map[string]any{"nats": map[string]any{"external": map[string]any{"url": "nats.example:4222"}}}, false, "url"},
		{"no apiserver address", map[string]any{"networkPolicy": map[string]any{"apiserverCIDRs": []any{}}}, false, "apiserverCIDRs"},
		{"no apiserver address, no schema", map[string]any{"networkPolicy": map[string]any{"apiserverCIDRs": []any{}}}, true, "name at least one address of the apiserver"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := renderChart(t, namespace, tc.values, tc.skipSchema)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// TestGeneratedWebhookCertificateIsKeptUntilItExpires: without cert-manager,
// `helm upgrade` looks up the webhook Secret and keeps its CA and
// certificate (a new CA in the caBundle before the controllers reload the
// new certificate would fail manager creates meanwhile), until 30 days
// before they expire, when it generates new ones; a Secret the chart did
// not generate (no expiry annotation, e.g. left by cert-manager) is
// replaced. Rendered by Helm's engine with lookup against the test
// apiserver, as `helm upgrade` renders.
func TestGeneratedWebhookCertificateIsKeptUntilItExpires(t *testing.T) {
	prepareAPIServer(t)
	const ns = "webhook-certificate"
	createNamespace(t, ns)
	ch := loadChart(t)
	caps := chartutil.DefaultCapabilities.Copy()
	caps.KubeVersion = *kubeVersion(t)
	render := func() rendered {
		t.Helper()
		vals, err := chartutil.ToRenderValues(ch, map[string]any{"webhook": map[string]any{"certManager": map[string]any{"enabled": false}}},
			chartutil.ReleaseOptions{Name: releaseName, Namespace: ns, Revision: 2, IsUpgrade: true}, caps)
		require.NoError(t, err)
		out, err := engine.New(testenv.Get(t).Config).Render(ch, vals)
		require.NoError(t, err)
		r := rendered{namespace: ns, manifest: out["switchback/templates/webhook.yaml"]}
		r.objects = decodeObjects(t, r.manifest)
		checkWebhookFile(t, r)
		return r
	}
	data := func(r rendered) map[string]string {
		t.Helper()
		d, _, err := unstructured.NestedStringMap(r.object(t, "Secret", "switchback-webhook-tls").Object, "data")
		require.NoError(t, err)
		return d
	}
	apply := func(r rendered) {
		t.Helper()
		kubectl(t, []byte(toYAML(t, r.object(t, "Secret", "switchback-webhook-tls").Object)), "apply", "-f", "-")
	}
	annotate := func(value string) {
		t.Helper()
		kubectl(t, nil, "-n", ns, "annotate", "--overwrite", "secret", "switchback-webhook-tls", notAfterAnnotation+value)
	}

	first := render()
	apply(first)
	assert.Equal(t, data(first), data(render()), "an upgrade keeps the generated certificate")

	annotate("=" + strconv.FormatInt(time.Now().Add(24*time.Hour).Unix(), 10))
	renewed := render()
	assert.NotEqual(t, data(first)["ca.crt"], data(renewed)["ca.crt"], "a certificate in its last 30 days is generated again")
	assert.NotEqual(t, data(first)["tls.key"], data(renewed)["tls.key"])
	apply(renewed)
	assert.Equal(t, data(renewed), data(render()), "the new one is kept in turn")

	annotate("-")
	assert.NotEqual(t, data(renewed)["ca.crt"], data(render())["ca.crt"], "a Secret without the chart's expiry is replaced")
}

// The install's shared test helpers (package manifesttest).
var (
	repoPath         = manifesttest.RepoPath
	kubectl          = manifesttest.Kubectl
	kustomize        = manifesttest.Kustomize
	decodeObjects    = manifesttest.Decode
	prepareAPIServer = manifesttest.PrepareAPIServer
)
