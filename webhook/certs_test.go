package webhook_test

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchback-dev/switchback/test/harness/testpki"
	"github.com/switchback-dev/switchback/webhook"
)

func parsePEMCert(t testing.TB, data []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(data)
	require.NotNil(t, block, "no PEM block")
	cert, err := x509.ParseCertificate(block.Bytes)
	require.NoError(t, err)
	return cert
}

func leafOf(t testing.TB, c *tls.Certificate) *x509.Certificate {
	t.Helper()
	require.NotNil(t, c)
	leaf, err := x509.ParseCertificate(c.Certificate[0])
	require.NoError(t, err)
	return leaf
}

func TestGenerateCertificates(t *testing.T) {
	now := time.Date(2026, 11, 29, 18, 0, 0, 0, time.UTC)
	certs, err := testpki.Serving(testpki.CertOptions{
		DNSNames: testpki.ServiceDNSNames("switchback-webhook", "longhorn-system"),
		IPs:      []net.IP{net.IPv4(127, 0, 0, 1)},
		ValidFor: time.Hour,
		Now:      now,
	})
	require.NoError(t, err)

	ca := parsePEMCert(t, certs.CACert)
	assert.True(t, ca.IsCA)
	leaf := parsePEMCert(t, certs.Cert)
	assert.False(t, leaf.IsCA)
	assert.Equal(t, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, leaf.ExtKeyUsage)
	assert.Equal(t, now.Add(time.Hour), leaf.NotAfter)
	assert.True(t, leaf.NotBefore.Before(now), "backdated against clock skew")

	roots := x509.NewCertPool()
	roots.AddCert(ca)
	for _, name := range []string{"switchback-webhook.longhorn-system.svc", "switchback-webhook.longhorn-system.svc.cluster.local", "127.0.0.1"} {
		_, err := leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: roots, CurrentTime: now})
		assert.NoError(t, err, name)
	}
	_, err = leaf.Verify(x509.VerifyOptions{DNSName: "other.longhorn-system.svc", Roots: roots, CurrentTime: now})
	assert.Error(t, err)

	_, err = tls.X509KeyPair(certs.Cert, certs.Key)
	require.NoError(t, err, "key matches certificate")

	// Two generations never share a CA: a rotation changes the caBundle.
	again, err := testpki.Serving(testpki.CertOptions{IPs: []net.IP{net.IPv4(127, 0, 0, 1)}})
	require.NoError(t, err)
	assert.NotEqual(t, certs.CACert, again.CACert)

	_, err = testpki.Serving(testpki.CertOptions{})
	require.Error(t, err)
}

func TestWriteFiles(t *testing.T) {
	certs := generate(t)
	dir := filepath.Join(t.TempDir(), "tls")
	certFile, keyFile, err := certs.WriteFiles(dir)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(dir, "tls.crt"), certFile)
	assert.Equal(t, filepath.Join(dir, "tls.key"), keyFile)
	for name, want := range map[string][]byte{"tls.crt": certs.Cert, "tls.key": certs.Key, "ca.crt": certs.CACert} {
		got, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		assert.Equal(t, want, got, name)
	}
	fi, err := os.Stat(keyFile)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "the key is private")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 3, "no temporary file left")
}

func generate(t testing.TB) *testpki.Certificates {
	t.Helper()
	c, err := testpki.Serving(testpki.CertOptions{
		DNSNames: []string{"localhost"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)},
	})
	require.NoError(t, err)
	return c
}

// secretVolume lays out certificates the way the kubelet mounts a Secret:
// tls.crt -> ..data/tls.crt, ..data -> ..<version>/, and swaps ..data
// atomically on update.
type secretVolume struct {
	t       testing.TB
	dir     string
	version int
}

func newSecretVolume(t testing.TB, c *testpki.Certificates) *secretVolume {
	v := &secretVolume{t: t, dir: t.TempDir()}
	v.update(c)
	for _, name := range []string{"tls.crt", "tls.key", "ca.crt"} {
		require.NoError(t, os.Symlink(filepath.Join("..data", name), filepath.Join(v.dir, name)))
	}
	return v
}

func (v *secretVolume) update(c *testpki.Certificates) {
	v.version++
	data := "..v" + string(rune('0'+v.version))
	_, _, err := c.WriteFiles(filepath.Join(v.dir, data))
	require.NoError(v.t, err)
	tmp := filepath.Join(v.dir, "..data_tmp")
	require.NoError(v.t, os.Symlink(data, tmp))
	require.NoError(v.t, os.Rename(tmp, filepath.Join(v.dir, "..data")))
}

func (v *secretVolume) files() (certFile, keyFile string) {
	return filepath.Join(v.dir, "tls.crt"), filepath.Join(v.dir, "tls.key")
}

