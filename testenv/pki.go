package testenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
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

// newPKI makes fresh keys and certificates. ECDSA P-256 keys are used since
// they are generated in microseconds, where RSA-2048 takes a visible share of
// the start time on a small machine; the apiserver accepts them everywhere.
func newPKI() (*pki, error) {
	now := time.Now()
	// NotBefore is set back an hour so that a slightly skewed clock between
	// processes never makes a fresh certificate "not yet valid".
	notBefore, notAfter := now.Add(-time.Hour), now.Add(7*24*time.Hour)

	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate CA key: %w", err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "switchback-testenv-ca"},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("self-sign CA: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, fmt.Errorf("parse CA: %w", err)
	}

	issue := func(serial int64, subject pkix.Name, usage x509.ExtKeyUsage, ips []net.IP, dns []string) (certPEM, keyPEM []byte, err error) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, nil, fmt.Errorf("generate key for %s: %w", subject.CommonName, err)
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial),
			Subject:      subject,
			NotBefore:    notBefore,
			NotAfter:     notAfter,
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  []x509.ExtKeyUsage{usage},
			IPAddresses:  ips,
			DNSNames:     dns,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			return nil, nil, fmt.Errorf("sign certificate for %s: %w", subject.CommonName, err)
		}
		keyPEM, err = ecKeyPEM(key)
		if err != nil {
			return nil, nil, err
		}
		return pemBlock("CERTIFICATE", der), keyPEM, nil
	}

	p := &pki{caCert: pemBlock("CERTIFICATE", caDER)}
	p.serverCert, p.serverKey, err = issue(2, pkix.Name{CommonName: "kube-apiserver"}, x509.ExtKeyUsageServerAuth,
		[]net.IP{net.IPv4(127, 0, 0, 1)}, []string{"localhost"})
	if err != nil {
		return nil, err
	}
	// O=system:masters is bound to cluster-admin by the bootstrap RBAC
	// policy, which is what lets the client install CRDs.
	p.adminCert, p.adminKey, err = issue(3, pkix.Name{CommonName: "admin", Organization: []string{"system:masters"}},
		x509.ExtKeyUsageClientAuth, nil, nil)
	if err != nil {
		return nil, err
	}

	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate service-account key: %w", err)
	}
	if p.saKey, err = ecKeyPEM(saKey); err != nil {
		return nil, err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("marshal service-account public key: %w", err)
	}
	p.saPub = pemBlock("PUBLIC KEY", pubDER)
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

func ecKeyPEM(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("marshal EC key: %w", err)
	}
	return pemBlock("EC PRIVATE KEY", der), nil
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}
