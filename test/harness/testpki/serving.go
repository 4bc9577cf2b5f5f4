// Package testpki makes throwaway certificates for tests: a webhook's CA and
// serving certificate (Serving, in the layout of a mounted kubernetes.io/tls
// Secret), and the CA, leaves and keys the test apiserver needs (NewCA,
// CA.Issue, ECKeyPEM). Keys are ECDSA P-256: generated in microseconds,
// where RSA-2048 takes a visible share of a test's time on a small machine.
package testpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/switchback-dev/switchback/webhook"
)

// DefaultCertValidity is how long Serving's certificates are
// valid when CertOptions.ValidFor is zero: a year, long enough not to expire
// under a running install, short enough that a leaked key does not live
// forever.
const DefaultCertValidity = 365 * 24 * time.Hour

// CertOptions describe the certificates Serving makes.
type CertOptions struct {
	// DNSNames are the serving certificate's DNS names, e.g. the Service's
	// names (see ServiceDNSNames).
	DNSNames []string
	// IPs are the serving certificate's IP addresses, e.g. 127.0.0.1 in
	// tests where the apiserver calls the webhook by URL.
	IPs []net.IP
	// ValidFor is the validity of both certificates; zero means
	// DefaultCertValidity.
	ValidFor time.Duration
	// Now is the start of the validity; zero means the current time.
	Now time.Time
}

// Certificates are a self-signed CA and a serving certificate it signed, all
// PEM-encoded.
type Certificates struct {
	// CACert is the CA certificate: the webhook configuration's caBundle.
	CACert []byte
	// Cert is the serving certificate (tls.crt).
	Cert []byte
	// Key is the serving certificate's private key (tls.key, PKCS#8).
	Key []byte
}

// ServiceDNSNames returns the names the apiserver may use to reach a Service
// (name, name.namespace, name.namespace.svc and the cluster.local form), for
// CertOptions.DNSNames. The apiserver dials name.namespace.svc.
func ServiceDNSNames(service, namespace string) []string {
	return []string{
		service,
		service + "." + namespace,
		service + "." + namespace + ".svc",
		service + "." + namespace + ".svc.cluster.local",
	}
}

// Serving makes a new self-signed CA and a serving certificate
// for opts' names and IPs, signed by it, with ECDSA P-256 keys. The CA's key
// is not returned: nothing signs with it again, so a new pair is generated at
// each rotation and the caBundle updated with the serving certificate.
func Serving(opts CertOptions) (*Certificates, error) {
	if len(opts.DNSNames) == 0 && len(opts.IPs) == 0 {
		return nil, errors.New("testpki: generate certificates: no DNS name and no IP to certify")
	}
	validFor := opts.ValidFor
	if validFor <= 0 {
		validFor = DefaultCertValidity
	}
	now := opts.Now
	if now.IsZero() {
		now = time.Now()
	}
	// Backdated a little: a clock slightly behind on the apiserver's side
	// must not see a certificate from the future.
	notBefore := now.Add(-5 * time.Minute)
	notAfter := now.Add(validFor)

	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("testpki: generate CA key: %w", err)
	}
	caSerial, err := serialNumber()
	if err != nil {
		return nil, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          caSerial,
		Subject:               pkix.Name{CommonName: "switchback-webhook-ca"},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("testpki: create CA certificate: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, fmt.Errorf("testpki: parse CA certificate: %w", err)
	}

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("testpki: generate serving key: %w", err)
	}
	serial, err := serialNumber()
	if err != nil {
		return nil, err
	}
	cn := "switchback-webhook"
	if len(opts.DNSNames) > 0 {
		cn = opts.DNSNames[0]
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		// Clients verify the SANs; the CN is only for humans reading it.
		Subject:     pkix.Name{CommonName: cn},
		DNSNames:    opts.DNSNames,
		IPAddresses: opts.IPs,
		NotBefore:   notBefore,
		NotAfter:    notAfter,
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("testpki: create serving certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("testpki: encode serving key: %w", err)
	}
	return &Certificates{
		CACert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		Cert:   pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		Key:    pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

func serialNumber() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("testpki: generate serial number: %w", err)
	}
	return n, nil
}

// WriteFiles writes the certificates into dir as tls.crt, tls.key and ca.crt
// (the layout of a mounted kubernetes.io/tls Secret), each replaced
// atomically so that a webhook.CertReloader watching them never reads half a file.
// It returns the paths of the certificate and the key.
func (c *Certificates) WriteFiles(dir string) (certFile, keyFile string, err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", fmt.Errorf("testpki: write certificates: %w", err)
	}
	certFile, keyFile = filepath.Join(dir, webhook.CertFileName), filepath.Join(dir, webhook.KeyFileName)
	for _, f := range []struct {
		path string
		data []byte
		mode os.FileMode
	}{
		{filepath.Join(dir, webhook.CAFileName), c.CACert, 0o644},
		// The key before the certificate: a reloader that sees the new
		// certificate then finds its key already there.
		{keyFile, c.Key, 0o600},
		{certFile, c.Cert, 0o644},
	} {
		if err := writeAtomic(f.path, f.data, f.mode); err != nil {
			return "", "", fmt.Errorf("testpki: write certificates: %w", err)
		}
	}
	return certFile, keyFile, nil
}

// writeAtomic writes data to a temporary file next to path and renames it
// over path.
func writeAtomic(path string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("create temporary file for %s: %w", path, err)
	}
	name := tmp.Name()
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr, os.Chmod(name, mode)); err != nil {
		_ = os.Remove(name)
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(name, path); err != nil {
		_ = os.Remove(name)
		return fmt.Errorf("replace %s: %w", path, err)
	}
	return nil
}