func TestCertReloaderPicksUpANewCertificate(t *testing.T) {
	tests := []struct {
		name string
		// setup writes first and returns the files and a function writing
		// second in their place.
		setup func(t *testing.T, first *testpki.Certificates) (certFile, keyFile string, replace func(*testpki.Certificates))
	}{
		{
			name: "files replaced by rename",
			setup: func(t *testing.T, first *testpki.Certificates) (string, string, func(*testpki.Certificates)) {
				dir := t.TempDir()
				certFile, keyFile, err := first.WriteFiles(dir)
				require.NoError(t, err)
				return certFile, keyFile, func(c *testpki.Certificates) {
					_, _, err := c.WriteFiles(dir)
					require.NoError(t, err)
				}
			},
		},
		{
			name: "mounted Secret updated by the kubelet (symlink swap)",
			setup: func(t *testing.T, first *testpki.Certificates) (string, string, func(*testpki.Certificates)) {
				v := newSecretVolume(t, first)
				certFile, keyFile := v.files()
				return certFile, keyFile, v.update
			},
		},
		{
			name: "files rewritten in place",
			setup: func(t *testing.T, first *testpki.Certificates) (string, string, func(*testpki.Certificates)) {
				dir := t.TempDir()
				certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
				require.NoError(t, os.WriteFile(certFile, first.Cert, 0o600))
				require.NoError(t, os.WriteFile(keyFile, first.Key, 0o600))
				return certFile, keyFile, func(c *testpki.Certificates) {
					require.NoError(t, os.WriteFile(keyFile, c.Key, 0o600))
					require.NoError(t, os.WriteFile(certFile, c.Cert, 0o600))
					// Same inode, maybe same size: only the time tells. Make
					// sure it moves even on a coarse-grained file system.
					later := time.Now().Add(time.Second)
					require.NoError(t, os.Chtimes(certFile, later, later))
					require.NoError(t, os.Chtimes(keyFile, later, later))
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			first, second := generate(t), generate(t)
			certFile, keyFile, replace := tt.setup(t, first)
			r, err := webhook.NewCertReloader(certFile, keyFile, nil)
			require.NoError(t, err)

			got, err := r.GetCertificate(nil)
			require.NoError(t, err)
			firstSerial := parsePEMCert(t, first.Cert).SerialNumber
			assert.Equal(t, firstSerial, leafOf(t, got).SerialNumber)

			replace(second)
			got, err = r.GetCertificate(nil)
			require.NoError(t, err)
			assert.Equal(t, parsePEMCert(t, second.Cert).SerialNumber, leafOf(t, got).SerialNumber)
			assert.Equal(t, got, r.Certificate())
		})
	}
}

// TestCertReloaderKeepsTheLastGoodCertificate: a half-done update (a new
// certificate with the old key) keeps serving the old certificate, is logged
// once although every handshake retries it, and is picked up once complete.
func TestCertReloaderKeepsTheLastGoodCertificate(t *testing.T) {
	first, second := generate(t), generate(t)
	dir := t.TempDir()
	certFile, keyFile, err := first.WriteFiles(dir)
	require.NoError(t, err)
	var logs bytes.Buffer
	r, err := webhook.NewCertReloader(certFile, keyFile, slog.New(slog.NewTextHandler(&logs, nil)))
	require.NoError(t, err)

	half := *second
	half.Key = first.Key
	_, _, err = half.WriteFiles(dir)
	require.NoError(t, err)
	for range 3 {
		got, err := r.GetCertificate(nil)
		require.NoError(t, err)
		assert.Equal(t, parsePEMCert(t, first.Cert).SerialNumber, leafOf(t, got).SerialNumber)
	}
	assert.Equal(t, 1, strings.Count(logs.String(), "not reloaded"), logs.String())

	_, _, err = second.WriteFiles(dir)
	require.NoError(t, err)
	got, err := r.GetCertificate(nil)
	require.NoError(t, err)
	assert.Equal(t, parsePEMCert(t, second.Cert).SerialNumber, leafOf(t, got).SerialNumber)
	assert.Contains(t, logs.String(), "webhook serving certificate reloaded")

	// Files gone (a volume being remounted): still serving.
	require.NoError(t, os.Remove(certFile))
	got, err = r.GetCertificate(nil)
	require.NoError(t, err)
	assert.Equal(t, parsePEMCert(t, second.Cert).SerialNumber, leafOf(t, got).SerialNumber)
}

func TestNewCertReloaderFailsWithoutCertificate(t *testing.T) {
	dir := t.TempDir()
	_, err := webhook.NewCertReloader(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), nil)
	require.ErrorIs(t, err, os.ErrNotExist)

	certs := generate(t)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tls.crt"), certs.Cert, 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tls.key"), []byte("not a key"), 0o600))
	_, err = webhook.NewCertReloader(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), nil)
	require.Error(t, err)
}
