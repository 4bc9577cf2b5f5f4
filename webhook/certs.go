package webhook

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// File names of a kubernetes.io/tls Secret mounted as a volume, which is how
// the serving certificate reaches the controller; WriteFiles uses them too.
const (
	// CertFileName holds the serving certificate chain (PEM).
	CertFileName = "tls.crt"
	// KeyFileName holds the serving certificate's private key (PEM).
	KeyFileName = "tls.key"
	// CAFileName holds the CA certificate (PEM) that signed the serving
	// certificate: the caBundle of the webhook configuration.
	CAFileName = "ca.crt"
)

// DefaultCertValidity is how long GenerateCertificates' certificates are
// valid when CertOptions.ValidFor is zero: a year, long enough not to expire
// under a running install, short enough that a leaked key does not live
// forever.
const DefaultCertValidity = 365 * 24 * time.Hour

// CertReloader serves a certificate read from files and re-reads them when
// they change, for tls.Config.GetCertificate. A Secret mounted as a volume is
// updated by the kubelet some time after the Secret changes (by swapping a
// symlink to a new directory), and a certificate manager rotates the Secret
// before expiry: reloading lets the server pick the new certificate up
// without a restart, and without a window with no certificate at all.
//
// Change detection stats both files at each handshake and compares file
// identity, size and modification time. It expects files to be replaced
// atomically (rename or symlink swap, as the kubelet does); an in-place
// rewrite is seen once its modification time differs. A reload that fails
// (a key not matching its certificate, say while only one of the two files
// was replaced) keeps the previous certificate, logs once per change and is
// retried at the next handshake.
type CertReloader struct {
	certFile, keyFile string
	log               *slog.Logger

	mu        sync.Mutex
	cert      *tls.Certificate
	certStamp fileStamp
	keyStamp  fileStamp
	// lastFailure identifies the last failed reload (file versions and
	// error), so that a failure retried at every handshake is logged once.
	lastFailure string
}

// fileStamp identifies one version of a file without reading it.
type fileStamp struct {
	info os.FileInfo
}

func (a fileStamp) same(b fileStamp) bool {
	if a.info == nil || b.info == nil {
		return a.info == nil && b.info == nil
	}
	return os.SameFile(a.info, b.info) && a.info.Size() == b.info.Size() && a.info.ModTime().Equal(b.info.ModTime())
}

func stamp(path string) (fileStamp, error) {
	// Stat, not Lstat: the mounted files are symlinks into the current data
	// directory, and what matters is the file they point to now.
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}, fmt.Errorf("stat %s: %w", path, err)
	}
	return fileStamp{info: fi}, nil
}

// NewCertReloader loads the certificate and key from certFile and keyFile
// (PEM). It fails when they cannot be loaded now: a server that starts
// without a certificate would only fail every handshake. A nil logger
// discards.
func NewCertReloader(certFile, keyFile string, logger *slog.Logger) (*CertReloader, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	r := &CertReloader{certFile: certFile, keyFile: keyFile, log: logger}
	cs, ks, err := r.stamps()
	if err != nil {
		return nil, fmt.Errorf("webhook: load serving certificate: %w", err)
	}
	cert, err := loadKeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("webhook: load serving certificate: %w", err)
	}
	r.cert, r.certStamp, r.keyStamp = cert, cs, ks
	return r, nil
}

func (r *CertReloader) stamps() (cert, key fileStamp, err error) {
	cert, err = stamp(r.certFile)
	if err != nil {
		return fileStamp{}, fileStamp{}, err
	}
	key, err = stamp(r.keyFile)
	if err != nil {
		return fileStamp{}, fileStamp{}, err
	}
	return cert, key, nil
}

func loadKeyPair(certFile, keyFile string) (*tls.Certificate, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("load key pair %s, %s: %w", certFile, keyFile, err)
	}
	return &cert, nil
}

