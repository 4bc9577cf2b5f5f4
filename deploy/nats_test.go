package deploy

import (
	"bufio"
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/switchback-dev/switchback/natsauth"
	"github.com/switchback-dev/switchback/natsauth/callout"
	"github.com/switchback-dev/switchback/natsembed"
	"github.com/switchback-dev/switchback/test/harness/testenv"
	"github.com/switchback-dev/switchback/topology"
)

// Objects of deploy/nats the configuration test needs by name.
const (
	natsConfigVolume = "config"
	serverAuthSecret = "switchback-nats-server-auth"
	serverAuthKey    = "auth.conf"
)

// natsVolume lays the NATS pod's configuration volume out in a directory,
// from the ConfigMaps of the render and the given Secrets (name → key →
// content), points nats.conf's paths at it and returns it.
func natsVolume(t *testing.T, m manifests, secrets map[string]map[string][]byte) string {
	t.Helper()
	w := m.workload(t, natsName)
	mount := ""
	for _, vm := range w.container(t).VolumeMounts {
		if vm.Name == natsConfigVolume {
			mount = vm.MountPath
		}
	}
	require.NotEmpty(t, mount, "the NATS container mounts its configuration")
	configMap := func(name string) map[string][]byte {
		data := map[string][]byte{}
		for k, v := range decode[corev1.ConfigMap](t, m.object(t, "ConfigMap", name).Object).Data {
			data[k] = []byte(v)
		}
		return data
	}
	dir := t.TempDir()
	// project writes a source's keys, or only its items where it lists some.
	project := func(what string, data map[string][]byte, items []corev1.KeyToPath) {
		if len(items) == 0 {
			for k, v := range data {
				writeFile(t, dir, k, v)
			}
			return
		}
		for _, it := range items {
			require.Contains(t, data, it.Key, "%s has no key %s", what, it.Key)
			writeFile(t, dir, it.Path, data[it.Key])
		}
	}
	v := w.volume(t, natsConfigVolume)
	switch {
	case v.ConfigMap != nil:
		project("ConfigMap "+v.ConfigMap.Name, configMap(v.ConfigMap.Name), v.ConfigMap.Items)
	case v.Projected != nil:
		for _, s := range v.Projected.Sources {
			switch {
			case s.ConfigMap != nil:
				project("ConfigMap "+s.ConfigMap.Name, configMap(s.ConfigMap.Name), s.ConfigMap.Items)
			case s.Secret != nil:
				require.False(t, s.Secret.Optional != nil && *s.Secret.Optional, "Secret %s is optional: the server would start without it", s.Secret.Name)
				require.Contains(t, secrets, s.Secret.Name, "the test has no Secret %s", s.Secret.Name)
				project("Secret "+s.Secret.Name, secrets[s.Secret.Name], s.Secret.Items)
			default:
				t.Fatalf("projected source %+v: not handled by the test", s)
			}
		}
	default:
		t.Fatalf("volume %s: neither a ConfigMap nor projected", v.Name)
	}
	conf, err := os.ReadFile(filepath.Join(dir, "nats.conf"))
	require.NoError(t, err, "the volume holds nats.conf")
	writeFile(t, dir, "nats.conf", []byte(strings.ReplaceAll(string(conf), mount+"/", dir+"/")))
	return dir
}

// parseNATS loads the laid-out nats.conf as the server of pod podName would.
func parseNATS(t *testing.T, dir, podName string) *server.Options {
	t.Helper()
	t.Setenv("POD_NAME", podName)
	o := &server.Options{}
	require.NoError(t, o.ProcessConfigFile(filepath.Join(dir, "nats.conf")))
	return o
}

// startNATS runs the laid-out configuration as pod podName's server, on
// loopback and random ports (the route port clusterPort, when not 0) with a
// temporary store, routing to routes; the server's log goes to log (nil:
// none). A JetStream cluster member needs a route to start.
func startNATS(t *testing.T, dir, podName string, clusterPort int, routes []*url.URL, log *logSink) *natsembed.Server {
	t.Helper()
	opts := natsembed.Options{Name: podName, StoreDir: t.TempDir()}
	if log != nil {
		opts.Logger = slog.New(log)
	}
	opts.Configure = func(o *server.Options) {
		store, noLog := o.StoreDir, o.NoLog
		*o = *parseNATS(t, dir, podName)
		o.NoSigs, o.NoLog, o.StoreDir, o.Routes = true, noLog, store, routes
		o.Host, o.Port, o.HTTPPort = "127.0.0.1", server.RANDOM_PORT, server.RANDOM_PORT
		o.Cluster.Host, o.Cluster.Port = "127.0.0.1", cmp.Or(clusterPort, server.RANDOM_PORT)
	}
	srv, err := natsembed.Start(opts)
	require.NoError(t, err)
	t.Cleanup(srv.Shutdown)
	return srv
}

