package testenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/switchback-dev/switchback/test/harness/testpki"
)

// pki holds the PEM files of a throwaway cluster: a CA, the apiserver's
// serving certificate, an admin client certificate in system:masters (so
// tests are not held back by RBAC) and the service-account signing key pair
// the apiserver refuses to start without.
type pki struct {
	caCert, serverCert, serverKey, adminCert, adminKey, saKey, saPub []byte
}

// pki file names inside the environment's pki directory; start.sh uses the
// same names so that tools can find them either way.
const (
	caCertFile     = "ca.crt"
	serverCertFile = "apiserver.crt"
	serverKeyFile  = "apiserver.key"
	adminCertFile  = "admin.crt"
	adminKeyFile   = "admin.key"
	saKeyFile      = "sa.key"
	saPubFile      = "sa.pub"
)

// newPKI makes fresh keys and certificates (the apiserver accepts ECDSA
// keys everywhere).
func newPKI() (*pki, error) {
	now := time.Now()
	// NotBefore is set back an hour so that a slightly skewed clock between
	// processes never makes a fresh certificate "not yet valid".
	ca, err := testpki.NewCA("switchback-testenv-ca", now.Add(-time.Hour), now.Add(7*24*time.Hour))
	if err != nil {
		return nil, err
	}
	p := &pki{caCert: ca.PEM}
	p.serverCert, p.serverKey, err = ca.Issue(testpki.Leaf{Subject: pkix.Name{CommonName: "kube-apiserver"}, Usage: x509.ExtKeyUsageServerAuth,
		IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, DNS: []string{"localhost"}})
	if err != nil {
		return nil, err
	}
	// O=system:masters is bound to cluster-admin by the bootstrap RBAC
	// policy, which is what lets the client install CRDs.
	p.adminCert, p.adminKey, err = ca.Issue(testpki.Leaf{Subject: pkix.Name{CommonName: "admin", Organization: []string{"system:masters"}},
		Usage: x509.ExtKeyUsageClientAuth})
	if err != nil {
		return nil, err
	}

	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate service-account key: %w", err)
	}
	if p.saKey, err = testpki.ECKeyPEM(saKey); err != nil {
		return nil, err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("marshal service-account public key: %w", err)
	}
	p.saPub = testpki.PEMBlock("PUBLIC KEY", pubDER)
	return p, nil
}

// write stores the PEM files in dir; private keys are readable by the owner
// only, as the apiserver does not care but other users of the machine might.
func (p *pki) write(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create pki dir: %w", err)
	}
	files := []struct {
		name string
		data []byte
		mode os.FileMode
	}{
		{caCertFile, p.caCert, 0o644},
		{serverCertFile, p.serverCert, 0o644},
		{serverKeyFile, p.serverKey, 0o600},
		{adminCertFile, p.adminCert, 0o644},
		{adminKeyFile, p.adminKey, 0o600},
		{saKeyFile, p.saKey, 0o600},
		{saPubFile, p.saPub, 0o644},
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f.name), f.data, f.mode); err != nil {
			return fmt.Errorf("write %s: %w", f.name, err)
		}
	}
	return nil
}
