package chart_test

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

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
	// The published image at the chart's appVersion, pinned by the digest
	// the base pins (hack/image --pin writes both).
	digest, _ := ch.Values["image"].(map[string]any)["digest"].(string)
	require.NotEmpty(t, digest, "the chart pins the image by digest")
	image := "ghcr.io/switchback-dev/switchback:" + ch.Metadata.AppVersion + "@" + digest
	expect := map[key]func(obj map[string]any){
		{"Deployment", "switchback-controller"}: func(obj map[string]any) {
			setContainer(t, obj, image, "switchback-controller")
			affinity := softAntiAffinity(t, "switchback-controller").(map[string]any)
			nodeAffinity, ok, err := unstructured.NestedFieldNoCopy(obj, "spec", "template", "spec", "affinity", "nodeAffinity")
			require.NoError(t, err)
			require.True(t, ok, "the base places the controllers (nodeAffinity)")
			affinity["nodeAffinity"] = nodeAffinity
			setPodField(t, obj, "affinity", affinity)
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