// routeTo is the route URL of a cluster port on loopback, by name (the
// route certificate holds localhost).
func routeTo(port int) *url.URL {
	return &url.URL{Scheme: "nats", Host: net.JoinHostPort("localhost", strconv.Itoa(port))}
}

// logSink keeps a server's log lines, for the refusals it reports.
type logSink struct {
	mu    sync.Mutex
	lines []string
}

func (s *logSink) Enabled(context.Context, slog.Level) bool { return true }
func (s *logSink) WithAttrs([]slog.Attr) slog.Handler       { return s }
func (s *logSink) WithGroup(string) slog.Handler            { return s }
func (s *logSink) Handle(_ context.Context, r slog.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lines = append(s.lines, r.Message)
	return nil
}

func (s *logSink) has(sub string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range s.lines {
		if strings.Contains(l, sub) {
			return true
		}
	}
	return false
}

// TestNATSServerConfiguration runs deploy/nats's nats.conf, with test
// certificates made as certificates.yaml asks and the default install's
// authorization (`nats-auth --callout`) in the Secret's place, on embedded
// servers: the client port takes only authenticated TLS clients trusting the
// NATS CA (a worker with its pod's token, through the callout), the route
// port only servers holding the route certificate, and monitoring listens
// on loopback where the probes ask it.
func TestNATSServerConfiguration(t *testing.T) {
	m := render(t, repoPath(t, "deploy"))
	pki := newTestPKI(t, m)
	keys, err := callout.GenerateKeys()
	require.NoError(t, err)
	keys.Account = natsauth.DefaultAccount // as nats-auth writes it
	side, err := keys.Server(0)
	require.NoError(t, err)
	// node-1's account as the controller renders it once node-1 is a Node
	// (nats-auth's default layout: each worker alone in its node's account).
	auth, err := natsauth.Generate(natsauth.Config{Callout: side, Account: keys.Account, NodeAccounts: true, Nodes: []string{"node-1"}})
	require.NoError(t, err)
	secrets := map[string]map[string][]byte{serverAuthSecret: {serverAuthKey: []byte(auth.ServerConfig())}}
	for name, data := range pki.secrets {
		secrets[name] = data
	}
	dir := natsVolume(t, m, secrets)
	nats0, nats1 := natsName+"-0", natsName+"-1"

	// What nats-server reads from the file.
	o := parseNATS(t, dir, nats0)
	assert.Equal(t, nats0, o.ServerName)
	require.NotNil(t, o.TLSConfig, "the client port serves TLS")
	assert.Equal(t, tls.NoClientCert, o.TLSConfig.ClientAuth, "clients authenticate as users, not by certificate")
	assert.Len(t, o.Nkeys, 3, "the controller, the reader and the callout service: workers come through the callout")
	require.NotNil(t, o.AuthCallout)
	require.NotNil(t, o.Cluster.TLSConfig, "the routes use TLS")
	assert.Equal(t, tls.RequireAndVerifyClientCert, o.Cluster.TLSConfig.ClientAuth, "the routes use mutual TLS")
	assert.True(t, o.Cluster.NoAdvertise)
	assert.Equal(t, "127.0.0.1", o.HTTPHost, "monitoring on loopback")
	assert.Zero(t, o.HTTPSPort)

	// The certificates: the client port's names the clients' URL and
	// cannot authenticate a route; the route certificate names every route;
	// the clients trust the CA through the client port's Secret, never the
	// CA's own (which holds its key).
	served, routed := pki.secretOf(t, o.TLSConfig), pki.secretOf(t, o.Cluster.TLSConfig)
	require.NotEqual(t, served, routed, "the client port and the routes have certificates of their own")
	controller := m.workload(t, controllerName)
	clientURL, err := url.Parse(controller.flag(t, "nats-url"))
	require.NoError(t, err)
	assert.Equal(t, "tls", clientURL.Scheme)
	assert.NoError(t, pki.leaves[served].VerifyHostname(clientURL.Hostname()), "the client certificate names the clients' URL")
	assert.NotContains(t, pki.leaves[served].ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	require.NotEmpty(t, o.Routes)
	for _, r := range o.Routes {
		assert.NoError(t, pki.leaves[routed].VerifyHostname(r.Hostname()), "the route certificate names route %s", r)
	}
	for _, w := range []workload{controller, m.workload(t, workerName)} {
		v, rel := w.mountedFile(t, w.flag(t, "nats-ca"))
		secret, key := secretFile(t, v, rel)
		assert.Equal(t, served, secret, "%s's --nats-ca", w.name)
		assert.Equal(t, "ca.crt", key, "%s's --nats-ca", w.name)
	}
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	writeFile(t, filepath.Dir(caFile), "ca.crt", pki.secrets[served]["ca.crt"])

	// nats-0 routes to nats-1's port, where nothing listens until the
	// intruders have been refused.
	bPort, err := natsembed.FreePort("127.0.0.1")
	require.NoError(t, err)
	logA := &logSink{}
	a := startNATS(t, dir, nats0, 0, []*url.URL{routeTo(bPort)}, logA)
	tlsURL := "tls://" + a.Addr().String()

	// The controller's auth callout, as --nats-callout runs it: every client
	// that is not a static user is decided by it.
	env := testenv.Get(t)
	cs, err := kubernetes.NewForConfig(env.Config)
	require.NoError(t, err)
	svc, err := callout.New(callout.Config{Issuer: keys.Issuer, XKey: keys.XKey, Account: keys.Account, NodeAccounts: []string{"node-1"}, Namespace: namespace,
		Reviewer: callout.KubeReviewer{TokenReviews: cs.AuthenticationV1().TokenReviews()}})
	require.NoError(t, err)
	pub, err := keys.Service.PublicKey()
	require.NoError(t, err)
	snc, err := nats.Connect(tlsURL, nats.RootCAs(caFile), nats.Nkey(pub, keys.Service.Sign))
	require.NoError(t, err, "the callout service's own user")
	t.Cleanup(snc.Close)
	require.NoError(t, svc.Start(snc))
	t.Cleanup(svc.Stop)

	t.Run("monitoring listens on loopback where the probes ask", func(t *testing.T) {
		require.True(t, a.MonitorAddr().IP.IsLoopback(), "monitoring on %s", a.MonitorAddr())
		probe := m.workload(t, natsName).container(t).ReadinessProbe
		require.NotNil(t, probe)
		require.NotNil(t, probe.Exec, "an exec probe: port 8222 is not reachable from the kubelet")
		u, err := url.Parse(probe.Exec.Command[len(probe.Exec.Command)-1])
		require.NoError(t, err)
		assert.Equal(t, net.JoinHostPort(o.HTTPHost, strconv.Itoa(o.HTTPPort)), u.Host, "the probe asks the configured monitoring address")
		u.Host = a.MonitorAddr().String()
		resp, err := http.Get(u.String())
		require.NoError(t, err)
		_ = resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode, "%s", u)
	})

	t.Run("a plain-text client is refused", func(t *testing.T) {
		// nats.go upgrades to TLS by itself on tls_required; a client that
		// does not gets no answer: the server reads its CONNECT as a failed
		// TLS handshake and hangs up.
		conn, err := net.Dial("tcp", a.Addr().String())
		require.NoError(t, err)
		defer conn.Close()
		require.NoError(t, conn.SetDeadline(time.Now().Add(30*time.Second)))
		info, err := bufio.NewReader(conn).ReadString('\n')
		require.NoError(t, err)
		assert.Contains(t, info, `"tls_required":true`)
		_, err = io.WriteString(conn, "CONNECT {\"verbose\":false}\r\nPING\r\n")
		require.NoError(t, err)
		rest, err := io.ReadAll(conn)
		var nerr net.Error
		assert.False(t, errors.As(err, &nerr) && nerr.Timeout(), "the server hangs up")
		assert.NotContains(t, string(rest), "PONG")
	})

	t.Run("a TLS client not trusting the NATS CA fails", func(t *testing.T) {
		_, err := nats.Connect(tlsURL)
		var uerr x509.UnknownAuthorityError
		assert.ErrorAs(t, err, &uerr)
	})

	t.Run("an unauthenticated TLS client is refused", func(t *testing.T) {
		_, err := nats.Connect(tlsURL, nats.RootCAs(caFile))
		assert.ErrorIs(t, err, nats.ErrAuthorization)
	})

	t.Run("an authenticated TLS client trusting the CA connects", func(t *testing.T) {
		for _, u := range []natsauth.User{auth.Controller, auth.Reader} {
			opts, err := u.ConnectOptions()
			require.NoError(t, err)
			nc, err := nats.Connect(tlsURL, append(opts, nats.RootCAs(caFile))...)
			require.NoError(t, err, u.Credential.User)
			_, err = nc.RTT()
			assert.NoError(t, err)
			nc.Close()
		}
	})

	t.Run("a worker with its pod's token connects over TLS through the callout", func(t *testing.T) {
		worker := m.workload(t, workerName)
		token, remove, err := env.PodToken(context.Background(), namespace, worker.pod.Spec.ServiceAccountName, "node-1", callout.DefaultAudience)
		require.NoError(t, err)
		defer remove()
		tokenFile := filepath.Join(t.TempDir(), "token")
		require.NoError(t, os.WriteFile(tokenFile, []byte(token), 0o600))
		nc, err := nats.Connect(tlsURL, append(callout.WorkerOptions("node-1", tokenFile, nil), nats.RootCAs(caFile))...)
		require.NoError(t, err, "node-1's worker, with nothing but its pod's token")
		defer nc.Close()
		_, err = nc.RTT()
		assert.NoError(t, err)
		// The callout placed it alone in its node's account, and the
		// manifests give it the API prefix of that account's imports.
		cid, err := nc.GetClientID()
		require.NoError(t, err)
		connz, err := a.Connz(&server.ConnzOptions{CID: cid, Username: true})
		require.NoError(t, err)
		require.Len(t, connz.Conns, 1)
		assert.Equal(t, natsauth.NodeAccount(natsauth.DefaultAccount, "node-1"), connz.Conns[0].Account)
		assert.Equal(t, strings.TrimSuffix(topology.NodeAPIPrefix, "."), worker.flag(t, "nats-api-prefix"))

		_, err = nats.Connect(tlsURL, nats.RootCAs(caFile), nats.Token("not-a-token"))
		assert.ErrorIs(t, err, nats.ErrAuthorization, "a made-up token")
	})

	t.Run("only a server with the route certificate joins", func(t *testing.T) {
		pool := x509.NewCertPool()
		pool.AddCert(pki.ca)
		withCert := func(certPEM, keyPEM []byte) *tls.Config {
			cert, err := tls.X509KeyPair(certPEM, keyPEM)
			require.NoError(t, err)
			// Presented whatever CAs the server asks for (Go's client would
			// otherwise keep a certificate of another CA to itself).
			return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12,
				GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil }}
		}
		key, _, selfPEM := selfSigned(t, "intruder", false)
		clientPort := pki.secrets[served]
		intruders := []struct {
			name string
			tls  *tls.Config
			// refusal is how the target reports the refused handshake.
			refusal string
		}{
			{"self-signed", withCert(selfPEM, keyPEM(t, key)), "certificate signed by unknown authority"},
			{"client-port-cert", withCert(clientPort["tls.crt"], clientPort["tls.key"]), "incompatible key usage"},
			{"no-cert", &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, "didn't provide a certificate"},
			{"plain-text", nil, "first record does not look like a TLS handshake"},
		}
		// Every intruder keeps retrying while the good server joins: none is
		// ever among the target's routes.
		for _, in := range intruders {
			name := "intruder-" + in.name
			s, err := natsembed.Start(natsembed.Options{Name: name, StoreDir: t.TempDir(), Configure: func(o *server.Options) {
				o.JetStream = false
				o.Cluster = server.ClusterOpts{Name: "switchback", Host: "127.0.0.1", Port: server.RANDOM_PORT, TLSConfig: in.tls, TLSTimeout: 2}
				o.Routes = []*url.URL{routeTo(a.ClusterAddr().Port)}
			}})
			require.NoError(t, err, name)
			t.Cleanup(s.Shutdown)
			require.Eventually(t, func() bool { return logA.has(in.refusal) }, 30*time.Second, 10*time.Millisecond,
				"%s's route is refused (%s)", name, in.refusal)
			assert.Zero(t, a.NumRoutes(), "no route after %s", name)
		}

		b := startNATS(t, dir, nats1, bPort, []*url.URL{routeTo(a.ClusterAddr().Port)}, nil)
		require.Eventually(t, func() bool { return a.NumRoutes() > 0 && b.NumRoutes() > 0 }, 30*time.Second, 10*time.Millisecond,
			"%s joins %s", nats1, nats0)
		rz, err := a.Routez(&server.RoutezOptions{})
		require.NoError(t, err)
		for _, r := range rz.Routes {
			assert.Equal(t, nats1, r.RemoteName, "route %d of %s", r.Rid, nats0)
		}
	})
}
