package webhook

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"sync"
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
