package chart_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/switchback-dev/switchback/test/harness/testenv"
)

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
