package deploy

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// certSpec is the part of a cert-manager Certificate the test PKI follows.
type certSpec struct {
	IsCA       bool     `json:"isCA"`
	CommonName string   `json:"commonName"`
	SecretName string   `json:"secretName"`
	DNSNames   []string `json:"dnsNames"`
	Usages     []string `json:"usages"`
	IssuerRef  struct {
		Name string `json:"name"`
	} `json:"issuerRef"`
}

// testPKI issues certificates the way deploy/nats/certificates.yaml asks
// cert-manager to: a CA, and per leaf Certificate its usages and DNS names
// (plus localhost and 127.0.0.1, which the test dials), filling the Secrets
// cert-manager would fill (tls.crt, tls.key, ca.crt).
type testPKI struct {
	ca      *x509.Certificate
	caKey   *ecdsa.PrivateKey
	caPEM   []byte
	leaves  map[string]*x509.Certificate // by Secret name
	secrets map[string]map[string][]byte // Secret name → key → content
}

func newTestPKI(t *testing.T, m manifests) *testPKI {
	t.Helper()
	p := &testPKI{leaves: map[string]*x509.Certificate{}, secrets: map[string]map[string][]byte{}}
	specs := map[string]*certSpec{}
	var caSecret string
	for _, u := range m.ofKind("Certificate") {
		spec, found, err := unstructured.NestedMap(u.Object, "spec")
		require.NoError(t, err)
		require.True(t, found, "Certificate %s has a spec", u.GetName())
		s := decode[certSpec](t, spec)
		specs[u.GetName()] = s
		if s.IsCA {
			require.Empty(t, caSecret, "one CA")
			caSecret = s.SecretName
			p.caKey, p.ca, p.caPEM = selfSigned(t, s.CommonName, true)
		}
	}
	require.NotEmpty(t, caSecret, "deploy/nats makes a CA")
	// The leaves' issuer is the CA issuer backed by that CA's Secret.
	caIssuer := ""
	for _, u := range m.ofKind("Issuer") {
		if s, found, _ := unstructured.NestedString(u.Object, "spec", "ca", "secretName"); found && s == caSecret {
			caIssuer = u.GetName()
		}
	}
	require.NotEmpty(t, caIssuer, "an Issuer signs with the CA's Secret %s", caSecret)
	for name, s := range specs {
		if s.IsCA {
			continue
		}
		require.Equal(t, caIssuer, s.IssuerRef.Name, "Certificate %s is issued by the NATS CA", name)
		tmpl := &x509.Certificate{
			Subject:     pkix.Name{CommonName: name},
			DNSNames:    append(append([]string{}, s.DNSNames...), "localhost"),
			IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		}
		for _, usage := range s.Usages {
			switch usage {
			case "digital signature":
				tmpl.KeyUsage |= x509.KeyUsageDigitalSignature
			case "key encipherment":
				tmpl.KeyUsage |= x509.KeyUsageKeyEncipherment
			case "server auth":
				tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
			case "client auth":
				tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
			default:
				t.Fatalf("Certificate %s: usage %q has no mapping in the test PKI", name, usage)
			}
		}
		key, cert, certPEM := sign(t, tmpl, p.ca, p.caKey)
		p.leaves[s.SecretName] = cert
		p.secrets[s.SecretName] = map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM(t, key), "ca.crt": p.caPEM}
	}
	return p
}

// secretOf is the Secret whose certificate cfg serves.
func (p *testPKI) secretOf(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	require.NotNil(t, cfg)
	require.Len(t, cfg.Certificates, 1)
	for name, leaf := range p.leaves {
		if string(leaf.Raw) == string(cfg.Certificates[0].Certificate[0]) {
			return name
		}
	}
	t.Fatal("the certificate served is none of the test PKI's")
	return ""
}

// selfSigned makes a self-signed certificate: the CA, or an intruder's.
func selfSigned(t *testing.T, cn string, isCA bool) (*ecdsa.PrivateKey, *x509.Certificate, []byte) {
	t.Helper()
	tmpl := &x509.Certificate{Subject: pkix.Name{CommonName: cn}, IsCA: isCA, BasicConstraintsValid: isCA,
		KeyUsage: x509.KeyUsageDigitalSignature, DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	if isCA {
		tmpl.KeyUsage |= x509.KeyUsageCertSign
		tmpl.ExtKeyUsage = nil
	}
	return sign(t, tmpl, nil, nil)
}

// sign issues tmpl with a fresh key, signed by parent (nil: self-signed).
func sign(t *testing.T, tmpl, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*ecdsa.PrivateKey, *x509.Certificate, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	require.NoError(t, err)
	tmpl.SerialNumber = serial
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return key, cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func keyPEM(t *testing.T, key *ecdsa.PrivateKey) []byte {
	t.Helper()
	der, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
}
