package chart_test

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/lint/support"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

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

// spreadWorkloads are the workloads whose pods the chart spreads over
// nodes with a pod anti-affinity: the controllers and the NATS servers.
var spreadWorkloads = []struct{ kind, name string }{{"Deployment", "switchback-controller"}, {"StatefulSet", "switchback-nats"}}

// antiAffinity is the pod anti-affinity of the pods of workload kind/name;
// the test fails when they have none.
func (r rendered) antiAffinity(t *testing.T, kind, name string) *corev1.PodAntiAffinity {
	t.Helper()
	pod := r.pod(t, kind, name)
	require.NotNil(t, pod.Affinity)
	require.NotNil(t, pod.Affinity.PodAntiAffinity)
	return pod.Affinity.PodAntiAffinity
}

// checkDefault: what the defaults add to the base: the workers tolerate
// every taint, the controllers and the NATS servers prefer different nodes
// and have PDBs selecting exactly their pods, the webhook's certificate
// comes from cert-manager.
func checkDefault(t *testing.T, r rendered) {
	assert.Equal(t, []corev1.Toleration{{Operator: corev1.TolerationOpExists}}, r.worker(t).Tolerations, "a worker on every node, tainted or not")
	for _, w := range spreadWorkloads {
		aa := r.antiAffinity(t, w.kind, w.name)
		terms := aa.PreferredDuringSchedulingIgnoredDuringExecution
		require.Len(t, terms, 1, w.name)
		assert.Equal(t, "kubernetes.io/hostname", terms[0].PodAffinityTerm.TopologyKey)
		assert.Equal(t, map[string]string{"app.kubernetes.io/name": w.name}, terms[0].PodAffinityTerm.LabelSelector.MatchLabels)
		assert.Empty(t, aa.RequiredDuringSchedulingIgnoredDuringExecution, "soft by default: a small cluster still schedules them")

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
		natsRule, _, err := unstructured.NestedSlice(r.object(t, "NetworkPolicy", "switchback-worker-egress").Object, "spec", "egress")
		require.NoError(t, err)
		require.NotEmpty(t, natsRule)
		assert.Equal(t, map[string]any{
			"to":    []any{map[string]any{"ipBlock": map[string]any{"cidr": "0.0.0.0/0"}}, map[string]any{"ipBlock": map[string]any{"cidr": "::/0"}}},
			"ports": []any{map[string]any{"protocol": "TCP", "port": float64(4222)}},
		}, natsRule[0], "the workers reach the external NATS (networkPolicy.externalNATSCIDRs) on its port")
	}
}

// checkNamespace: installed elsewhere (Longhorn in another namespace),
// everything follows the release's namespace, the places kustomize's
// namespace transformer cannot reach included (the webhooks' Service
// references and certificate names, the guard's namespace selector, the
// binding subjects, the Longhorn namespace flag); the admission policies
// match the worker in any namespace.
func checkNamespace(t *testing.T, r rendered) {
	assert.NotContains(t, r.manifest, namespace)
	vap := r.object(t, "ValidatingAdmissionPolicy", "switchback-worker-node-scope")
	conds, _, err := unstructured.NestedSlice(vap.Object, "spec", "matchConditions")
	require.NoError(t, err)
	require.Len(t, conds, 1)
	// The worker's ServiceAccount by name in any namespace, the release's included.
	assert.Equal(t, "request.userInfo.username.matches('^system:serviceaccount:[^:]+:switchback-worker$')", conds[0].(map[string]any)["expression"])
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
	for _, w := range spreadWorkloads {
		aa := r.antiAffinity(t, w.kind, w.name)
		terms := aa.RequiredDuringSchedulingIgnoredDuringExecution
		require.Len(t, terms, 1, w.name)
		assert.Equal(t, map[string]string{"app.kubernetes.io/name": w.name}, terms[0].LabelSelector.MatchLabels)
		assert.Empty(t, aa.PreferredDuringSchedulingIgnoredDuringExecution)
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