// GetCertificate returns the current certificate, reloading it first when
// the files changed. It has the signature of tls.Config.GetCertificate and
// never fails once a certificate was loaded: a broken update keeps the last
// good certificate.
func (r *CertReloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	cs, ks, err := r.stamps()
	if err != nil {
		// The files vanished (a volume being remounted): keep serving.
		r.logFailure(err.Error(), err)
		return r.cert, nil
	}
	if cs.same(r.certStamp) && ks.same(r.keyStamp) {
		return r.cert, nil
	}
	cert, err := loadKeyPair(r.certFile, r.keyFile)
	if err != nil {
		r.logFailure(fmt.Sprintf("%s %d %s %d %s", cs.info.ModTime(), cs.info.Size(), ks.info.ModTime(), ks.info.Size(), err), err)
		return r.cert, nil
	}
	r.cert, r.certStamp, r.keyStamp = cert, cs, ks
	r.lastFailure = ""
	attrs := []any{slog.String("cert", r.certFile)}
	if cert.Leaf != nil {
		attrs = append(attrs, slog.String("serial", cert.Leaf.SerialNumber.String()),
			slog.Time("notAfter", cert.Leaf.NotAfter))
	}
	r.log.Info("webhook serving certificate reloaded", attrs...)
	return r.cert, nil
}

// logFailure logs a failed reload once per distinct failure, since every
// handshake retries it.
func (r *CertReloader) logFailure(key string, err error) {
	if key == r.lastFailure {
		return
	}
	r.lastFailure = key
	r.log.Warn("webhook serving certificate not reloaded; serving the previous one",
		slog.String("cert", r.certFile), slog.String("key", r.keyFile), slog.Any("error", err))
}

// Certificate returns the certificate currently served, without checking the
// files.
func (r *CertReloader) Certificate() *tls.Certificate {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cert
}

// TLSConfig returns a server configuration serving the reloaded certificate
// with TLS 1.2 or later (the kube-apiserver speaks both 1.2 and 1.3; older
// versions have known weaknesses). HTTP/2 is not offered: the apiserver's
// webhook client does not need it, and HTTP/1.1 keeps the server out of
// HTTP/2-specific denial-of-service issues such as rapid reset
// (CVE-2023-44487).
func (r *CertReloader) TLSConfig() *tls.Config {
	return &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: r.GetCertificate,
		NextProtos:     []string{"http/1.1"},
	}
}

// CertOptions describe the certificates GenerateCertificates makes.
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

// GenerateCertificates makes a new self-signed CA and a serving certificate
// for opts' names and IPs, signed by it, with ECDSA P-256 keys. The CA's key
// is not returned: nothing signs with it again, so a new pair is generated at
// each rotation and the caBundle updated with the serving certificate.
func GenerateCertificates(opts CertOptions) (*Certificates, error) {
	if len(opts.DNSNames) == 0 && len(opts.IPs) == 0 {
		return nil, errors.New("webhook: generate certificates: no DNS name and no IP to certify")
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
		return nil, fmt.Errorf("webhook: generate CA key: %w", err)
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
		return nil, fmt.Errorf("webhook: create CA certificate: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, fmt.Errorf("webhook: parse CA certificate: %w", err)
	}

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("webhook: generate serving key: %w", err)
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
		return nil, fmt.Errorf("webhook: create serving certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("webhook: encode serving key: %w", err)
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
		return nil, fmt.Errorf("webhook: generate serial number: %w", err)
	}
	return n, nil
}

// WriteFiles writes the certificates into dir as tls.crt, tls.key and ca.crt
// (the layout of a mounted kubernetes.io/tls Secret), each replaced
// atomically so that a CertReloader watching them never reads half a file.
// It returns the paths of the certificate and the key.
func (c *Certificates) WriteFiles(dir string) (certFile, keyFile string, err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", fmt.Errorf("webhook: write certificates: %w", err)
	}
	certFile, keyFile = filepath.Join(dir, CertFileName), filepath.Join(dir, KeyFileName)
	for _, f := range []struct {
		path string
		data []byte
		mode os.FileMode
	}{
		{filepath.Join(dir, CAFileName), c.CACert, 0o644},
		// The key before the certificate: a reloader that sees the new
		// certificate then finds its key already there.
		{keyFile, c.Key, 0o600},
		{certFile, c.Cert, 0o644},
	} {
		if err := writeAtomic(f.path, f.data, f.mode); err != nil {
			return "", "", fmt.Errorf("webhook: write certificates: %w", err)
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
