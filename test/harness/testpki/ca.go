package testpki

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
	"time"
)

// CA is a throwaway certificate authority that issues leaves.
type CA struct {
	cert      *x509.Certificate
	key       *ecdsa.PrivateKey
	notBefore time.Time
	notAfter  time.Time
	serial    int64
	// PEM is the CA certificate.
	PEM []byte
}

// NewCA makes a self-signed CA named cn, valid from notBefore to notAfter,
// as are the leaves it issues.
func NewCA(cn string, notBefore, notAfter time.Time) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("testpki: generate CA key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("testpki: self-sign CA: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("testpki: parse CA: %w", err)
	}
	return &CA{cert: cert, key: key, notBefore: notBefore, notAfter: notAfter, serial: 1, PEM: PEMBlock("CERTIFICATE", der)}, nil
}

// Leaf describes a certificate the CA issues.
type Leaf struct {
	Subject pkix.Name
	Usage   x509.ExtKeyUsage
	IPs     []net.IP
	DNS     []string
}

// Issue signs a new key's certificate for l and returns both in PEM (the
// key as an EC PRIVATE KEY).
func (ca *CA) Issue(l Leaf) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("testpki: generate key for %s: %w", l.Subject.CommonName, err)
	}
	ca.serial++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(ca.serial),
		Subject:      l.Subject,
		NotBefore:    ca.notBefore,
		NotAfter:     ca.notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{l.Usage},
		IPAddresses:  l.IPs,
		DNSNames:     l.DNS,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, nil, fmt.Errorf("testpki: sign certificate for %s: %w", l.Subject.CommonName, err)
	}
	if keyPEM, err = ECKeyPEM(key); err != nil {
		return nil, nil, err
	}
	return PEMBlock("CERTIFICATE", der), keyPEM, nil
}

// ECKeyPEM encodes key as an EC PRIVATE KEY block.
func ECKeyPEM(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("testpki: marshal EC key: %w", err)
	}
	return PEMBlock("EC PRIVATE KEY", der), nil
}

// PEMBlock encodes der as one PEM block of typ.
func PEMBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}
