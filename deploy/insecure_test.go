package deploy

import (
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestInsecureNATSOptOut: deploy/insecure-nats gives a plain-text,
// unauthenticated NATS (a client without TLS or credentials connects), and
// nothing else: its restated nats.conf and args are the secure ones minus
// TLS and credentials, and nothing of cert-manager or the NATS Secrets is
// left.
func TestInsecureNATSOptOut(t *testing.T) {
	secure, insecure := render(t, repoPath(t, "deploy")), render(t, overlay(t, []string{insecureNATS}, ""))

	for _, u := range insecure {
		assert.NotEqual(t, "cert-manager.io", strings.Split(u.GetAPIVersion(), "/")[0], "%s %s left", u.GetKind(), u.GetName())
	}
	for _, w := range insecure.workloads(t) {
		for _, v := range w.pod.Spec.Volumes {
			if v.Secret != nil {
				assert.False(t, strings.HasPrefix(v.Secret.SecretName, natsName), "%s mounts %s", w.name, v.Secret.SecretName)
			}
		}
	}

	// The clients: the same args without the CA and the credentials (the
	// controller's key, the callout, the workers' tokens) or the node
	// accounts' API prefix (no accounts at all), nats://.
	for _, name := range []string{controllerName, workerName} {
		var want []string
		for _, a := range secure.workload(t, name).container(t).Args {
			if slices.ContainsFunc([]string{"--nats-ca=", "--nats-nkey=", "--nats-callout=", "--nats-token-file=", "--nats-api-prefix="}, func(p string) bool { return strings.HasPrefix(a, p) }) {
				continue
			}
			want = append(want, strings.Replace(a, "--nats-url=tls://", "--nats-url=nats://", 1))
		}
		assert.Equal(t, want, insecure.workload(t, name).container(t).Args, name)
	}

	// The servers: the same configuration without TLS and users.
	pki := newTestPKI(t, secure)
	secrets := map[string]map[string][]byte{serverAuthSecret: {serverAuthKey: []byte("")}}
	for name, data := range pki.secrets {
		secrets[name] = data
	}
	secureDir, insecureDir := natsVolume(t, secure, secrets), natsVolume(t, insecure, nil)
	s, o := parseNATS(t, secureDir, natsName+"-0"), parseNATS(t, insecureDir, natsName+"-0")
	assert.Nil(t, o.TLSConfig)
	assert.Nil(t, o.Cluster.TLSConfig)
	assert.Empty(t, o.Nkeys)
	assert.Empty(t, o.Users)
	for _, f := range []struct {
		name       string
		secure, in any
	}{
		{"server_name", s.ServerName, o.ServerName},
		{"port", s.Port, o.Port},
		{"http", []any{s.HTTPHost, s.HTTPPort}, []any{o.HTTPHost, o.HTTPPort}},
		{"jetstream", []any{s.JetStream, s.StoreDir, s.JetStreamMaxStore}, []any{o.JetStream, o.StoreDir, o.JetStreamMaxStore}},
		{"cluster", []any{s.Cluster.Name, s.Cluster.Port, s.Cluster.NoAdvertise}, []any{o.Cluster.Name, o.Cluster.Port, o.Cluster.NoAdvertise}},
		{"routes", routeStrings(s.Routes), routeStrings(o.Routes)},
	} {
		assert.Equal(t, f.secure, f.in, "nats.conf's %s", f.name)
	}

	srv := startNATS(t, insecureDir, natsName+"-0", 0, o.Routes, nil)
	nc, err := nats.Connect(srv.ClientURL())
	require.NoError(t, err, "the opt-out is open")
	defer nc.Close()
	_, err = nc.RTT()
	assert.NoError(t, err)
}

func routeStrings(routes []*url.URL) []string {
	var out []string
	for _, r := range routes {
		out = append(out, r.String())
	}
	slices.Sort(out)
	return out
}
