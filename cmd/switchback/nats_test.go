package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/eventstore"
	"github.com/switchback-dev/switchback/natsauth"
	"github.com/switchback-dev/switchback/natsembed"
	"github.com/switchback-dev/switchback/nodequeue"
	"github.com/switchback-dev/switchback/sim"
	"github.com/switchback-dev/switchback/test/harness/syncbuf"
)

func TestRedactURL(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"nats://127.0.0.1:4222", "nats://127.0.0.1:4222"},
		{"nats://user:s3cret@host:4222", "nats://user:***@host:4222"},
		{"tls://s3cret-token@host:4222", "tls://***@host:4222"},
		{"user:s3cret@host:4222", "user:***@host:4222"},
		{"nats://user:s3c@ret@host:4222", "nats://user:***@host:4222"},
		{"nats://a:s3cret@h1:4222,nats://h2:4222,tls://s3cret@h3:4222", "nats://a:***@h1:4222,nats://h2:4222,tls://***@h3:4222"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got := redactURL(tc.in)
			assert.Equal(t, tc.want, got)
			assert.NotContains(t, got, "s3c")
		})
	}
}

// TestNATSFlagsRefuseSecretsInArguments: every command that connects to
// NATS refuses a password or token given in its arguments, where anyone who
// can list processes reads it, names what replaces it, and never echoes
// the secret.
func TestNATSFlagsRefuseSecretsInArguments(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
users: [{name: u, user: {token: t}}]
current-context: c
`), 0o600))
	commands := map[string][]string{
		"controller": {"controller", "--kubeconfig", kubeconfig, "--nats-url", "nats://127.0.0.1:1"},
		"worker":     {"worker", "--node", "n1", "--health-addr", "", "--nats-url", "nats://127.0.0.1:1"},
		"history":    {"history", "upgrade-v2", "--nats-url", "nats://127.0.0.1:1"},
		"replay":     {"replay", "--nats-url", "nats://127.0.0.1:1"},
		"demo":       {"demo", "--data-dir", t.TempDir()},
	}
	for _, tc := range []struct {
		name     string
		args     []string
		want     []string
		commands []string
	}{
		{
			name:     "--nats-password",
			args:     []string{"--nats-password", "s3cret"},
			want:     []string{"--nats-password is retired", "--nats-password-file", "SWITCHBACK_NATS_PASSWORD"},
			commands: []string{"controller", "worker", "history", "replay", "demo"},
		},
		{
			name:     "--nats-password=",
			args:     []string{"--nats-password=s3cret"},
			want:     []string{"--nats-password is retired"},
			commands: []string{"history"},
		},
		{
			name:     "a password in --nats-url",
			args:     []string{"--nats-url", "nats://switchback-reader:s3cret@127.0.0.1:1"},
			want:     []string{"nats://switchback-reader:***@127.0.0.1:1 carries credentials", "--nats-password-file"},
			commands: []string{"controller", "worker", "history", "replay"},
		},
		{
			name:     "a token in --nats-url",
			args:     []string{"--nats-url", "nats://127.0.0.1:2,tls://s3cret@127.0.0.1:1"},
			want:     []string{"tls://***@127.0.0.1:1 carries credentials"},
			commands: []string{"replay"},
		},
		{
			name:     "--nats-cert without --nats-key",
			args:     []string{"--nats-cert", "client.pem"},
			want:     []string{"--nats-cert and --nats-key go together"},
			commands: []string{"history", "worker"},
		},
	} {
		for _, c := range tc.commands {
			t.Run(c+" "+tc.name, func(t *testing.T) {
				code, out, errOut := runCmd(t, 30*time.Second, append(commands[c], tc.args...)...)
				assert.Equal(t, 2, code, "%s\n%s", out, errOut)
				for _, w := range tc.want {
					assert.Contains(t, errOut, w)
				}
				assert.NotContains(t, out+errOut, "s3cret", "the secret is never printed")
			})
		}
	}
}

// TestHistoryAndReplayAsTheReader: an operator holding only the reader's
// credential (nkey, or password from a file or the environment) runs
// `switchback history`, `history --follow` and `replay` against a server
// running the generated authorization; a wrong password is refused.
func TestHistoryAndReplayAsTheReader(t *testing.T) {
	ref := events.ManagerRef{Namespace: "longhorn-system", Name: "upgrade-v2", UID: "uid-reader"}
	for _, tc := range []struct {
		name  string
		mode  natsauth.Mode
		flags func(dir string) []string
		env   func(dir string) string
	}{
		{"nkey", natsauth.ModeNKey, func(dir string) []string {
			return []string{"--nats-nkey", filepath.Join(dir, natsauth.ReaderDir, "reader.nk")}
		}, nil},
		{"password file", natsauth.ModePassword, func(dir string) []string {
			return []string{"--nats-user", natsauth.ReaderUser, "--nats-password-file", filepath.Join(dir, natsauth.ReaderDir, "password")}
		}, nil},
		{"password in the environment", natsauth.ModePassword, func(string) []string {
			return []string{"--nats-user", natsauth.ReaderUser}
		}, func(dir string) string { return readFile(t, dir, natsauth.ReaderDir, "password") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			auth, err := natsauth.Generate(natsauth.Config{Nodes: []string{"n1"}, Mode: tc.mode, BcryptCost: 4})
			require.NoError(t, err)
			dir := t.TempDir()
			require.NoError(t, auth.WriteFiles(dir))
			srv, err := natsembed.Start(natsembed.Options{StoreDir: t.TempDir(), Configure: auth.Configure})
			require.NoError(t, err)
			t.Cleanup(srv.Shutdown)
			store := controllerStore(t, srv, auth.Controller)
			appendStarted(t, store, ref, "n1")
			if tc.env != nil {
				t.Setenv(passwordEnv, tc.env(dir))
			}
			reader := append([]string{"--nats-url", srv.ClientURL()}, tc.flags(dir)...)

			code, out, errOut := runCmd(t, time.Minute, append([]string{"history", ref.Name}, reader...)...)
			require.Equal(t, 0, code, "%s\n%s", out, errOut)
			assert.Contains(t, out, "n1")
			code, out, errOut = runCmd(t, time.Minute, append([]string{"replay", "-o", "json"}, reader...)...)
			require.Equal(t, 0, code, "%s\n%s", out, errOut)
			assert.Contains(t, out, `"nodeID": "n1"`)

			// --follow: the history, then what is appended meanwhile.
			ctx, stop := context.WithTimeout(context.Background(), time.Minute)
			defer stop()
			var follow syncbuf.Buffer
			done := make(chan int, 1)
			go func() {
				done <- run(ctx, "switchback", append([]string{"history", ref.Name, "--follow"}, reader...), &follow, &follow)
			}()
			require.Eventually(t, func() bool { return strings.Contains(follow.String(), "n1") }, 30*time.Second, 10*time.Millisecond, "the history so far")
			appendStarted(t, store, ref, "n2")
			require.Eventually(t, func() bool { return strings.Contains(follow.String(), "n2") }, 30*time.Second, 10*time.Millisecond,
				"a new event:\n%s", follow.String())
			stop()
			assert.Equal(t, 0, <-done, follow.String())

			if tc.mode == natsauth.ModePassword {
				t.Setenv(passwordEnv, "wrong")
				code, _, errOut = runCmd(t, time.Minute, "history", ref.Name, "--nats-url", srv.ClientURL(), "--nats-user", natsauth.ReaderUser)
				assert.Equal(t, 1, code)
				assert.Contains(t, errOut, "Authorization Violation")
			}
		})
	}
}

// TestNATSTLS: --nats-ca makes the connection require TLS and verify the
// server against that CA (nats:// and tls:// URLs alike); --nats-cert and
// --nats-key present a client certificate to a server that verifies one.
func TestNATSTLS(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, dir, "ca")
	wrong := newTestCA(t, dir, "wrong-ca")
	serverCert, serverKey := ca.issue(t, dir, "server", x509.ExtKeyUsageServerAuth)
	clientCert, clientKey := ca.issue(t, dir, "client", x509.ExtKeyUsageClientAuth)
	withTLS := func(verifyClients bool) func(*server.Options) {
		return func(o *server.Options) {
			cfg, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: serverCert, KeyFile: serverKey, CaFile: ca.file, Verify: verifyClients})
			require.NoError(t, err)
			o.TLSConfig, o.TLS, o.TLSVerify, o.TLSTimeout = cfg, true, verifyClients, 2
		}
	}
	clientTLS := &tls.Config{RootCAs: ca.pool, Certificates: []tls.Certificate{loadKeyPair(t, clientCert, clientKey)}, MinVersion: tls.VersionTLS12}
	plain := "nats://" + startTLSServer(t, nil, nil)
	serverTLS := startTLSServer(t, withTLS(false), clientTLS)
	mutual := "nats://" + startTLSServer(t, withTLS(true), clientTLS)
	for _, tc := range []struct {
		name string
		url  string
		args []string
		want string // a regular expression stderr matches; empty: replay succeeds
	}{
		{"--nats-ca verifies the server (nats://)", "nats://" + serverTLS, []string{"--nats-ca", ca.file}, ""},
		{"--nats-ca verifies the server (tls://)", "tls://" + serverTLS, []string{"--nats-ca", ca.file}, ""},
		{"a server certificate of another CA", "nats://" + serverTLS, []string{"--nats-ca", wrong.file}, "certificate signed by unknown authority"},
		{"tls:// without --nats-ca: the system's roots do not know the CA", "tls://" + serverTLS, nil, "certificate signed by unknown authority"},
		{"--nats-ca against a server without TLS", plain, []string{"--nats-ca", ca.file}, "secure connection not available"},
		{"a client certificate for a server verifying one", mutual, []string{"--nats-ca", ca.file, "--nats-cert", clientCert, "--nats-key", clientKey}, ""},
		// TLS 1.3 reports the refusal after the handshake: the client sees
		// the server's alert, or the connection it closed, by timing.
		{"no client certificate for a server verifying one", mutual, []string{"--nats-ca", ca.file}, "certificate required|connection closed by remote after TLS handshake"},
		{"--nats-ca holding no certificate", "nats://" + serverTLS, []string{"--nats-ca", clientKey}, "no certificate found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runCmd(t, time.Minute, append([]string{"replay", "--nats-url", tc.url}, tc.args...)...)
			if tc.want == "" {
				assert.Equal(t, 0, code, "%s\n%s", out, errOut)
				return
			}
			assert.Equal(t, 1, code, "%s\n%s", out, errOut)
			assert.Regexp(t, tc.want, errOut)
		})
	}
}

// startTLSServer starts an embedded server (configure sets its TLS) with
// Switchback's streams, created over a connection using clientTLS, and
// returns its address (host:port).
func startTLSServer(t *testing.T, configure func(*server.Options), clientTLS *tls.Config) string {
	t.Helper()
	srv, err := natsembed.Start(natsembed.Options{StoreDir: t.TempDir(), Configure: configure})
	require.NoError(t, err)
	t.Cleanup(srv.Shutdown)
	var opts []nats.Option
	if clientTLS != nil {
		opts = append(opts, nats.Secure(clientTLS))
	}
	nc, err := srv.Connect(opts...)
	require.NoError(t, err)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	_, err = eventstore.Open(context.Background(), js, eventstore.Config{})
	require.NoError(t, err)
	return srv.Addr().String()
}

// controllerStore opens the event store (creating the streams) as u, the
// controller, and the command queue.
func controllerStore(t *testing.T, srv *natsembed.Server, u natsauth.User) *eventstore.Store {
	t.Helper()
	opts, err := u.ConnectOptions()
	require.NoError(t, err)
	nc, err := srv.Connect(opts...)
	require.NoError(t, err)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	store, err := eventstore.Open(context.Background(), js, eventstore.Config{})
	require.NoError(t, err)
	_, err = nodequeue.Open(context.Background(), js, nodequeue.Config{})
	require.NoError(t, err)
	return store
}

// appendStarted appends the first event of node's upgrade under ref.
func appendStarted(t *testing.T, store *eventstore.Store, ref events.ManagerRef, node string) {
	t.Helper()
	e := events.New(events.NodeAggregate(ref, node), events.SourceWorker+"/"+node, "test", time.Now(),
		events.NodeUpgradeStarted{Node: node, DataEngine: "v2", InstanceManagerImage: sim.NewIMImage, Attempt: 1})
	_, err := store.Append(context.Background(), events.NodeAggregate(ref, node), 0, e...)
	require.NoError(t, err)
}

// testCA is a certificate authority made for one test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
	file string // its certificate, PEM
}

func newTestCA(t *testing.T, dir, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	ca := &testCA{cert: cert, key: key, pool: x509.NewCertPool(), file: filepath.Join(dir, name+".pem")}
	ca.pool.AddCert(cert)
	writePEM(t, ca.file, "CERTIFICATE", der)
	return ca
}

// issue makes a certificate for 127.0.0.1 with usage and returns the
// certificate and key files.
func (ca *testCA) issue(t *testing.T, dir, name string, usage x509.ExtKeyUsage) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	require.NoError(t, err)
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	certFile, keyFile = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
	writePEM(t, certFile, "CERTIFICATE", der)
	writePEM(t, keyFile, "PRIVATE KEY", keyDER)
	return certFile, keyFile
}

func writePEM(t *testing.T, path, kind string, der []byte) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600))
}

func loadKeyPair(t *testing.T, certFile, keyFile string) tls.Certificate {
	t.Helper()
	c, err := tls.LoadX509KeyPair(certFile, keyFile)
	require.NoError(t, err)
	return c
}
