package webhook_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"

	"github.com/switchback-dev/switchback/dataplane"
	"github.com/switchback-dev/switchback/test/harness/testpki"
	"github.com/switchback-dev/switchback/webhook"
)

// running is a Server serving on a loopback port.
type running struct {
	url     string
	dir     string // where tls.crt and tls.key live
	stopped chan error
	stop    context.CancelFunc
}

func startServer(t *testing.T, cluster dataplane.Reader, certs *testpki.Certificates) *running {
	t.Helper()
	dir := t.TempDir()
	certFile, keyFile, err := certs.WriteFiles(dir)
	require.NoError(t, err)
	srv, err := webhook.NewServer(webhook.ServerConfig{
		CertFile: certFile, KeyFile: keyFile, Admitter: newAdmitter(t, cluster, noActive),
	})
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{url: "https://" + ln.Addr().String(), dir: dir, stopped: make(chan error, 1), stop: cancel}
	go func() { r.stopped <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-r.stopped:
			assert.NoError(t, err)
		case <-time.After(10 * time.Second):
			t.Error("server did not stop")
		}
	})
	return r
}

// client trusts caPEM only, with the given TLS version bounds (0 = default).
func client(t *testing.T, caPEM []byte, maxVersion uint16) *http.Client {
	t.Helper()
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(caPEM))
	tr := &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: pool, MaxVersion: maxVersion, NextProtos: []string{"h2", "http/1.1"}},
		ForceAttemptHTTP2: true,
		DisableKeepAlives: true, // every request makes a handshake: rotation is seen at once
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

func postReview(t *testing.T, c *http.Client, url string, body []byte) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url+webhook.ValidatePath, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	return c.Do(req)
}

func TestServerServesReviewsOverTLS(t *testing.T) {
	certs := generate(t)
	s := startServer(t, threeNodes(t), certs)
	c := client(t, certs.CACert, 0)

	resp, err := postReview(t, c, s.url, reviewBody(t, request(t, manager("v2", "ghost"))))
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "HTTP/1.1", resp.Proto, "HTTP/2 is not offered")
	require.NotNil(t, resp.TLS)
	assert.GreaterOrEqual(t, resp.TLS.Version, uint16(tls.VersionTLS12))
	var review admissionv1.AdmissionReview
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&review))
	require.NotNil(t, review.Response)
	assert.False(t, review.Response.Allowed)
	assert.Contains(t, review.Response.Result.Message, "spec.nodes names unknown nodes: ghost")

	health, err := c.Get(s.url + webhook.HealthzPath)
	require.NoError(t, err)
	defer health.Body.Close()
	body, err := io.ReadAll(health.Body)
	require.NoError(t, err)
	assert.Equal(t, "ok", string(body))
}

func TestServerRefusesTLSBelow12(t *testing.T) {
	certs := generate(t)
	s := startServer(t, threeNodes(t), certs)
	_, err := client(t, certs.CACert, tls.VersionTLS11).Get(s.url + webhook.HealthzPath)
	require.Error(t, err)
}

// TestServerServesARotatedCertificate: once the mounted files change, the
// next handshake presents the new certificate, without a restart.
func TestServerServesARotatedCertificate(t *testing.T) {
	first, second := generate(t), generate(t)
	s := startServer(t, threeNodes(t), first)
	resp, err := client(t, first.CACert, 0).Get(s.url + webhook.HealthzPath)
	require.NoError(t, err)
	resp.Body.Close()

	_, _, err = second.WriteFiles(s.dir)
	require.NoError(t, err)

	resp, err = client(t, second.CACert, 0).Get(s.url + webhook.HealthzPath)
	require.NoError(t, err, "the new certificate is served")
	resp.Body.Close()
	_, err = client(t, first.CACert, 0).Get(s.url + webhook.HealthzPath)
	var unknownAuthority x509.UnknownAuthorityError
	require.ErrorAs(t, err, &unknownAuthority, "the old certificate is no longer served")
}

// TestServerSurvivesAPanic: a dependency that panics costs one request a 500,
// not the server.
func TestServerSurvivesAPanic(t *testing.T) {
	certs := generate(t)
	s := startServer(t, panickingReader{threeNodes(t)}, certs)
	c := client(t, certs.CACert, 0)
	resp, err := postReview(t, c, s.url, reviewBody(t, request(t, manager("v2"))))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusInternalServerError, resp.StatusCode)

	health, err := c.Get(s.url + webhook.HealthzPath)
	require.NoError(t, err)
	health.Body.Close()
	assert.Equal(t, http.StatusOK, health.StatusCode)
}

type panickingReader struct{ dataplane.Reader }

func (panickingReader) Nodes(context.Context) ([]dataplane.Node, error) { panic("reader bug") }

func TestServerStopsWithItsContext(t *testing.T) {
	certs := generate(t)
	s := startServer(t, threeNodes(t), certs)
	s.stop()
	select {
	case err := <-s.stopped:
		require.NoError(t, err)
		s.stopped <- nil // for the cleanup
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after its context ended")
	}
	_, err := client(t, certs.CACert, 0).Get(s.url + webhook.HealthzPath)
	require.Error(t, err, "nothing listens any more")
}

func TestNewServerNeedsAnAdmitterAndACertificate(t *testing.T) {
	_, err := webhook.NewServer(webhook.ServerConfig{CertFile: "x", KeyFile: "y"})
	require.Error(t, err)
	_, err = webhook.NewServer(webhook.ServerConfig{
		CertFile: "/nonexistent/tls.crt", KeyFile: "/nonexistent/tls.key",
		Admitter: newAdmitter(t, threeNodes(t), noActive),
	})
	require.Error(t, err)
}
