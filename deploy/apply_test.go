package deploy

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/switchback-dev/switchback/natsauth"
	"github.com/switchback-dev/switchback/natsauth/callout"
	"github.com/switchback-dev/switchback/test/harness/manifesttest"
)

// TestManifestsApplyOnTheRealAPIServer: deploy/, and deploy/ with the
// insecure opt-out, are accepted by the apiserver (server-side dry run,
// strict field validation, cert-manager's objects against its schema).
func TestManifestsApplyOnTheRealAPIServer(t *testing.T) {
	prepareAPIServer(t)
	tests := []struct {
		name   string
		dir    string
		want   []string
		absent []string
	}{
		{"default", repoPath(t, "deploy"), []string{
			"deployment.apps/switchback-controller created",
			"daemonset.apps/switchback-worker created",
			"statefulset.apps/switchback-nats created",
			"configmap/switchback-nats created",
			"validatingwebhookconfiguration.admissionregistration.k8s.io/switchback created",
			"issuer.cert-manager.io/switchback-nats-ca created",
			"certificate.cert-manager.io/switchback-nats-ca created",
			"certificate.cert-manager.io/switchback-nats-server created",
			"certificate.cert-manager.io/switchback-nats-route created",
			"networkpolicy.networking.k8s.io/switchback-default-deny created",
			"networkpolicy.networking.k8s.io/switchback-nats-clients created",
			"networkpolicy.networking.k8s.io/switchback-nats-routes created",
			"networkpolicy.networking.k8s.io/switchback-webhook-from-apiserver created",
			"networkpolicy.networking.k8s.io/switchback-metrics created",
		}, nil},
		{insecureNATS, overlay(t, []string{insecureNATS}, ""), []string{
			"statefulset.apps/switchback-nats created",
			"networkpolicy.networking.k8s.io/switchback-default-deny created",
		}, []string{"cert-manager.io"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := kubectl(t, nil, "apply", "--dry-run=server", "-k", tc.dir)
			for _, line := range tc.want {
				assert.Contains(t, out, line+" (server dry run)")
			}
			for _, s := range tc.absent {
				assert.NotContains(t, out, s)
			}
		})
	}
}

// TestGeneratedCredentialsFitTheManifests: what `switchback nats-auth
// --callout` generates is what deploy/ mounts: the Secrets apply, the
// servers mount switchback-nats-server-auth, the controller's key and the
// callout's keys resolve to keys of generated Secrets, and each worker's
// only NATS credential is its pod's projected ServiceAccount token for the
// callout's audience.
func TestGeneratedCredentialsFitTheManifests(t *testing.T) {
	prepareAPIServer(t)
	keys, err := callout.GenerateKeys()
	require.NoError(t, err)
	side, err := keys.Server(0)
	require.NoError(t, err)
	// As `nats-auth --callout` writes it by default: node accounts, none
	// yet (the controller renders them from the Nodes).
	auth, err := natsauth.Generate(natsauth.Config{Callout: side, Account: natsauth.DefaultAccount, NodeAccounts: true})
	require.NoError(t, err)
	calloutData, err := keys.SecretData()
	require.NoError(t, err)
	secrets := append(auth.Secrets(namespace, natsauth.SharedSecret), &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: callout.SecretName, Namespace: namespace}, Data: calloutData})
	generated := map[string]*corev1.Secret{}
	var docs []string
	for _, s := range secrets {
		generated[s.Name] = s
		b, err := yaml.Marshal(s)
		require.NoError(t, err)
		docs = append(docs, string(b))
	}
	assert.Contains(t, generated, natsauth.ReaderSecretName, "the reader's credential, for the switchback.io/nats-reader pods")
	assert.NotContains(t, generated, natsauth.WorkersSecretName, "no worker Secret: the callout gives workers their users")
	require.Contains(t, generated, serverAuthSecret)
	assert.Equal(t, auth.ServerConfig(), string(generated[serverAuthSecret].Data[serverAuthKey]))
	kubectl(t, []byte(strings.Join(docs, "---\n")), "apply", "--dry-run=server", "-f", "-")

	m := render(t, repoPath(t, "deploy"))
	var projected bool
	for _, s := range m.workload(t, natsName).volume(t, natsConfigVolume).Projected.Sources {
		if s.Secret != nil && s.Secret.Name == serverAuthSecret {
			projected = true
			require.Len(t, s.Secret.Items, 1)
			assert.Equal(t, serverAuthKey, s.Secret.Items[0].Key)
		}
	}
	assert.True(t, projected, "the NATS servers mount %s", serverAuthSecret)

	resolve := func(w workload, path string) {
		t.Helper()
		v, rel := w.mountedFile(t, path)
		name, key := secretFile(t, v, rel)
		require.Contains(t, generated, name, "%s mounts %s", w.name, path)
		assert.Contains(t, generated[name].Data, key, "%s: Secret %s", path, name)
	}
	controller := m.workload(t, controllerName)
	resolve(controller, controller.flag(t, "nats-nkey"))
	for _, f := range []string{callout.IssuerKey, callout.XKeyKey, callout.ServiceKey} {
		resolve(controller, controller.flag(t, "nats-callout")+"/"+f)
	}
	worker := m.workload(t, workerName)
	for _, f := range []string{"nats-nkey", "nats-creds", "nats-user", "nats-password-file"} {
		assert.NotContains(t, strings.Join(worker.container(t).Args, " "), "--"+f+"=", "a worker holds no NATS secret")
	}
	v, rel := worker.mountedFile(t, worker.flag(t, "nats-token-file"))
	require.NotNil(t, v.Projected, "the token file is a projected volume")
	var token *corev1.ServiceAccountTokenProjection
	for _, s := range v.Projected.Sources {
		if s.ServiceAccountToken != nil && s.ServiceAccountToken.Path == rel {
			token = s.ServiceAccountToken
		}
	}
	require.NotNil(t, token, "the worker's --nats-token-file is its projected ServiceAccount token")
	assert.Equal(t, callout.DefaultAudience, token.Audience)
	assert.Equal(t, callout.DefaultServiceAccount, worker.pod.Spec.ServiceAccountName)
}

// prepareAPIServer installs what `kubectl apply -k deploy/` needs besides
// deploy/crds (manifesttest.PrepareAPIServer).
var prepareAPIServer = manifesttest.PrepareAPIServer
